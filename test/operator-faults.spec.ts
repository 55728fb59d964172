import {
  BUILDS_PATH,
  builderLines,
  COLLECTIONS,
  MAX_RECONCILES,
  NS,
  numbered,
  OperatorGround,
  sleep,
  until,
} from './support/operator-ground.js';
import { wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';

noteDoubleOnly('the operator under faults');

/**
 * The operator's fault suite (OP-01..05, OP-08, OP-09, OP-11, OP-12, LOG-07, LOG-08 in
 * docs/test-scenarios.md): an API-only kiln (KILN_ROLE=api) and one or more operator-only ones
 * (KILN_ROLE=operator) share one Postgres database, as separate replicas would, against the
 * Kubernetes API server double over HTTP. Each test injects its fault through the double's hooks or
 * a TCP proxy (in front of Postgres or the API server) and asserts the end state: the build's
 * record, its Build resource, its Job, its stored log. Operators stop with `close()`: a graceful
 * stop (in-flight reconciles return, the Lease is released) stands in for a kill, except where a
 * proxy cuts one off.
 */
describe('the operator under faults', () => {
  let ground: OperatorGround;

  beforeAll(async () => {
    ground = await OperatorGround.start('operator-faults');
  });

  afterEach(() => ground.reset());

  afterAll(() => ground.close());

  // ---- scenarios ----------------------------------------------------------------------------

  it('OP-01 cold start: Builds that exist before the operator starts get one Job each and succeed', async () => {
    ground.builder({ lines: 50, linesPerSecond: 500, printCrc: true });
    const ids = [
      await ground.startedBuild(),
      await ground.startedBuild(),
      await ground.startedBuild(),
    ];
    expect(ids.map((id) => ground.resource(id)?.spec.suspend)).toEqual([false, false, false]);
    expect(ids.map((id) => ground.jobOf(id))).toEqual([undefined, undefined, undefined]);
    const since = ground.cluster.requests.length;

    const operator = await ground.startOperator();

    for (const id of ids) expect((await ground.ended(id)).status).toBe('success');
    for (const id of ids) {
      expect(ground.jobOf(id)).toBeDefined();
      expect(ground.jobsCreated(id)).toBe(1);
      await ground.expectCompleteLog(id, 50);
      await ground.expectMirrored(id, 'success');
    }
    // Nothing was created before the initial lists of Jobs and Pods were asked for.
    const requests = ground.cluster.requests.slice(since);
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
      expect(ground.runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(
        MAX_RECONCILES,
      );
  });

  it.each([0, 150, 500])(
    'OP-02 operator stopped %i ms after it created the Job: the next one adopts it, one Job, the log complete',
    async (afterMs) => {
      const n = 300;
      ground.builder({ lines: n, linesPerSecond: 600, printCrc: true });
      const changes = await ground.statusChanges();
      const id = await ground.startedBuild();
      const first = await ground.startOperator();
      const firstRuntime = ground.runtimeOf(first);
      const uid = await until('the Job', () => ground.jobOf(id)?.metadata?.uid, 20_000, 5);
      await sleep(afterMs);
      await ground.stopOperator(first);

      const second = await ground.startOperator();
      const build = await ground.ended(id);

      expect(build.status).toBe('success');
      expect(ground.jobOf(id)?.metadata?.uid).toBe(uid);
      expect(ground.jobsCreated(id)).toBe(1);
      await ground.expectCompleteLog(id, n);
      await ground.expectMirrored(id, 'success');
      expect(changes.of(id)).toEqual(['in_progress', 'success']);
      const reconciles =
        firstRuntime.reconcileCount(`${NS}/${id}`) +
        ground.runtimeOf(second).reconcileCount(`${NS}/${id}`);
      expect(reconciles).toBeLessThanOrEqual(MAX_RECONCILES);
    },
  );

  it('OP-03 operator down for the whole build: on start, success with its times and the complete log', async () => {
    const n = 200;
    ground.builder({ lines: n, linesPerSecond: 1000, printCrc: true });
    const id = await ground.startedBuild();
    const first = await ground.startOperator();
    await until('the Job', () => ground.jobOf(id), 20_000, 5);
    await ground.stopOperator(first);
    // The pod runs to its end while no operator runs.
    await until('the pod to succeed', () => ground.podOf(id)?.status?.phase === 'Succeeded');
    expect((await ground.record(id)).status).toBe('in_progress');

    await ground.startOperator();
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    expect(build.started_at).toEqual(expect.any(String));
    expect(build.completed_at).toEqual(expect.any(String));
    expect(Date.parse(build.completed_at)).toBeGreaterThanOrEqual(Date.parse(build.started_at));
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
    expect(ground.resource(id)?.status).toMatchObject({
      startedAt: build.started_at,
      completedAt: build.completed_at,
    });
    expect(ground.jobsCreated(id)).toBe(1);
  });

  it('OP-03 operator down for the whole build: completed_at is when the Job completed, not when the operator came back', async () => {
    ground.builder({ lines: 20, printCrc: true });
    const id = await ground.startedBuild();
    const first = await ground.startOperator();
    await until('the Job', () => ground.jobOf(id), 20_000, 5);
    await ground.stopOperator(first);
    const completed = await until(
      'the Job to complete',
      () => ground.jobOf(id)?.status?.completionTime,
    );
    await sleep(2_500);

    await ground.startOperator();
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    // completionTime has whole seconds.
    const end = Date.parse(String(completed));
    expect(Date.parse(build.completed_at)).toBeGreaterThanOrEqual(end);
    expect(Date.parse(build.completed_at)).toBeLessThan(end + 1_000);
  });

  it('OP-04 watch 410 Gone mid-build: every informer relists, the build ends, one Job', async () => {
    const n = 600;
    ground.builder({ lines: n, linesPerSecond: 400, printCrc: true });
    await ground.startOperator();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);
    const since = ground.cluster.requests.length;

    // Each informer's next watch: 410 as an ERROR event (as servers send it) or as the HTTP status.
    ground.cluster.goneNextWatch({ path: COLLECTIONS.builds });
    ground.cluster.goneNextWatch({ path: COLLECTIONS.jobs, asEvent: false });
    ground.cluster.goneNextWatch({ path: COLLECTIONS.pods });
    ground.cluster.closeWatches();
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    expect(ground.jobsCreated(id)).toBe(1);
    expect(ground.jobOf(id)).toBeDefined();
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
    const lists = ground.cluster.requests
      .slice(since)
      .filter((r) => r.method === 'GET' && r.query['watch'] === undefined);
    for (const path of Object.values(COLLECTIONS))
      expect(lists.filter((r) => r.path === path).length).toBeGreaterThanOrEqual(1);
  });

  it('OP-05 API server unreachable mid-build: the build completes, informer attempts stay few', async () => {
    const n = 900;
    ground.builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const operator = await ground.startOperator();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);
    const from = operator.logs.lines.length;

    await ground.cluster.goOffline();
    await sleep(3_000);
    const to = operator.logs.lines.length;
    await ground.cluster.goOnline();
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    expect(ground.jobsCreated(id)).toBe(1);
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
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
    ground.builder({ lines: 50, linesPerSecond: 500, printCrc: true });
    const created = await ground.admin.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantA,
      project_id: ground.seeded.projectA,
      manifest: wizardManifest('kaniko'),
    });
    const id = (await jsonOf(created)).data.id as string;
    const statusPath = `${BUILDS_PATH}/${id}/status`;
    ground.cluster.failNext(statusPath, 409, {
      method: 'PATCH',
      count: 4,
      reason: 'Conflict',
      message: `Operation cannot be fulfilled on builds.kiln.dev "${id}": the object has been modified; please apply your changes to the latest version and try again`,
    });
    const operator = await ground.startOperator();
    expect((await ground.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);

    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    await ground.expectMirrored(id, 'success');
    expect(ground.resource(id)?.status).toMatchObject({
      state: 'success',
      buildId: id,
      buildNumber: build.build_number,
      jobName: `kiln-${id}`,
      conditions: [expect.objectContaining({ type: 'Succeeded', status: 'True' })],
    });
    expect(ground.cluster.requestCount(statusPath, 'PATCH')).toBeGreaterThan(4);
    expect(ground.runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(
      MAX_RECONCILES,
    );
    expect(ground.jobsCreated(id)).toBe(1);
    await ground.expectCompleteLog(id, 50);
  });

  it('OP-09 two replicas, the leader stopped mid-build: the other takes over, one Job, one set of transitions', async () => {
    const n = 900;
    ground.builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const replicas = [await ground.startOperator(), await ground.startOperator()];
    const leader = await until('a leader', () =>
      replicas.find((r) => ground.runtimeOf(r).isRunning),
    );
    const standby = replicas.find((r) => r !== leader)!;
    expect(ground.runtimeOf(standby).isLeader).toBe(false);
    const changes = await ground.statusChanges();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 30);

    await ground.stopOperator(leader);
    await until('the standby to lead', () => ground.runtimeOf(standby).isRunning);
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    expect(ground.jobsCreated(id)).toBe(1);
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
    expect(changes.of(id)).toEqual(['in_progress', 'success']);
  });

  it('OP-09 two replicas, the leader cut off from the API server mid-build: the other takes over once the Lease expires, one Job, the log complete', async () => {
    const n = 900;
    ground.builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const links = [
      await ground.proxyTo(ground.cluster.url),
      await ground.proxyTo(ground.cluster.url),
    ];
    // The Lease shortened from client-go's 15/10/2 s: the standby waits out the whole lease
    // duration of the cut-off leader, which at 15 s was most of this test's time.
    const env = {
      KILN_OPERATOR_LEASE_DURATION_SECONDS: '4',
      KILN_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS: '3',
      KILN_OPERATOR_LEASE_RETRY_PERIOD_SECONDS: '1',
    };
    const replicas = [
      await ground.startOperator({ apiServer: links[0], env }),
      await ground.startOperator({ apiServer: links[1], env }),
    ];
    const leader = await until('a leader', () => {
      const index = replicas.findIndex((r) => ground.runtimeOf(r).isRunning);
      return index === -1 ? undefined : index;
    });
    const changes = await ground.statusChanges();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 30);

    // As a crashed or partitioned node: no renewal, no release; it stops itself at the renew
    // deadline, and the other waits for the Lease to expire.
    links[leader]!.cut();
    await until(
      'the other replica to lead',
      () => ground.runtimeOf(replicas[1 - leader]!).isRunning,
      25_000,
    );
    const build = await ground.ended(id);

    expect(ground.runtimeOf(replicas[leader]!).isLeader).toBe(false);
    expect(build.status).toBe('success');
    expect(ground.jobsCreated(id)).toBe(1);
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
    expect(changes.of(id)).toEqual(['in_progress', 'success']);
  }, 45_000);

  it('OP-11 Build deleted while running: the Job deleted, the record cancelled, the finalizer removed, the log kept', async () => {
    ground.builder({ lines: 100_000, linesPerSecond: 200 });
    await ground.startOperator();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);

    const deleted = await fetch(`${ground.cluster.url}${BUILDS_PATH}/${id}`, { method: 'DELETE' });

    expect(deleted.status).toBe(200);
    await until('the Build to go', () => ground.resource(id) === undefined);
    await until('the Job to go', () => ground.jobOf(id) === undefined);
    const build = await ground.record(id);
    expect(build.status).toBe('cancelled');
    expect(await ground.column(id, 'cancel_reason')).toBe('the Build resource was deleted');
    expect(ground.jobsCreated(id)).toBe(1);
    const lines = builderLines(await ground.storedLines(id));
    expect(lines.length).toBeGreaterThanOrEqual(20);
    expect(lines).toEqual(numbered(100_000).slice(0, lines.length));
  });

  it('LOG-07 Postgres unreachable mid-build: the operator lives on, the log complete, the Job kept until it is stored', async () => {
    const n = 900;
    ground.builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const proxy = await ground.proxyTo(ground.database.url);
    const operator = await ground.startOperator({
      databaseUrl: proxy.proxied(ground.database.url),
    });
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);

    proxy.cut();
    await sleep(3_000);
    proxy.restore();
    // The moment the Job gets its TTL (Kubernetes may delete it from then on), every line must
    // already be stored.
    const storedAtTtl = await until(
      'the Job TTL',
      async () =>
        ground.jobOf(id)?.spec?.ttlSecondsAfterFinished === undefined
          ? undefined
          : builderLines(await ground.storedLines(id)).length,
      30_000,
      5,
    );

    expect(storedAtTtl).toBe(n + 1);
    const build = await ground.ended(id);
    expect(build.status).toBe('success');
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
    expect(ground.jobsCreated(id)).toBe(1);
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
    ground.builder({ lines: n, linesPerSecond: 600, printCrc: true });
    const proxy = await ground.proxyTo(ground.database.url);
    const operator = await ground.startOperator({
      databaseUrl: proxy.proxied(ground.database.url),
    });
    // Done with the Builds of earlier tests (their followers read their cursors too).
    await until('the operator to be idle', () => {
      const queue = ground.runtimeOf(operator).queue;
      return queue !== undefined && queue.length + queue.inFlight + queue.delayedCount === 0
        ? true
        : undefined;
    });
    // BuildLogsRepository.containerCursors: the follower's first question once it holds the claim.
    const tripped = proxy.cutWhenClientSends('WITH mine AS');
    const id = await ground.startedBuild();

    await tripped;
    await sleep(1_000);
    proxy.restore();
    const build = await ground.ended(id);

    expect(build.status).toBe('success');
    await ground.expectCompleteLog(id, n);
    await ground.expectMirrored(id, 'success');
  });

  it('LOG-08 pod deleted before its log was read: the log ends with a marker, the build fails with PodDeleted', async () => {
    ground.builder({ lines: 100_000, linesPerSecond: 200 });
    await ground.startOperator();
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);
    const pod = ground.podOf(id)!;

    ground.cluster.removePod(NS, pod.metadata!.name!);
    const build = await ground.ended(id);

    expect(build.status).toBe('failed');
    expect(await ground.column(id, 'failure_reason')).toBe('PodDeleted');
    const lines = await ground.storedLines(id);
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
    // kiln's own lines besides the build's notes (the steps are off here): the marker alone.
    const notes = /^\[kiln\] the SBOM .* steps are off/;
    expect(
      lines.filter((l) => l.metadata?.['container'] !== 'build' && !notes.test(l.message)),
    ).toEqual([marker]);
    expect(lines.at(-1)).toEqual(marker);
    await ground.expectMirrored(id, 'failed');
    expect(ground.resource(id)?.status).toMatchObject({ failureReason: 'PodDeleted' });
  });

  it('OP-12 a 60 s build whose pod a sidecar and a probe write to every second is reconciled at most 20 times', async () => {
    ground.builder({ lines: 120, linesPerSecond: 2, runMs: 60_000, printCrc: true });
    const operator = await ground.startOperator();
    const id = await ground.startedBuild();
    const name = await until('the pod', () => ground.podOf(id)?.metadata?.name);
    // The loop below stops once the pod no longer runs: start it once it does (on a loaded
    // machine the pod can still be Pending after the first write).
    await until('the pod to run', () => ground.podOf(id)?.status?.phase === 'Running');
    const pod = `${ground.cluster.url}${COLLECTIONS.pods}/${name}`;
    const patch = (path: string, body: unknown) =>
      fetch(path, {
        method: 'PATCH',
        headers: { 'content-type': 'application/strategic-merge-patch+json' },
        body: JSON.stringify(body),
      });
    // What a mesh sidecar's readiness gate and a probe annotating the pod would write: a status
    // condition flapping and an annotation, once a second each, while the build runs.
    // Paced by the clock, not by a sleep after each pair: on a loaded machine the writes
    // themselves take time, and a second each must still make about 60 over the 60 s build.
    let writes = 0;
    const began = Date.now();
    while ((await ground.record(id)).status === 'in_progress' && writes < 70) {
      const seen = String(writes++);
      const annotated = await patch(pod, {
        metadata: { annotations: { 'probe.example/seen': seen } },
      });
      const gated = await patch(`${pod}/status`, {
        status: {
          conditions: [{ type: 'example.com/SidecarReady', status: writes % 2 ? 'True' : 'False' }],
        },
      });
      if (ground.podOf(id)?.status?.phase !== 'Running') break;
      expect([annotated.status, gated.status]).toEqual([200, 200]);
      await sleep(Math.max(0, began + writes * 1_000 - Date.now()));
    }

    const build = await ground.ended(id, 90_000);

    expect(writes).toBeGreaterThanOrEqual(50);
    expect(build.status).toBe('success');
    await ground.expectMirrored(id, 'success');
    await ground.expectCompleteLog(id, 120);
    expect(ground.runtimeOf(operator).reconcileCount(`${NS}/${id}`)).toBeLessThanOrEqual(
      MAX_RECONCILES,
    );
  }, 120_000);
});
