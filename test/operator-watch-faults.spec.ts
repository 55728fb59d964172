import type { V1Job } from '@kubernetes/client-node';
import {
  type BuildRecord,
  BUILDS_PATH,
  builderLines,
  COLLECTIONS,
  NS,
  numbered,
  OperatorGround,
  sleep,
  until,
} from './support/operator-ground.js';
import { BuildLifecycle } from '../src/lifecycle/build-lifecycle.js';
import { KILN_LABELS } from '../src/operator/api/build-resource.js';
import { verifyCrc } from './support/kube/kubelet.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';

/** KILN_OPERATOR_WATCH_TIMEOUT_SECONDS for OP-06: its smallest allowed value. */
const WATCH_TIMEOUT_SECONDS = 5;
/**
 * client-node's Watch ends a stream that sent nothing for 30 s (its requestTimeoutMs): without a
 * watch lifetime cap that is what would find a silent watch. OP-06 must end well before.
 */
const CLIENT_NODE_IDLE_TIMEOUT_MS = 30_000;

noteDoubleOnly('the operator under watch faults');

/**
 * The operator's watch and identity faults (OP-06, OP-07, OP-10 in docs/test-scenarios.md), on the
 * ground of test/operator-faults.spec.ts: an API-only kiln and operator-only kilns on one Postgres,
 * against the Kubernetes API server double over HTTP. A half-open watch is the double's blackhole,
 * an outage a TCP proxy cut between an operator and the API server, a split brain two operators
 * each on its own Lease.
 */
describe('the operator under watch and identity faults', () => {
  let ground: OperatorGround;

  beforeAll(async () => {
    ground = await OperatorGround.start('operator-watch-faults');
  });

  afterEach(() => ground.reset());

  afterAll(() => ground.close());

  // ---- helpers ------------------------------------------------------------------------------

  /** A kaniko Build applied to the cluster as kubectl would, without kiln's API. */
  async function applyBuild(name: string): Promise<Response> {
    return fetch(`${ground.cluster.url}${BUILDS_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'kiln.dev/v1alpha1',
        kind: 'Build',
        metadata: { name, namespace: NS },
        spec: {
          tenantId: ground.seeded.tenantA,
          projectId: ground.seeded.projectA,
          method: 'kaniko',
          source: { repository: 'https://git.example.com/web/frontend.git', branch: name },
          config: { dockerfile: 'FROM scratch\n' },
          output: { image: 'registry.example.com/web/frontend', tags: ['1.4.0'] },
        },
      }),
    });
  }

  /** The Jobs in the cluster that a Build of this uid owns as their controller. */
  function jobsOwnedBy(uid: string): V1Job[] {
    return (ground.cluster.objects('batch/v1', 'jobs', NS) as V1Job[]).filter((job) =>
      job.metadata?.ownerReferences?.some((o) => o.controller === true && o.uid === uid),
    );
  }

  /** JobCreated Events of the Build of this uid (one per Job the operator created for it). */
  function jobsCreatedFor(uid: string): number {
    return ground.cluster
      .objects('v1', 'events', NS)
      .filter((e: any) => e.involvedObject?.uid === uid && e.reason === 'JobCreated').length;
  }

  /** afterEach: a record a failing test left running, ended so that no later build meets it. */
  async function endLeftOver(id: string): Promise<void> {
    const lifecycle = ground.api.app.get(BuildLifecycle, { strict: false });
    const record = await lifecycle.find(id);
    if (record?.status === 'queued' || record?.status === 'in_progress')
      await lifecycle.cancel(record.tenantId, id, 'left over by a failing test');
  }

  // ---- OP-06 --------------------------------------------------------------------------------

  it('OP-06 half-open watch: every watch goes silent without closing while the build ends; the operator restarts them within its watch timeout and records the success', async () => {
    ground.builder({ lines: 200, linesPerSecond: 200, printCrc: true });
    const since = ground.cluster.requests.length;
    await ground.startOperator({
      env: { KILN_OPERATOR_WATCH_TIMEOUT_SECONDS: String(WATCH_TIMEOUT_SECONDS) },
    });
    const id = await ground.startedBuild();
    await ground.linesStored(id, 20);

    // The operator's four watches (Builds, Jobs, Pods, Jobs' Events) go dead; new ones get no
    // answer.
    const hole = ground.cluster.blackholeWatches();
    ground.onReset(() => Promise.resolve(hole.heal()));
    await until('the Job to complete in the cluster', () =>
      ground.jobOf(id)?.status?.conditions?.some((c) => c.type === 'Complete'),
    );
    await ground.linesStored(id, 201);
    // Its log is read (log streams are no watch), but the end is news the operator cannot get.
    expect((await ground.record(id)).status).toBe('in_progress');
    // The network heals; the watches the blackhole killed stay dead, and the operator does not
    // know: only its own cap on a watch's lifetime ends them.
    hole.heal();
    const build = await ground.ended(id, CLIENT_NODE_IDLE_TIMEOUT_MS - 10_000);

    expect(hole.silenced).toBe(4);
    expect(build.status).toBe('success');
    await ground.expectCompleteLog(id, 200);
    await ground.expectMirrored(id, 'success');
    expect(ground.jobsCreated(id)).toBe(1);
    // Each collection is watched again (each watch's lifetime cap is jittered, so the Job's
    // restart may end the build before the others restart), every watch with the cap as its
    // timeout.
    const watchesOf = () =>
      ground.cluster.requests
        .slice(since)
        .filter((r) => r.method === 'GET' && r.query['watch'] === 'true');
    await until('every collection to be watched again', () =>
      Object.values(COLLECTIONS).every(
        (path) => watchesOf().filter((r) => r.path === path).length >= 2,
      ),
    );
    const watches = watchesOf();
    for (const watch of watches)
      expect(Number(watch.query['timeoutSeconds'])).toBeLessThanOrEqual(
        Math.ceil(WATCH_TIMEOUT_SECONDS * 1.1),
      );
  });

  // ---- the pod informer behind the Job's ------------------------------------------------------

  it('a Job that completes while the pod watch is silent: the end waits for the pod and its log, instead of recording a success with an empty log', async () => {
    // The pod watch gets no answer from the start (the list is served): the operator sees the
    // Job start and end, but not its pod, until the blackhole heals. Found by a fresh-machine
    // run of OP-07, where the pod informer relisted after the Job informer and the build ended
    // `success` with no line stored.
    const hole = ground.cluster.blackholeWatches({ path: COLLECTIONS.pods });
    ground.onReset(() => Promise.resolve(hole.heal()));
    ground.builder({ lines: 40, linesPerSecond: 400, printCrc: true });
    await ground.startOperator({ env: { KILN_OPERATOR_DRAIN_DEADLINE_SECONDS: '60' } });
    const id = await ground.startedBuild();
    await until('the Job to complete in the cluster', () =>
      ground.jobOf(id)?.status?.conditions?.some((c) => c.type === 'Complete'),
    );
    // The operator has seen the Job's end (its status mirrors the Job) and still waits.
    await until('the Build to name its Job', () => ground.resource(id)?.status?.jobName);
    await sleep(1_000);
    expect((await ground.record(id)).status).toBe('in_progress');

    hole.heal();
    const build = await ground.ended(id);
    expect(build.status).toBe('success');
    await ground.expectCompleteLog(id, 40);
  });

  // ---- OP-07 --------------------------------------------------------------------------------

  it.each([
    ['resumes its watch from where it was', false],
    ['relists (the history was compacted meanwhile)', true],
  ])(
    'OP-07 Build deleted and re-created with the same name during a watch outage, the operator %s: the new uid is a new build with its own Job, the old build ends cancelled, its Job gone',
    async (how: string, compacted: boolean) => {
      const name = `recreated-${compacted ? 'relist' : 'resume'}`;
      ground.builder({ lines: 100_000, linesPerSecond: 200 });
      const link = await ground.proxyTo(ground.cluster.url);
      await ground.startOperator({ apiServer: link });
      expect((await applyBuild(name)).status).toBe(201);
      const oldUid = ground.resource(name)!.metadata.uid as string;
      const oldId = await until(
        'registration',
        () => ground.resource(name)?.status?.buildId as string | undefined,
      );
      ground.onReset(() => endLeftOver(oldId));
      await ground.linesStored(oldId, 20);
      expect(jobsOwnedBy(oldUid).map((j) => j.metadata?.name)).toEqual([`kiln-${oldId}`]);

      link.cut();
      const buildUrl = `${ground.cluster.url}${BUILDS_PATH}/${name}`;
      expect((await fetch(buildUrl, { method: 'DELETE' })).status).toBe(200);
      // The operator's finalizer holds the Build (and its name) while the operator is away…
      expect(ground.resource(name)?.metadata.deletionTimestamp).toBeDefined();
      expect((await applyBuild(name)).status).toBe(409);
      // …so a user who wants the name back removes it by hand, as `kubectl patch` would.
      const released = await fetch(buildUrl, {
        method: 'PATCH',
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ metadata: { finalizers: null } }),
      });
      expect(released.status).toBe(200);
      expect(ground.resource(name)).toBeUndefined();
      if (compacted) ground.cluster.compact();
      // The new Build runs a short build (the kubelet reads the script when a container starts).
      ground.builder({ lines: 50, linesPerSecond: 500, printCrc: true });
      expect((await applyBuild(name)).status).toBe(201);
      const newUid = ground.resource(name)!.metadata.uid as string;
      expect(newUid).not.toBe(oldUid);
      link.restore();

      // The old build ended with its Build, as if the operator had seen the deletion (OP-11).
      const old = await ground.ended(oldId, 10_000);
      expect(old.status).toBe('cancelled');
      expect(await ground.column(oldId, 'cancel_reason')).toMatch(/the Build resource was/);
      const status = await until(`the new Build to get a status (${how})`, () => {
        const resource = ground.resource(name);
        return resource?.metadata.uid === newUid ? resource.status?.state : undefined;
      }).then(() => ground.resource(name)!.status);
      expect(status.failureReason).toBeUndefined();
      const newId = status.buildId as string;
      expect(newId).not.toBe(oldId);
      const created = await ground.ended(newId);
      expect(created.status).toBe('success');
      await ground.expectCompleteLog(newId, 50);
      await ground.expectMirrored(name, 'success');
      expect(jobsCreatedFor(newUid)).toBe(1);
      expect(jobsOwnedBy(newUid).map((j) => j.metadata?.name)).toEqual([`kiln-${newId}`]);
      expect(created.build_number).toBeGreaterThan(old.build_number);
      // The double collects garbage by owner: with the old Build gone, so is its Job.
      await until("the old Build's Jobs to go", () => jobsOwnedBy(oldUid).length === 0);
      expect(ground.jobOf(oldId)).toBeUndefined();
    },
  );

  // ---- OP-10 --------------------------------------------------------------------------------

  /**
   * Two operators that both lead, each on its own Lease (KILN_OPERATOR_LEASE_NAME), as two
   * replicas would after a forced split brain; one build started through the API and ended.
   */
  async function splitBrainBuild(n: number): Promise<{
    id: string;
    build: BuildRecord;
    changes: string[];
    reconciles: number[];
  }> {
    ground.builder({ lines: n, linesPerSecond: 300, printCrc: true });
    const brains = [
      await ground.startOperator({ env: { KILN_OPERATOR_LEASE_NAME: 'kiln-operator-left' } }),
      await ground.startOperator({ env: { KILN_OPERATOR_LEASE_NAME: 'kiln-operator-right' } }),
    ];
    await until('both to lead', () => brains.every((b) => ground.runtimeOf(b).isRunning));
    const changes = await ground.statusChanges();
    const id = await ground.startedBuild();
    const build = await ground.ended(id);
    await ground.expectMirrored(id, 'success');
    return {
      id,
      build,
      changes: changes.of(id),
      reconciles: brains.map((b) => ground.runtimeOf(b).reconcileCount(`${NS}/${id}`)),
    };
  }

  it('OP-10 forced split brain, two operators each leading on its own Lease work on one build: one Job, each transition once, the right end, every line stored', async () => {
    const n = 300;

    const { id, build, changes, reconciles } = await splitBrainBuild(n);

    expect(reconciles.map((count) => count > 0)).toEqual([true, true]);
    expect(build.status).toBe('success');
    expect(changes).toEqual(['in_progress', 'success']);
    expect(ground.jobsCreated(id)).toBe(1);
    expect(
      (ground.cluster.objects('batch/v1', 'jobs', NS) as V1Job[]).filter(
        (j) => j.metadata?.labels?.[KILN_LABELS.buildId] === id,
      ),
    ).toHaveLength(1);
    // Every printed line is stored, in order where it first appears (the doubling: below).
    const once = [...new Set(builderLines(await ground.storedLines(id)))];
    expect(once.slice(0, -1)).toEqual(numbered(n));
    expect(verifyCrc(once)).toBe(true);
  });

  // One follower at a time: the other operator waits for the build's log claim (build_logs).
  it('OP-10 forced split brain: the build log is stored once, not once per leader', async () => {
    const n = 300;

    const { id, reconciles } = await splitBrainBuild(n);

    expect(reconciles.map((count) => count > 0)).toEqual([true, true]);
    await ground.expectCompleteLog(id, n);
  });
});
