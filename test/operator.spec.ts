import type { V1Job } from '@kubernetes/client-node';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { GIT_IMAGE, KANIKO_IMAGE } from '../src/build-methods/images.js';
import { DEFAULT_JOB_SETTINGS } from '../src/build-methods/job.js';
import { BUILD_METHODS } from '../src/build-methods/methods.js';
import { LOGS_FINALIZER } from '../src/operator/builds/build-reconciler.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { kubectlWith } from './support/kube/kubectl.js';
import { type ContainerScript, numberedLine } from './support/kube/kubelet.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { until } from './support/operator-ground.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import { unpromised } from './support/kube/conformance.js';

const NS = 'kiln-builds';
const BUILDS = ['kiln.dev/v1alpha1', 'builds'] as const;

noteDoubleOnly('the operator');

/**
 * The operator end to end, in one process with the API (KILN_ROLE=all, KILN_RUNNER=kubernetes),
 * against the Kubernetes API server double over HTTP: its Job controller makes the pods and its
 * kubelet runs them by per-image scripts. Real Postgres, real HTTP and WebSocket clients.
 */
describe('the operator', () => {
  let cluster: KubeApiServer;
  let dir: string;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let token: string;

  beforeAll(async () => {
    cluster = await KubeApiServer.start({ crdDirectories: ['crds'], namespaces: ['default', NS] });
    dir = mkdtempSync(join(tmpdir(), 'kiln-operator-'));
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, NS),
        KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS: '1',
        KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '5',
      },
    });
    seeded = await seedTenancy(kiln);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  });

  afterAll(async () => {
    await kiln.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  afterEach(() => cluster.kubelet.clearScripts());

  const builder = (script: ContainerScript) => cluster.kubelet.script(KANIKO_IMAGE, script);
  const resource = (name: string) =>
    cluster.objects(...BUILDS, NS).find((b) => b.metadata.name === name) as
      Record<string, any> | undefined;
  const jobOf = (id: string) =>
    (cluster.objects('batch/v1', 'jobs', NS) as V1Job[]).find(
      (j) => j.metadata?.name === `kiln-${id}`,
    );

  async function ended(id: string): Promise<Record<string, any>> {
    return until(`build ${id} to end`, async () => {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      return ['success', 'failed', 'cancelled'].includes(build.status) ? build : undefined;
    });
  }

  async function started(manifest: Record<string, unknown>): Promise<string> {
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  async function logLines(id: string): Promise<Array<Record<string, any>>> {
    const page = await jsonOf(await admin.request('GET', `/builds/${id}/logs?limit=1000`));
    return page.logs;
  }

  /** The Job the build's method translates its stored spec into (the method's table). */
  async function methodTable(id: string): Promise<V1Job> {
    const [row] = await kiln.dataSource.query(
      'SELECT spec, tenant_id, project_id, build_number FROM builds WHERE id = $1',
      [id],
    );
    const translation = BUILD_METHODS[row.spec.method as keyof typeof BUILD_METHODS].jobSpec(
      row.spec,
      {
        buildId: id,
        tenantId: row.tenant_id,
        projectId: row.project_id,
        buildNumber: row.build_number,
        namespace: NS,
        settings: DEFAULT_JOB_SETTINGS,
        configMapName: `kiln-${id}`,
      },
    );
    if (translation.kind === 'unsupported') throw new Error(translation.reason);
    return translation.job;
  }

  const failureReasonOf = async (id: string): Promise<string> =>
    (await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [id]))[0]
      .failure_reason;

  it.each(['kaniko', 'container', 'reference form'] as const)(
    'runs a %s build: Job from the method, every printed line stored in order and seen live, success',
    async (form) => {
      const n = 300;
      builder({ lines: n, linesPerSecond: 600 });
      cluster.kubelet.script(GIT_IMAGE, { lines: ['Cloning into /workspace...'] });
      let id: string;
      if (form === 'reference form') {
        id = (await admin.createBuild(seeded.projectA, `operator-${Date.now()}`)).id as string;
        expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
      } else {
        const manifest = wizardManifest(form);
        if (form === 'container') {
          manifest['base_image'] = 'alpine:3.20';
          manifest['instructions'] = ['RUN echo hi'];
        }
        id = await started(manifest);
      }
      const live = new LogStreamClient(
        `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
        { headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA } },
      );
      await live.opened;

      const build = await ended(id);

      expect(build.status).toBe('success');
      const job = jobOf(id)!;
      expect(job.metadata?.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Build', name: id, controller: true }),
      ]);
      expect(job.spec?.backoffLimit).toBe(0);
      expect(job.spec?.template.spec?.containers[0]?.image).toBe(KANIKO_IMAGE);
      // Everything the method's table sets, as it sets it (the API server adds its defaults).
      expect(job.spec).toMatchObject((await methodTable(id)).spec!);
      // Set once the logs are stored, right after the outcome.
      await until('the Job TTL', () => jobOf(id)?.spec?.ttlSecondsAfterFinished);
      expect(jobOf(id)?.spec?.ttlSecondsAfterFinished).toBe(3600);
      const printed = Array.from({ length: n }, (_, i) => numberedLine(i + 1, n));
      const all = await logLines(id);
      const stored = all.filter((l) => l.metadata?.container === 'build');
      expect(stored.map((l) => l.message)).toEqual(printed);
      if (form === 'reference form') {
        // The source checkout (an init container) runs, and is stored, before the builder
        // (after kiln's own notes on the build).
        expect(all.find((l) => l.metadata?.container !== 'kiln')).toMatchObject({
          message: 'Cloning into /workspace...',
          metadata: expect.objectContaining({ container: 'source' }),
        });
      }
      expect(await live.closed).toEqual({ code: 1000, reason: 'success' });
      expect(
        live.messages.filter((m) => m.metadata?.container === 'build').map((m) => m.message),
      ).toEqual(printed);
      await until('the finalizer to go', () =>
        resource(id)?.metadata.finalizers?.includes(LOGS_FINALIZER) === false ? true : undefined,
      );
      expect(resource(id)?.status).toMatchObject({
        state: 'success',
        buildNumber: build.build_number,
        conditions: [expect.objectContaining({ type: 'Succeeded', status: 'True' })],
      });
    },
  );

  it.each<[string, ContainerScript, string, RegExp]>([
    [
      'a failing step',
      { lines: ['ERROR: step 3 failed'], exitCode: 2 },
      'BuildFailed',
      /exited with code 2/,
    ],
    ['an OOM kill', { lines: 5, oomKilled: true }, 'OutOfMemory', /ran out of memory/],
    ['an eviction', { lines: 5, evict: true }, 'PodEvicted', /evicted/],
  ])('fails on %s with its reason and keeps the log', async (_name, script, reason, message) => {
    builder(script);
    const id = await started(wizardManifest('kaniko'));

    const build = await ended(id);

    expect(build.status).toBe('failed');
    expect(build.error_message).toMatch(message);
    expect(await failureReasonOf(id)).toBe(reason);
    await until('the status', () => (resource(id)?.status?.state === 'failed' ? true : undefined));
    expect(resource(id)?.status).toMatchObject({ state: 'failed', failureReason: reason });
  });

  it('fails with ImagePullFailed when the builder image cannot be pulled, and stops its Job', async () => {
    builder({ pullError: 'manifest unknown' });
    const id = await started(wizardManifest('kaniko'));

    const build = await ended(id);

    expect(build.status).toBe('failed');
    expect(build.error_message).toMatch(
      // ErrImagePull or ImagePullBackOff, whichever the kubelet shows at the timeout.
      /could not be pulled: (Back-off pulling image .*)?manifest unknown/,
    );
    expect(await failureReasonOf(id)).toBe('ImagePullFailed');
    await until('the Job to be deleted', () => (jobOf(id) === undefined ? true : undefined));
  });

  it('fails a build that outlives its timeout with TimedOut', async () => {
    builder({ hang: true, lines: ['working'] });
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: wizardManifest('kaniko'),
    });
    const id = (await jsonOf(created)).data.id as string;
    // The timeout is captured in the spec at create (KILN_BUILD_TIMEOUT_SECONDS): shorten it.
    await kiln.dataSource.query(
      `UPDATE builds SET spec = jsonb_set(spec, '{timeoutSeconds}', '1') WHERE id = $1`,
      [id],
    );
    await admin.request('POST', `/builds/${id}/start`);

    const build = await ended(id);

    expect(build.status).toBe('failed');
    expect(build.error_message).toBe(
      'the build ran longer than its timeout of 1 s and was stopped',
    );
    expect(jobOf(id)?.spec?.activeDeadlineSeconds).toBe(1);
    expect(await failureReasonOf(id)).toBe('TimedOut');
    expect((await logLines(id)).map((l) => l.message)).toContain('working');
  });

  it('cancels a running build: lines printed before the cancel kept, the Job deleted', async () => {
    builder({ lines: 100_000, linesPerSecond: 200 });
    const id = await started(wizardManifest('kaniko'));
    await until('lines', async () => ((await logLines(id)).length >= 20 ? true : undefined));

    const cancelled = await admin.request('POST', `/builds/${id}/cancel`, { reason: 'enough' });

    expect(cancelled.status).toBe(200);
    await until('the Job to be deleted', () => (jobOf(id) === undefined ? true : undefined));
    const lines = (await logLines(id)).filter((l) => l.metadata?.container === 'build');
    expect(lines.length).toBeGreaterThanOrEqual(20);
    expect(lines.map((l) => l.message)).toEqual(lines.map((_, i) => numberedLine(i + 1, 100_000)));
    expect((await jsonOf(await admin.request('GET', `/builds/${id}`))).status).toBe('cancelled');
  });

  it('registers a Build applied without the API, runs it and lists it with a number', async () => {
    builder({ lines: 10 });
    const name = 'applied-by-hand';
    cluster.seed({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: { name, namespace: NS },
      spec: {
        tenantId: seeded.tenantA,
        projectId: seeded.projectA,
        method: 'kaniko',
        form: 'wizard',
        config: { dockerfile: 'FROM scratch\n' },
        output: { image: 'registry.example.com/team/app', tags: ['v1'] },
      },
    });

    const buildId = await until(
      'registration',
      () => resource(name)?.status?.buildId as string | undefined,
    );
    const build = await ended(buildId);

    expect(build.status).toBe('success');
    const listed = await jsonOf(await admin.request('GET', '/builds?limit=100'));
    expect(listed.builds.map((b: any) => b.id)).toContain(buildId);
    await until('the status', () =>
      resource(name)?.status?.state === 'success' ? true : undefined,
    );
    expect(resource(name)?.status).toMatchObject({
      state: 'success',
      buildNumber: build.build_number,
    });
  });

  /** Seeds a kaniko Build of tenant A (spec `overrides` over it) and waits for its refusal. */
  async function refused(name: string, overrides: Record<string, unknown>): Promise<any> {
    cluster.seed({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: { name, namespace: NS },
      spec: {
        tenantId: seeded.tenantA,
        projectId: seeded.projectA,
        method: 'kaniko',
        config: { dockerfile: 'FROM scratch\n' },
        output: { image: 'registry.example.com/team/app', tags: ['v1'] },
        ...overrides,
      },
    });
    return until('the refusal', () => resource(name)?.status);
  }

  it('refuses a Build whose source repository carries credentials, with InvalidSpec, registering nothing and echoing none of them', async () => {
    const name = 'credentials-in-url';
    const status = await refused(name, {
      source: { repository: 'https://ci:PASSWORD-in-url@git.example.com/team/app.git' },
    });

    expect(status).toMatchObject({
      state: 'failed',
      failureReason: 'InvalidSpec',
      message: expect.stringContaining('spec.source.repository must not carry credentials'),
    });
    expect(status.buildId).toBeUndefined();
    expect(JSON.stringify(status)).not.toContain('PASSWORD-in-url');
    const events = await until('the InvalidSpec Event', () => {
      const written = cluster
        .objects('v1', 'events', NS)
        .filter((e: any) => e.involvedObject?.name === name);
      return written.length > 0 ? written : undefined;
    });
    expect(JSON.stringify(events)).not.toContain('PASSWORD-in-url');
  });

  it('refuses a Build naming a project the tenant does not have, with InvalidSpec', async () => {
    const name = 'unknown-project';
    const status = await refused(name, { projectId: seeded.projectB });

    expect(status).toMatchObject({
      state: 'failed',
      failureReason: 'InvalidSpec',
      conditions: [
        expect.objectContaining({ type: 'Succeeded', status: 'False', reason: 'InvalidSpec' }),
      ],
    });
    // The Event is written after the status.
    await until('the InvalidSpec Event', () =>
      cluster
        .objects('v1', 'events', NS)
        .some((e: any) => e.involvedObject?.name === name && e.reason === 'InvalidSpec'),
    );
  });

  /**
   * `kubectl apply -f config/samples/` as a new user runs it: every sample at once, in one project
   * and often on one branch, with the project's kubectl.
   */
  async function applySamples(samples: Array<Record<string, any>>): Promise<string> {
    const samplesDir = join(dir, 'samples');
    mkdirSync(samplesDir, { recursive: true });
    for (const sample of samples) {
      writeFileSync(join(samplesDir, `${sample.metadata.name}.yaml`), stringify(sample));
    }
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig-kubectl'), cluster.url, NS);
    const applied = await kubectlWith(kubeconfig, dir, '-n', NS, 'apply', '-f', samplesDir);
    expect(applied).toMatchObject({ code: 0, stderr: '' });
    return applied.stdout;
  }

  it('kubectl apply -f config/samples/: every sample registers with a number, runs side by side with the others to Succeeded=True, and is listed by REST and kubectl', async () => {
    const samples = readdirSync('config/samples')
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((file) => {
        const sample = parse(readFileSync(join('config/samples', file), 'utf8'));
        sample.spec.tenantId = seeded.tenantA;
        sample.spec.projectId = seeded.projectA;
        return sample as Record<string, any>;
      });
    expect(samples.length).toBeGreaterThanOrEqual(6);
    // Slow enough that every build is still running when the last one registers.
    builder({ lines: 20, linesPerSecond: 20 });

    const applied = await applySamples(samples);

    expect(applied.trim().split('\n').sort()).toEqual(
      samples.map((sample) => `build.kiln.dev/${sample.metadata.name} created`).sort(),
    );
    const ran = new Map<string, Record<string, any>>();
    const ids = await Promise.all(
      samples.map((sample) =>
        until(
          `${sample.metadata.name} to register`,
          () => resource(sample.metadata.name)?.status?.buildId as string | undefined,
          60_000,
        ),
      ),
    );
    for (const [index, sample] of samples.entries()) {
      ran.set(sample.metadata.name, {
        ...(await ended(ids[index]!)),
        method: sample.spec.method,
      });
    }

    const listed = await jsonOf(await admin.request('GET', '/builds?limit=100'));
    for (const [name, build] of ran) {
      expect(listed.builds.map((b: any) => b.id)).toContain(build.id);
      expect(build.build_number).toEqual(expect.any(Number));
      expect({ name, status: build.status, error: build.error_message }).toEqual({
        name,
        status: 'success',
        error: null,
      });
      if (['kaniko', 'container'].includes(build.method)) {
        const lines = await logLines(build.id);
        expect(lines.filter((l) => l.metadata?.container === 'build')).toHaveLength(20);
      }
    }
    await until('every Build to report Succeeded=True', () =>
      [...ran.keys()].every((name) =>
        resource(name)?.status?.conditions?.some(
          (c: any) => c.type === 'Succeeded' && c.status === 'True',
        ),
      )
        ? true
        : undefined,
    );
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig-kubectl'), cluster.url, NS);
    const table = await kubectlWith(kubeconfig, dir, '-n', NS, 'get', 'kb', ...ran.keys());
    expect(table.code).toBe(0);
    const [header, ...rows] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'NUMBER', 'METHOD', 'STATUS', 'REASON', 'AGE']);
    for (const row of rows) {
      const [name, number, method, status] = row.split(/\s+/);
      const build = ran.get(name!)!;
      expect([number, method, status]).toEqual([
        String(build.build_number),
        build.method,
        build.status,
      ]);
    }
    expect(rows).toHaveLength(ran.size);
  }, 180_000);

  it('sent only requests the double promises to serve faithfully (docs/adr/0041)', () => {
    expect(unpromised(cluster.requests)).toEqual([]);
  });
});
