import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { KANIKO_IMAGE } from '../src/build-methods/images.js';
import { STATUS_CHANNEL } from '../src/database/channels.js';
import { LOGS_FINALIZER } from '../src/operator/build/build-reconciler.js';
import { BuildOperator } from '../src/operator/build-operator.js';
import type { OperatorRuntime } from '../src/operator/runtime/operator-runtime.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { jsonOf } from './support/http.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { type ContainerScript, numberedLine, verifyCrc } from './support/kube/kubelet.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const NS = 'kiln-builds';
const BUILDS = ['kiln.dev/v1alpha1', 'builds'] as const;
const BUILDS_PATH = `/apis/kiln.dev/v1alpha1/namespaces/${NS}/builds`;
const COLLECTIONS = {
  builds: BUILDS_PATH,
  jobs: `/apis/batch/v1/namespaces/${NS}/jobs`,
  pods: `/api/v1/namespaces/${NS}/pods`,
} as const;
/** OP-02, OP-12: the plan's bound on the reconciles of one build. */
const MAX_RECONCILES = 20;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));
const numbered = (n: number) => Array.from({ length: n }, (_, i) => numberedLine(i + 1, n));

interface StoredLine {
  message: string;
  level: string;
  metadata: Record<string, string> | null;
}

/**
 * The operator's fault suite (TESTPLAN OP-01..05, OP-08, OP-09, OP-11, OP-12, LOG-07, LOG-08): an
 * API-only kiln (KILN_ROLE=api) and one or more operator-only ones (KILN_ROLE=operator) share one
 * Postgres database, as separate replicas would, against the Kubernetes API server double over
 * HTTP. Each test injects its fault through the double's hooks or a TCP proxy (in front of
 * Postgres or the API server) and asserts the end state: the build's record, its Build resource,
 * its Job, its stored log. Operators stop with `close()`: a graceful stop (in-flight reconciles
 * return, the Lease is released) stands in for a kill, except where a proxy cuts one off.
 */
describe('the operator under faults', () => {
  let cluster: KubeApiServer;
  let dir: string;
  let kubeconfig: string;
  let database: TestDatabase;
  let api: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  const operators = new Set<TestApp>();
  /** What a test opened besides operators (listeners, proxies): closed even when it fails. */
  const opened: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    cluster = await KubeApiServer.start({ crdDirectories: ['crds'], namespaces: ['default', NS] });
    dir = mkdtempSync(join(tmpdir(), 'kiln-operator-faults-'));
    kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, NS);
    database = await createTestDatabase();
    api = await startTestApp({
      database,
      env: { KILN_ROLE: 'api', KILN_RUNNER: 'kubernetes', KUBECONFIG: kubeconfig },
    });
    seeded = await seedTenancy(api);
    admin = new ApiClient(
      api,
      await tokenFor(api.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
  });

  afterEach(async () => {
    if (cluster.isOffline) await cluster.goOnline();
    for (const operator of operators) await operator.close();
    operators.clear();
    for (const close of opened.splice(0)) await close();
    cluster.kubelet.clearScripts();
  });

  afterAll(async () => {
    await api.close();
    await cluster.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  // ---- helpers ------------------------------------------------------------------------------

  /**
   * An operator-only kiln on the shared database, or reaching Postgres or the API server through
   * a proxy (`databaseUrl`, `apiServer`) that can cut it off.
   */
  async function startOperator(
    through: { databaseUrl?: string; apiServer?: TcpProxy } = {},
  ): Promise<TestApp> {
    const { databaseUrl, apiServer } = through;
    const operator = await startTestApp({
      database:
        databaseUrl === undefined ? database : { url: databaseUrl, drop: () => Promise.resolve() },
      env: {
        KILN_ROLE: 'operator',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG:
          apiServer === undefined
            ? kubeconfig
            : writeKubeconfig(
                join(dir, `kubeconfig-${apiServer.port}`),
                apiServer.proxied(cluster.url),
                NS,
              ),
        KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '5',
      },
    });
    operators.add(operator);
    return operator;
  }

  async function stopOperator(operator: TestApp): Promise<void> {
    operators.delete(operator);
    await operator.close();
  }

  const runtimeOf = (operator: TestApp): OperatorRuntime => {
    const runtime = operator.app.get(BuildOperator).operatorRuntime;
    if (runtime === undefined) throw new Error('the operator is not running');
    return runtime;
  };

  const builder = (script: ContainerScript) => cluster.kubelet.script(KANIKO_IMAGE, script);

  const resource = (id: string) =>
    cluster.objects(...BUILDS, NS).find((b) => b.metadata.name === id) as
      Record<string, any> | undefined;
  const jobOf = (id: string) =>
    (cluster.objects('batch/v1', 'jobs', NS) as V1Job[]).find(
      (j) => j.metadata?.name === `kiln-${id}`,
    );
  const podOf = (id: string) =>
    (cluster.objects('v1', 'pods', NS) as V1Pod[]).find(
      (p) => p.metadata?.labels?.['job-name'] === `kiln-${id}`,
    );
  /** Jobs the operator created for the build (its JobCreated Events: one per successful create). */
  const jobsCreated = (id: string) =>
    cluster
      .objects('v1', 'events', NS)
      .filter((e: any) => e.involvedObject?.name === id && e.reason === 'JobCreated').length;

  async function until<T>(
    what: string,
    probe: () => Promise<T | undefined | false> | T | undefined | false,
    ms = 20_000,
    everyMs = 50,
  ): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(everyMs);
    }
  }

  async function record(id: string): Promise<Record<string, any>> {
    return jsonOf(await admin.request('GET', `/builds/${id}`));
  }

  async function ended(id: string, ms?: number): Promise<Record<string, any>> {
    return until(
      `build ${id} to end`,
      async () => {
        const build = await record(id);
        return ['success', 'failed', 'cancelled'].includes(build.status) ? build : undefined;
      },
      ms,
    );
  }

  /** A build created and started through the API (a Build resource, unsuspended). */
  async function startedBuild(): Promise<string> {
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: wizardManifest('kaniko'),
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  /** A column of the build's row the API does not show. */
  async function column(id: string, name: 'cancel_reason' | 'failure_reason'): Promise<unknown> {
    const [row] = await api.dataSource.query(`SELECT ${name} AS value FROM builds WHERE id = $1`, [
      id,
    ]);
    return row?.value;
  }

  async function storedLines(id: string): Promise<StoredLine[]> {
    return api.dataSource.query(
      'SELECT message, level, metadata FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
  }

  const builderLines = (lines: StoredLine[]) =>
    lines.filter((l) => l.metadata?.['container'] === 'build').map((l) => l.message);

  async function linesStored(id: string, n: number): Promise<void> {
    await until(`${n} lines of ${id}`, async () => builderLines(await storedLines(id)).length >= n);
  }

  /** Every printed line stored once, in order, and the builder's own CRC over them matches. */
  async function expectCompleteLog(id: string, n: number): Promise<void> {
    const lines = builderLines(await storedLines(id));
    expect(lines.slice(0, -1)).toEqual(numbered(n));
    expect(verifyCrc(lines)).toBe(true);
  }

  /** The Build resource mirrors the record and has let go of its finalizer. */
  async function expectMirrored(id: string, state: string): Promise<void> {
    await until(`the Build ${id} to mirror ${state}`, () => {
      const status = resource(id)?.status;
      return status?.state === state &&
        resource(id)?.metadata.finalizers?.includes(LOGS_FINALIZER) !== true
        ? true
        : undefined;
    });
  }

  /** Every status change Postgres announces (`<build id>:<status>`), from now on. */
  async function statusChanges(): Promise<{ of(id: string): string[] }> {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    opened.push(() => client.end());
    const seen: string[] = [];
    client.on('notification', (n) => seen.push(n.payload ?? ''));
    await client.query(`LISTEN ${STATUS_CHANNEL}`);
    return {
      of: (id) => seen.filter((p) => p.startsWith(`${id}:`)).map((p) => p.slice(id.length + 1)),
    };
  }

  /** A TCP proxy in front of the test database or the API server, to cut an operator off. */
  async function proxyTo(url: string): Promise<TcpProxy> {
    const real = new URL(url);
    const proxy = await TcpProxy.start({ host: real.hostname, port: Number(real.port) });
    // After the operators (afterEach closes them first): they may still talk through it.
    opened.push(() => proxy.stop());
    return proxy;
  }

  // ---- scenarios ----------------------------------------------------------------------------

  it('OP-01 cold start: Builds that exist before the operator starts get one Job each and succeed', async () => {
    builder({ lines: 50, linesPerSecond: 500, printCrc: true });
    const ids = [await startedBuild(), await startedBuild(), await startedBuild()];
    expect(ids.map((id) => resource(id)?.spec.suspend)).toEqual([false, false, false]);
    expect(ids.map(jobOf)).toEqual([undefined, undefined, undefined]);
    const since = cluster.requests.length;

    const operator = await startOperator();

    for (const id of ids) expect((await ended(id)).status).toBe('success');
    for (const id of ids) {
      expect(jobOf(id)).toBeDefined();
      expect(jobsCreated(id)).toBe(1);
      await expectCompleteLog(id, 50);
      await expectMirrored(id, 'success');
    }
    // Nothing was created before the initial lists of Jobs and Pods were asked for.
    const requests = cluster.requests.slice(since);
    const firstCreate = requests.findIndex(
      (r) => r.method === 'POST' && r.path === COLLECTIONS.jobs,
    );
    const firstList = (path: string) =>
      requests.findIndex(
        (r) => r.method === 'GET' && r.path === path && r.query['watch'] === undefined,
      );
    expect(firstCreate).toBeGreaterThan(firstList(COLLECTIONS.jobs));
    expect(firstCreate).toBeGreaterThan(firstList(COLLECTIONS.pods));
    expect(firstList(COLLECTIONS.jobs)).toBeGreaterThanOrEqual(0);
    expect(firstList(COLLECTIONS.pods)).toBeGreaterThanOrEqual(0);
    for (const id of ids)
      expect(runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(MAX_RECONCILES);
  });

  it.each([0, 150, 500])(
    'OP-02 operator stopped %i ms after it created the Job: the next one adopts it, one Job, the log complete',
    async (afterMs) => {
      const n = 300;
      builder({ lines: n, linesPerSecond: 600, printCrc: true });
      const changes = await statusChanges();
      const id = await startedBuild();
      const first = await startOperator();
      const firstRuntime = runtimeOf(first);
      const uid = await until('the Job', () => jobOf(id)?.metadata?.uid, 20_000, 5);
      await sleep(afterMs);
      await stopOperator(first);

      const second = await startOperator();
      const build = await ended(id);

      expect(build.status).toBe('success');
      expect(jobOf(id)?.metadata?.uid).toBe(uid);
      expect(jobsCreated(id)).toBe(1);
      await expectCompleteLog(id, n);
      await expectMirrored(id, 'success');
      expect(changes.of(id)).toEqual(['in_progress', 'success']);
      const reconciles =
        firstRuntime.reconcileCount(`${NS}/${id}`) +
        runtimeOf(second).reconcileCount(`${NS}/${id}`);
      expect(reconciles).toBeLessThanOrEqual(MAX_RECONCILES);
    },
  );

  it('OP-03 operator down for the whole build: on start, success with its times and the complete log', async () => {
    const n = 200;
    builder({ lines: n, linesPerSecond: 1000, printCrc: true });
    const id = await startedBuild();
    const first = await startOperator();
    await until('the Job', () => jobOf(id), 20_000, 5);
    await stopOperator(first);
    // The pod runs to its end while no operator runs.
    await until('the pod to succeed', () => podOf(id)?.status?.phase === 'Succeeded');
    expect((await record(id)).status).toBe('in_progress');

    await startOperator();
    const build = await ended(id);

    expect(build.status).toBe('success');
    expect(build.started_at).toEqual(expect.any(String));
    expect(build.completed_at).toEqual(expect.any(String));
    expect(Date.parse(build.completed_at)).toBeGreaterThanOrEqual(Date.parse(build.started_at));
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    expect(resource(id)?.status).toMatchObject({
      startedAt: build.started_at,
      completedAt: build.completed_at,
    });
    expect(jobsCreated(id)).toBe(1);
  });

  /*
   * Fails today: BuildLifecycle.succeed/fail stamp completed_at with the time of the write, so a
   * build that ended while no operator ran is recorded as ending when the operator came back
   * (its duration stretched by the outage). The Job's completionTime (or the containers'
   * finishedAt) is when it ended; recording it needs a completion time on BuildLifecycle's
   * terminal transitions, outside the reconciler.
   */
  it.failing(
    'OP-03 operator down for the whole build: completed_at is when the Job completed, not when the operator came back',
    async () => {
      builder({ lines: 20, printCrc: true });
      const id = await startedBuild();
      const first = await startOperator();
      await until('the Job', () => jobOf(id), 20_000, 5);
      await stopOperator(first);
      const completed = await until('the Job to complete', () => jobOf(id)?.status?.completionTime);
      await sleep(2_500);

      await startOperator();
      const build = await ended(id);

      expect(build.status).toBe('success');
      // completionTime has whole seconds.
      const end = Date.parse(String(completed));
      expect(Date.parse(build.completed_at)).toBeGreaterThanOrEqual(end);
      expect(Date.parse(build.completed_at)).toBeLessThan(end + 1_000);
    },
  );

  it('OP-04 watch 410 Gone mid-build: every informer relists, the build ends, one Job', async () => {
    const n = 600;
    builder({ lines: n, linesPerSecond: 400, printCrc: true });
    await startOperator();
    const id = await startedBuild();
    await linesStored(id, 20);
    const since = cluster.requests.length;

    // Each informer's next watch: 410 as an ERROR event (as servers send it) or as the HTTP status.
    cluster.goneNextWatch({ path: COLLECTIONS.builds });
    cluster.goneNextWatch({ path: COLLECTIONS.jobs, asEvent: false });
    cluster.goneNextWatch({ path: COLLECTIONS.pods });
    cluster.closeWatches();
    const build = await ended(id);

    expect(build.status).toBe('success');
    expect(jobsCreated(id)).toBe(1);
    expect(jobOf(id)).toBeDefined();
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    const lists = cluster.requests
      .slice(since)
      .filter((r) => r.method === 'GET' && r.query['watch'] === undefined);
    for (const path of Object.values(COLLECTIONS))
      expect(lists.filter((r) => r.path === path).length).toBeGreaterThanOrEqual(1);
  });

  it('OP-05 API server unreachable mid-build: the build completes, informer attempts stay few', async () => {
    const n = 900;
    builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const operator = await startOperator();
    const id = await startedBuild();
    await linesStored(id, 20);
    const from = operator.logs.lines.length;

    await cluster.goOffline();
    await sleep(3_000);
    const to = operator.logs.lines.length;
    await cluster.goOnline();
    const build = await ended(id);

    expect(build.status).toBe('success');
    expect(jobsCreated(id)).toBe(1);
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    const failures = operator.logs.lines
      .slice(from, to)
      .filter((l) => l['msg'] === 'watch failed' || l['msg'] === 'list failed; retrying');
    for (const informer of Object.keys(COLLECTIONS)) {
      const attempts = failures.filter((l) => l['informer'] === informer).length;
      // The watch the outage broke, one at once (it was healthy), then jittered exponential
      // backoff from 500 ms (>= 250, 500, 1000 ms apart): at most 5 fit in 3 s, where a loop
      // without backoff makes hundreds.
      expect(attempts).toBeGreaterThanOrEqual(1);
      expect(attempts).toBeLessThanOrEqual(6);
    }
  });

  it('OP-08 status writes answered 409: retried from a fresh read, the status right, no hot loop', async () => {
    builder({ lines: 50, linesPerSecond: 500, printCrc: true });
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest: wizardManifest('kaniko'),
    });
    const id = (await jsonOf(created)).data.id as string;
    const statusPath = `${BUILDS_PATH}/${id}/status`;
    cluster.failNext(statusPath, 409, {
      method: 'PATCH',
      count: 4,
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on builds.kiln.dev "${id}": the object has been modified; please apply your changes to the latest version and try again`,
    });
    const operator = await startOperator();
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);

    const build = await ended(id);

    expect(build.status).toBe('success');
    await expectMirrored(id, 'success');
    expect(resource(id)?.status).toMatchObject({
      state: 'success',
      buildId: id,
      buildNumber: build.build_number,
      jobName: `kiln-${id}`,
      conditions: [expect.objectContaining({ type: 'Succeeded', status: 'True' })],
    });
    expect(cluster.requestCount(statusPath, 'PATCH')).toBeGreaterThan(4);
    expect(runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(MAX_RECONCILES);
    expect(jobsCreated(id)).toBe(1);
    await expectCompleteLog(id, 50);
  });

  it('OP-09 two replicas, the leader stopped mid-build: the other takes over, one Job, one set of transitions', async () => {
    const n = 900;
    builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const replicas = [await startOperator(), await startOperator()];
    const leader = await until('a leader', () => replicas.find((r) => runtimeOf(r).isRunning));
    const standby = replicas.find((r) => r !== leader)!;
    expect(runtimeOf(standby).isLeader).toBe(false);
    const changes = await statusChanges();
    const id = await startedBuild();
    await linesStored(id, 30);

    await stopOperator(leader);
    await until('the standby to lead', () => runtimeOf(standby).isRunning);
    const build = await ended(id);

    expect(build.status).toBe('success');
    expect(jobsCreated(id)).toBe(1);
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    expect(changes.of(id)).toEqual(['in_progress', 'success']);
  });

  it('OP-09 two replicas, the leader cut off from the API server mid-build: the other takes over once the Lease expires, one Job, the log complete', async () => {
    const n = 900;
    builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const links = [await proxyTo(cluster.url), await proxyTo(cluster.url)];
    const replicas = [
      await startOperator({ apiServer: links[0] }),
      await startOperator({ apiServer: links[1] }),
    ];
    const leader = await until('a leader', () => {
      const index = replicas.findIndex((r) => runtimeOf(r).isRunning);
      return index === -1 ? undefined : index;
    });
    const changes = await statusChanges();
    const id = await startedBuild();
    await linesStored(id, 30);

    // As a crashed or partitioned node: no renewal, no release; it stops itself at the renew
    // deadline, and the other waits for the Lease to expire.
    links[leader]!.cut();
    await until(
      'the other replica to lead',
      () => runtimeOf(replicas[1 - leader]!).isRunning,
      25_000,
    );
    const build = await ended(id);

    expect(runtimeOf(replicas[leader]!).isLeader).toBe(false);
    expect(build.status).toBe('success');
    expect(jobsCreated(id)).toBe(1);
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    expect(changes.of(id)).toEqual(['in_progress', 'success']);
  }, 45_000);

  it('OP-11 Build deleted while running: the Job deleted, the record cancelled, the finalizer removed, the log kept', async () => {
    builder({ lines: 100_000, linesPerSecond: 200 });
    await startOperator();
    const id = await startedBuild();
    await linesStored(id, 20);

    const deleted = await fetch(`${cluster.url}${BUILDS_PATH}/${id}`, { method: 'DELETE' });

    expect(deleted.status).toBe(200);
    await until('the Build to go', () => resource(id) === undefined);
    await until('the Job to go', () => jobOf(id) === undefined);
    const build = await record(id);
    expect(build.status).toBe('cancelled');
    expect(await column(id, 'cancel_reason')).toBe('the Build resource was deleted');
    expect(jobsCreated(id)).toBe(1);
    const lines = builderLines(await storedLines(id));
    expect(lines.length).toBeGreaterThanOrEqual(20);
    expect(lines).toEqual(numbered(100_000).slice(0, lines.length));
  });

  it('LOG-07 Postgres unreachable mid-build: the operator lives on, the log complete, the Job kept until it is stored', async () => {
    const n = 900;
    builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const proxy = await proxyTo(database.url);
    const operator = await startOperator({ databaseUrl: proxy.proxied(database.url) });
    const id = await startedBuild();
    await linesStored(id, 20);

    proxy.cut();
    await sleep(3_000);
    proxy.restore();
    // The moment the Job gets its TTL (Kubernetes may delete it from then on), every line must
    // already be stored.
    const storedAtTtl = await until(
      'the Job TTL',
      async () =>
        jobOf(id)?.spec?.ttlSecondsAfterFinished === undefined
          ? undefined
          : builderLines(await storedLines(id)).length,
      30_000,
      5,
    );

    expect(storedAtTtl).toBe(n + 1);
    const build = await ended(id);
    expect(build.status).toBe('success');
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
    expect(jobsCreated(id)).toBe(1);
    expect((await fetch(`${operator.baseUrl}/healthz`)).status).toBe(200);
    // The outage did reach the log: LogSink held lines in memory meanwhile.
    expect(
      operator.logs.find(
        (l) =>
          l['build_id'] === id &&
          l['msg'] === 'database unavailable: holding log lines in memory until it is back',
      ),
    ).toBeDefined();
  });

  it('LOG-07 Postgres lost just as the follower asks where to resume: it waits, the log complete', async () => {
    const n = 300;
    builder({ lines: n, linesPerSecond: 600, printCrc: true });
    const proxy = await proxyTo(database.url);
    const operator = await startOperator({ databaseUrl: proxy.proxied(database.url) });
    // Done with the Builds of earlier tests (their followers read their cursors too).
    await until('the operator to be idle', () => {
      const queue = runtimeOf(operator).queue;
      return queue !== undefined && queue.length + queue.inFlight + queue.delayedCount === 0
        ? true
        : undefined;
    });
    // BuildLogsRepository.containerCursor: the follower's first question about a container.
    const tripped = proxy.cutWhenClientSends('WITH mine AS');
    const id = await startedBuild();

    await tripped;
    await sleep(1_000);
    proxy.restore();
    const build = await ended(id);

    expect(build.status).toBe('success');
    await expectCompleteLog(id, n);
    await expectMirrored(id, 'success');
  });

  it('LOG-08 pod deleted before its log was read: the log ends with a marker, the build fails with PodDeleted', async () => {
    builder({ lines: 100_000, linesPerSecond: 200 });
    await startOperator();
    const id = await startedBuild();
    await linesStored(id, 20);
    const pod = podOf(id)!;

    cluster.removePod(NS, pod.metadata!.name!);
    const build = await ended(id);

    expect(build.status).toBe('failed');
    expect(await column(id, 'failure_reason')).toBe('PodDeleted');
    const lines = await storedLines(id);
    const printed = builderLines(lines);
    expect(printed.length).toBeGreaterThanOrEqual(20);
    expect(printed).toEqual(numbered(100_000).slice(0, printed.length));
    const marker = {
      level: 'WARN',
      metadata: { container: 'kiln' },
      message: expect.stringMatching(
        /^WARN: \[kiln\] the pod was deleted before its log was read: its lines after \S+ from container build are missing$/,
      ),
    };
    expect(lines.filter((l) => l.metadata?.['container'] !== 'build')).toEqual([marker]);
    expect(lines.at(-1)).toEqual(marker);
    await expectMirrored(id, 'failed');
    expect(resource(id)?.status).toMatchObject({ failureReason: 'PodDeleted' });
  });

  it('OP-12 a 5 s build, with the pod status changes it brings, is reconciled at most 20 times', async () => {
    builder({ lines: 50, linesPerSecond: 10, runMs: 5_000, printCrc: true });
    const operator = await startOperator();
    const id = await startedBuild();

    const build = await ended(id);

    expect(build.status).toBe('success');
    await expectMirrored(id, 'success');
    await expectCompleteLog(id, 50);
    expect(runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(MAX_RECONCILES);
  });

  /*
   * Fails today (confirmed): nothing filters informer updates that change nothing the reconciler
   * reads (controller-runtime's predicates), so every write a sidecar or probe makes to the pod
   * costs a reconcile; the hooks for that are in OperatorRuntime.watch, outside the reconciler.
   * And each such update costs two: OperatorRuntime.watch's onUpdate calls enqueue(toKeys(before))
   * and enqueue(toKeys(after)) separately, and WorkQueue hands a key to an idle worker at once,
   * so the second add finds it processing and queues it again. Measured: 35 to 37 reconciles here,
   * 24 or 25 with onUpdate de-duplicated, 16 to 18 without the churn (the test above).
   */
  it.failing(
    'OP-12 a 5 s build whose pod a sidecar writes to every 0.4 s is reconciled at most 20 times',
    async () => {
      builder({ lines: 50, linesPerSecond: 10, runMs: 5_000, printCrc: true });
      const operator = await startOperator();
      const id = await startedBuild();
      const name = await until('the pod', () => podOf(id)?.metadata?.name);
      for (let i = 0; i < 10; i++) {
        await sleep(400);
        const patched = await fetch(`${cluster.url}${COLLECTIONS.pods}/${name}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ metadata: { annotations: { 'probe.example/seen': String(i) } } }),
        });
        expect(patched.status).toBe(200);
      }

      const build = await ended(id);

      expect(build.status).toBe('success');
      await expectCompleteLog(id, 50);
      expect(runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(MAX_RECONCILES);
    },
  );
});
