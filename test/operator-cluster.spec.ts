import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { GIT_IMAGE, KANIKO_IMAGE } from '../src/build-methods/images.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import {
  type ClusterTarget,
  clusterTarget,
  REAL_CLUSTER_KUBECONFIG,
} from './support/kube/cluster-target.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { until } from './support/operator-ground.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const NAMESPACE = process.env['KILN_TEST_NAMESPACE'] ?? 'kiln-e2e';
const BUILD_API = 'kiln.dev/v1alpha1';
/** Where the builds push. The double pushes nowhere; a real cluster needs a registry it trusts. */
const REGISTRY = process.env['KILN_TEST_REGISTRY'] ?? 'registry.example.com';
/**
 * The repository the builds clone (their `source` init container). The double's git image is a
 * script; a real cluster clones for real, so it must be one the cluster reaches.
 */
const REPOSITORY =
  process.env['KILN_TEST_GIT_REPOSITORY'] ?? 'https://github.com/octocat/Hello-World.git';
/** An image reference without its digest or tag: how the double's scripts name images. */
const repositoryOf = (image: string) => image.replace(/@.*$/, '').replace(/:[^/:]*$/, '');

if (REAL_CLUSTER_KUBECONFIG !== undefined)
  console.warn(`KUBECONFIG is set: the operator suite on any cluster runs against that cluster`);

/**
 * The operator end to end on any Kubernetes, so that the suite can target a real cluster through
 * KUBECONFIG (docs/development.md, "The operator suites and a real cluster"): kiln (KILN_ROLE=all,
 * KILN_RUNNER=kubernetes) reaches the cluster through a kubeconfig only, and the test looks through
 * kiln's REST API, its WebSocket and kubectl, nothing else. With KUBECONFIG set it runs on that
 * cluster (the builder images run for real; KILN_TEST_REGISTRY names a registry they can push to);
 * without, on the API server double started as its own process, whose kubelet runs each builder
 * image by a script. The suites that inject faults through the double's hooks run on the double
 * only; they say so when KUBECONFIG is set.
 */
describe('the operator on any cluster', () => {
  let dir: string;
  let cluster: ClusterTarget;
  let kiln: TestApp;
  let seeded: Seeded;
  /** Tenant A's project whose repository the cluster can clone. */
  let project: string;
  let admin: ApiClient;
  let token: string;
  const made: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-operator-cluster-'));
    cluster = await clusterTarget({
      dir,
      namespace: NAMESPACE,
      scripts: {
        // 4 s a build: long enough to cancel one while it runs.
        [repositoryOf(KANIKO_IMAGE)]: { lines: 40, linesPerSecond: 10 },
        [repositoryOf(GIT_IMAGE)]: { lines: ["Cloning into '/workspace'..."] },
      },
    });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: cluster.kubeconfig,
        KILN_BUILD_NAMESPACE: NAMESPACE,
        KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '30',
      },
    });
    seeded = await seedTenancy(kiln);
    project = (await kiln.app.get(ProjectsService).create(seeded.tenantA, 'e2e', REPOSITORY)).id;
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  }, 120_000);

  afterAll(async () => {
    await kiln?.close();
    if (cluster?.kind === 'KUBECONFIG' && made.length > 0)
      await cluster.kubectl('delete', 'build', '--ignore-not-found', '--wait=false', ...made);
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  async function ended(id: string, ms = 600_000): Promise<Record<string, any>> {
    return until(
      `build ${id} to end`,
      async () => {
        const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
        return ['success', 'failed', 'cancelled'].includes(build.status) ? build : undefined;
      },
      ms,
      250,
    );
  }

  async function started(dockerfile: string): Promise<string> {
    const manifest = wizardManifest('kaniko');
    const config = manifest['build_config'] as Record<string, unknown>;
    config['dockerfile'] = dockerfile;
    config['registry_repository'] = `${REGISTRY}/kiln-e2e/app`;
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: project,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    made.push(id);
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  /** Every stored line the builder printed, page by page. */
  async function builderLines(id: string): Promise<string[]> {
    const lines: string[] = [];
    for (let offset = 0; ;) {
      const { logs } = await jsonOf(
        await admin.request('GET', `/builds/${id}/logs?limit=1000&offset=${offset}`),
      );
      for (const line of logs) if (line.metadata?.container === 'build') lines.push(line.message);
      if (logs.length < 1000) return lines;
      offset += logs.length;
    }
  }

  /** `kubectl get kb` split into words. */
  const table = async (...names: string[]) => {
    const run = await cluster.kubectl('get', 'kb', ...names);
    expect(run.code).toBe(0);
    return run.stdout
      .trim()
      .split('\n')
      .map((row) => row.split(/\s+/));
  };

  /**
   * A kaniko Build named `name` of this project, as a user would write it: `kubectl apply` of its
   * YAML.
   */
  async function apply(name: string, projectId: string): Promise<void> {
    made.push(name);
    const build = {
      apiVersion: BUILD_API,
      kind: 'Build',
      metadata: { name, namespace: NAMESPACE },
      spec: {
        tenantId: seeded.tenantA,
        projectId,
        method: 'kaniko',
        config: { dockerfile: 'FROM scratch\n' },
        output: { image: `${REGISTRY}/kiln-e2e/${name}`, tags: ['e2e'] },
      },
    };
    const path = join(dir, `${name}.yaml`);
    writeFileSync(path, stringify(build));
    expect(await cluster.kubectl('apply', '-f', path)).toMatchObject({ code: 0 });
  }

  it('runs a kaniko build from REST: its Job, the log stored and seen live, success (and its row in kubectl get kb)', async () => {
    const id = await started('FROM scratch\nCOPY . /\n');
    const live = new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
      { headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA } },
    );
    await live.opened;

    const build = await ended(id);

    expect(build.status).toBe('success');
    const job = await cluster.get('batch/v1', 'Job', `kiln-${id}`);
    expect(job?.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Build', name: id, controller: true }),
    ]);
    const stored = await builderLines(id);
    expect(stored.length).toBeGreaterThan(0);
    expect(await live.closed).toEqual({ code: 1000, reason: 'success' });
    expect(
      live.messages.filter((m) => m.metadata?.container === 'build').map((m) => m.message),
    ).toEqual(stored);
    await until('the Build to mirror success', async () =>
      (await cluster.get(BUILD_API, 'Build', id))?.status?.state === 'success' ? true : undefined,
    );
    const rows = await table(id);
    expect(rows[0]).toEqual(['NAME', 'NUMBER', 'METHOD', 'STATUS', 'REASON', 'AGE']);
    expect(rows[1]!.slice(0, 4)).toEqual([id, String(build.build_number), 'kaniko', 'success']);
  });

  it('cancels a running build: cancelled, its Job gone, the lines printed before the cancel kept', async () => {
    const id = await started(
      'FROM busybox:1.36\nRUN for i in $(seq 1 600); do echo "line $i"; sleep 1; done\n',
    );
    await until('the first lines', async () => (await builderLines(id)).length >= 3, 600_000, 250);

    const cancelled = await admin.request('POST', `/builds/${id}/cancel`, { reason: 'e2e' });

    expect(cancelled.status).toBe(200);
    const build = await ended(id, 120_000);
    expect(build.status).toBe('cancelled');
    expect((await builderLines(id)).length).toBeGreaterThanOrEqual(3);
    await until('the Job to go', async () =>
      (await cluster.get('batch/v1', 'Job', `kiln-${id}`)) === undefined ? true : undefined,
    );
  });

  it('a Build applied by hand (kubectl apply; a create without kubectl): registered with a number, listed by REST, run to success', async () => {
    const name = `applied-${Date.now()}`;
    await apply(name, project);

    const buildId = await until(
      'registration',
      async () =>
        (await cluster.get(BUILD_API, 'Build', name))?.status?.buildId as string | undefined,
      60_000,
      250,
    );
    const listed = await jsonOf(await admin.request('GET', '/builds?limit=100'));
    expect(listed.builds.map((b: any) => b.id)).toContain(buildId);
    const build = await ended(buildId);
    expect(build.status).toBe('success');
    expect(build.build_number).toEqual(expect.any(Number));
  });

  it('ends a Build naming a project its tenant does not have with InvalidSpec and a Warning Event', async () => {
    const name = `unknown-project-${Date.now()}`;
    await apply(name, seeded.projectB);

    const status = await until(
      'the refusal',
      async () => (await cluster.get(BUILD_API, 'Build', name))?.status,
      60_000,
      250,
    );
    expect(status).toMatchObject({ state: 'failed', failureReason: 'InvalidSpec' });
    await until('the Event', async () =>
      (await cluster.list('v1', 'Event')).some(
        (e) =>
          e.involvedObject?.name === name && e.reason === 'InvalidSpec' && e.type === 'Warning',
      ),
    );
  });
});
