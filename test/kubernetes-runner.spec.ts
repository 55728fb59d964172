import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, distinct, wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import { LOGS_FINALIZER } from '../src/operator/api/build-resource.js';

const NAMESPACE = 'kiln-builds';
const BUILDS = ['kiln.dev/v1alpha1', 'builds'] as const;

noteDoubleOnly('KubernetesRunner');

/**
 * KILN_RUNNER=kubernetes, API side: every build is a Build resource the API writes and the
 * operator reconciles. Against the Kubernetes API server double over real HTTP, with the CRD
 * from crds/ (schema-validated as a real server would).
 */
describe('the Kubernetes runner (API side)', () => {
  let cluster: KubeApiServer;
  let dir: string;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  beforeAll(async () => {
    cluster = await KubeApiServer.start({
      crdDirectories: ['crds'],
      namespaces: ['default', NAMESPACE],
      kubelet: false,
      jobController: false,
    });
    dir = mkdtempSync(join(tmpdir(), 'kiln-kube-runner-'));
    kiln = await startTestApp({
      env: {
        // The API role alone: no operator here turns the Build resources into Jobs.
        KILN_ROLE: 'api',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, 'default'),
      },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
  });

  afterAll(async () => {
    await kiln.close();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  afterEach(async () => {
    if (cluster.isOffline) await cluster.goOnline();
  });

  const resource = (id: string) =>
    cluster.objects(...BUILDS, NAMESPACE).find((b) => b.metadata.name === id) as
      Record<string, any> | undefined;

  /** A wizard build; unless a manifest is given, one of its own (nobody's duplicate). */
  async function wizardBuild(
    manifest = distinct(wizardManifest('kaniko')),
  ): Promise<Record<string, any>> {
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    return (await jsonOf(response)).data;
  }

  it('writes a suspended Build resource named after the build, projecting its spec', async () => {
    const build = await wizardBuild(wizardManifest('kaniko'));

    expect(resource(build.id)).toMatchObject({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: {
        name: build.id,
        namespace: NAMESPACE,
        labels: {
          'app.kubernetes.io/managed-by': 'kiln',
          'kiln.dev/build-id': build.id,
          'kiln.dev/tenant-id': seeded.tenantA,
          'kiln.dev/project-id': seeded.projectA,
        },
      },
      spec: {
        tenantId: seeded.tenantA,
        projectId: seeded.projectA,
        form: 'wizard',
        method: 'kaniko',
        suspend: true,
        source: { repository: 'https://git.example.com/a/web.git', context: '.' },
        output: {
          image: 'registry.example.com/team/app',
          tags: ['latest', 'v1'],
          registry: 'harbor',
        },
        config: { dockerfile: 'FROM scratch\nCOPY . /\n' },
        env: { CI: 'true' },
        timeoutSeconds: 3600,
      },
    });
  });

  it('starts, cancels and deletes through the resource, and never creates a Job or a Pod', async () => {
    const build = await admin.createBuild(seeded.projectA, 'feature/k8s', {
      build_args: { A: '1' },
    });
    expect(resource(build.id)?.spec).toMatchObject({
      form: 'reference',
      method: 'kaniko',
      suspend: true,
      source: { branch: 'feature/k8s' },
      buildArgs: { A: '1' },
    });

    const started = await admin.request('POST', `/builds/${build.id}/start`);
    expect(started.status).toBe(200);
    expect((await jsonOf(started)).status).toBe('in_progress');
    // The start carries the operator's finalizer: it need not write it before the Job.
    expect(resource(build.id)).toMatchObject({
      spec: { suspend: false },
      metadata: { finalizers: [LOGS_FINALIZER] },
    });

    const cancelled = await admin.request('POST', `/builds/${build.id}/cancel`, {
      reason: 'wrong branch',
    });
    expect(cancelled.status).toBe(200);
    expect(resource(build.id)?.spec).toMatchObject({
      cancelRequested: true,
      cancelReason: 'wrong branch',
    });

    expect((await admin.request('DELETE', `/builds/${build.id}`)).status).toBe(204);
    // Deleted, held only by kiln's finalizer until the operator (not running here) has stored
    // the build's log and lets go of it (the reconciler's table tests: "lets go of a deleted
    // Build that has no record").
    expect(resource(build.id)?.metadata).toMatchObject({
      deletionTimestamp: expect.any(String),
      finalizers: [LOGS_FINALIZER],
    });
    expect(cluster.objects('batch/v1', 'jobs')).toEqual([]);
    expect(cluster.objects('v1', 'pods')).toEqual([]);
  });

  it('writes the retry of a failed build as a Build resource of its own', async () => {
    const build = await wizardBuild();
    await admin.request('POST', `/builds/${build.id}/start`);
    await kiln.dataSource.query(
      `UPDATE builds SET status = 'failed', failure_reason = 'BuildFailed' WHERE id = $1`,
      [build.id],
    );

    const retry = await jsonOf(await admin.request('POST', `/builds/${build.id}/retry`));

    expect(resource(retry.id)?.spec).toMatchObject({ suspend: true, method: 'kaniko' });
    expect(resource(retry.id)?.spec).toEqual({ ...resource(build.id)?.spec, suspend: true });
  });

  it('refuses with 400 and keeps no build when the API server refuses the Build resource', async () => {
    const manifest = wizardManifest('kaniko');
    // Accepted by the manifest rules, over the CRD's bound of 64 tags.
    manifest['tags'] = Array.from({ length: 65 }, (_, i) => `v${i}`);
    const count = async () =>
      ((await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds'))[0] as { n: number })
        .n;
    const before = await count();

    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });

    expect(response.status).toBe(400);
    expect((await jsonOf(response)).error).toMatch(
      /^The build cannot be written as a Build resource: /,
    );
    expect(await count()).toBe(before);
  });

  it('answers 503 with Retry-After and keeps no build when the API server is unreachable at create', async () => {
    const count = async () => {
      const [{ n }] = await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds');
      return n as number;
    };
    const before = await count();
    await cluster.goOffline();

    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: distinct(wizardManifest('kaniko')),
    });

    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await jsonOf(response)).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      error: 'The Kubernetes API server cannot be reached; retry shortly',
    });
    expect(await count()).toBe(before);
  });

  it('answers 503 at start while the API server is unreachable and leaves the build queued to start again', async () => {
    const build = await wizardBuild();
    await cluster.goOffline();

    const refused = await admin.request('POST', `/builds/${build.id}/start`);

    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    const queued = await jsonOf(await admin.request('GET', `/builds/${build.id}`));
    expect(queued).toMatchObject({ status: 'queued', started_at: null });

    await cluster.goOnline();
    const started = await admin.request('POST', `/builds/${build.id}/start`);
    expect(started.status).toBe(200);
    expect(resource(build.id)?.spec.suspend).toBe(false);
  });
});
