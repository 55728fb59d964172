import type { V1Pod } from '@kubernetes/client-node';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient } from '../src/kubernetes/kube-client.js';
import { PIECE_BYTES, PodLogs } from '../src/kubernetes/pod-logs.js';
import { BuildLogsRepository } from '../src/logs/build-logs.repository.js';
import { LogSink } from '../src/logs/log-sink.js';
import {
  BuildLogFollower,
  FollowerBudget,
  type FollowOutcome,
  type LogFollowerDeps,
  type LogFollowerOptions,
} from '../src/operator/builds/log-follower.js';
import { containerStates, containersInOrder } from '../src/operator/builds/pod-state.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { numberedLine, verifyCrc } from './support/kube/kubelet.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';

const NS = 'kiln-builds';
const SOURCE = 'registry.example/git@sha256:1111';
const BUILDER = 'registry.example/kaniko@sha256:2222';
const FAST: LogFollowerOptions = {
  stallMs: 400,
  retryBaseMs: 20,
  retryMaxMs: 200,
  maxUnansweredLines: 10_000,
  maxHeldLines: 50_000,
  maxHeldChars: 32 * 1024 * 1024,
};

noteDoubleOnly('the pod log follower');

/**
 * The pod log follower against the Kubernetes API server double over real HTTP, into the real
 * LogSink on Postgres: every line once, in order, through cuts, stalls, restarts and deletions.
 * The test plays the reconciler's part of telling the follower the pod's container states.
 */
describe(BuildLogFollower.name, () => {
  let cluster: KubeApiServer;
  let dir: string;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let logs: PodLogs;
  let jobs = 0;
  let builds = 0;

  beforeAll(async () => {
    cluster = await KubeApiServer.start({ namespaces: ['default', NS] });
    dir = mkdtempSync(join(tmpdir(), 'kiln-follower-'));
    logs = new PodLogs(
      KubeClient.connect({
        kind: 'file',
        path: writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, NS),
      }),
    );
    kiln = await startTestApp();
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

  afterEach(() => {
    cluster.kubelet.clearScripts();
  });

  /** A Job whose pod runs the scripted images; resolves with the pod's name once it exists. */
  async function runPod(containers: Array<{ name: string; image: string; init?: boolean }>) {
    const name = `job-${++jobs}`;
    cluster.seed({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name, namespace: NS },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            initContainers: containers
              .filter((c) => c.init === true)
              .map((c) => ({ name: c.name, image: c.image })),
            containers: containers
              .filter((c) => c.init !== true)
              .map((c) => ({ name: c.name, image: c.image })),
          },
        },
      },
    });
    for (;;) {
      const pod = podOfJob(name);
      if (pod !== undefined) return pod.metadata!.name!;
      await sleep(10);
    }
  }

  const podOfJob = (job: string): V1Pod | undefined =>
    (cluster.objects('v1', 'pods', NS) as V1Pod[]).find(
      (p) => p.metadata?.labels?.['job-name'] === job,
    );
  const podNamed = (name: string): V1Pod | undefined =>
    (cluster.objects('v1', 'pods', NS) as V1Pod[]).find((p) => p.metadata?.name === name);

  async function newBuild(): Promise<string> {
    return (await admin.createBuild(seeded.projectA, `follow-${++builds}-${Date.now()}`))
      .id as string;
  }

  /** Starts a follower and keeps it told of the pod's container states, as the reconciler does. */
  function follow(
    buildId: string,
    pod: string,
    overrides: {
      options?: LogFollowerOptions;
      sink?: LogFollowerDeps['sink'];
      claim?: LogFollowerDeps['claim'];
      budget?: FollowerBudget;
      cursors?: LogFollowerDeps['cursors'];
    } = {},
  ): { follower: BuildLogFollower; done: Promise<FollowOutcome> } {
    const names = containersInOrder(podNamed(pod)!);
    const follower = new BuildLogFollower(
      {
        logs,
        sink: overrides.sink ?? kiln.app.get(LogSink),
        cursors: overrides.cursors ?? kiln.app.get(BuildLogsRepository),
        logger: kiln.logs.logger,
        ...(overrides.claim === undefined ? {} : { claim: overrides.claim }),
        ...(overrides.budget === undefined ? {} : { budget: overrides.budget }),
      },
      { buildId, namespace: NS, pod, containers: names.map((name) => ({ name })) },
      overrides.options ?? FAST,
    );
    let watching = true;
    void (async () => {
      while (watching) {
        follower.observe(containerStates(podNamed(pod), names));
        await sleep(25);
      }
    })();
    const done = follower.done.finally(() => {
      watching = false;
    });
    return { follower, done };
  }

  async function stored(buildId: string): Promise<Array<{ container: string; message: string }>> {
    await kiln.app.get(LogSink).release(buildId);
    return kiln.dataSource.query(
      `SELECT metadata->>'container' AS container, message FROM build_log_lines
        WHERE build_id = $1 ORDER BY seq`,
      [buildId],
    );
  }

  it('stores every line of every container, init containers first, once and in order', async () => {
    cluster.kubelet.script(SOURCE, { lines: ['cloning', 'checked out main'] });
    cluster.kubelet.script(BUILDER, { lines: 500, linesPerSecond: 5_000, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([
      { name: 'source', image: SOURCE, init: true },
      { name: 'build', image: BUILDER },
    ]);

    const outcome = await follow(buildId, pod).done;

    expect(outcome).toEqual({ complete: true, incomplete: [], abandoned: 0 });
    const lines = await stored(buildId);
    expect(lines.slice(0, 2)).toEqual([
      { container: 'source', message: 'cloning' },
      { container: 'source', message: 'checked out main' },
    ]);
    const built = lines.slice(2).map((l) => l.message);
    expect(built.slice(0, 500)).toEqual(
      Array.from({ length: 500 }, (_, i) => numberedLine(i + 1, 500)),
    );
    expect(verifyCrc(built)).toBe(true);
  });

  it('reads no further while LogSink is behind: the lines handed on and not yet stored stay bounded, none lost', async () => {
    const n = 20_000;
    const bound = 1_000;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 40_000, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const sink = kiln.app.get(LogSink);
    // A database that stores a batch every 20 ms: far slower than the pod prints.
    const slow: LogFollowerDeps['sink'] = {
      append: async (id, lines) => {
        await sleep(20);
        return sink.append(id, lines);
      },
    };
    const { follower, done } = follow(buildId, pod, {
      options: { ...FAST, stallMs: 5_000, maxUnansweredLines: bound },
      sink: slow,
    });
    let most = 0;
    let sampling = true;
    void (async () => {
      while (sampling) {
        most = Math.max(most, follower.unansweredLines);
        await sleep(2);
      }
    })();

    await done;
    sampling = false;

    // Past the bound, one more piece of the stream is handed on before the stream waits.
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(bound + linesPerPiece(n));
    const built = (await stored(buildId)).map((l) => l.message);
    expect(built.slice(0, n)).toEqual(Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)));
    expect(verifyCrc(built)).toBe(true);
  }, 60_000);

  it('hands lines read while an append is out to LogSink together: one append per round trip, not per chunk', async () => {
    const n = 6_000;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 20_000, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const sink = kiln.app.get(LogSink);
    const appends: number[] = [];
    // Each append takes 50 ms: the pod prints ~1,000 lines meanwhile, in many chunks.
    const slow: LogFollowerDeps['sink'] = {
      append: async (id, lines) => {
        appends.push(lines.length);
        await sleep(50);
        return sink.append(id, lines);
      },
    };

    await follow(buildId, pod, { sink: slow }).done;

    const built = (await stored(buildId)).map((l) => l.message);
    expect(built.slice(0, n)).toEqual(Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)));
    expect(verifyCrc(built)).toBe(true);
    // 20,000 lines/s for 0.3 s at 50 ms an append: about 6–10 appends (a chunk is ~10 lines).
    expect(appends.length).toBeLessThan(40);
    expect(Math.max(...appends)).toBeGreaterThan(100);
  }, 60_000);

  it('bounds what all followers of a process hold together: past the shared budget each reads on only once its own lines are answered, none lost', async () => {
    const n = 8_000;
    const pods = 4;
    const bound = 500;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 40_000, printCrc: true });
    const budget = new FollowerBudget({ maxHeldLines: bound, maxHeldChars: 1024 * 1024 });
    const sink = kiln.app.get(LogSink);
    const slow: LogFollowerDeps['sink'] = {
      append: async (id, lines) => {
        await sleep(20);
        return sink.append(id, lines);
      },
    };
    const builds = await Promise.all(
      Array.from({ length: pods }, async () => ({
        buildId: await newBuild(),
        pod: await runPod([{ name: 'build', image: BUILDER }]),
      })),
    );
    let most = 0;
    let sampling = true;
    void (async () => {
      while (sampling) {
        most = Math.max(most, budget.held.lines);
        await sleep(2);
      }
    })();

    await Promise.all(
      builds.map(
        ({ buildId, pod }) =>
          follow(buildId, pod, { options: { ...FAST, stallMs: 5_000 }, sink: slow, budget }).done,
      ),
    );
    sampling = false;

    // Past the bound each follower hands on at most the piece it read last. Without the budget
    // each follower would read on to its own 10,000: all 4 × 8,000 lines would be held at once.
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(bound + pods * linesPerPiece(n));
    expect(budget.held).toEqual({ lines: 0, chars: 0 });
    for (const { buildId } of builds) {
      const built = (await stored(buildId)).map((l) => l.message);
      expect(built.slice(0, n)).toEqual(
        Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)),
      );
    }
  }, 60_000);

  it('OP-10 lets one follower at a time store a build’s log: a second waits for the first’s claim, then goes on from what is stored', async () => {
    const n = 3_000;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 1_500, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const store = kiln.app.get(BuildLogsRepository);
    const claim = (holder: string) => ({ store, holder, ttlMs: 2_000 });
    const first = follow(buildId, pod, { claim: claim('operator-a') });
    while ((await store.lineCount(buildId)) < 200) await sleep(20);

    // Two operators that both believe they lead, each following the same pod.
    const second = follow(buildId, pod, { claim: claim('operator-b') });
    await sleep(500);
    await first.follower.stop();
    const outcome = await second.done;

    expect(outcome).toEqual({ complete: true, incomplete: [], abandoned: 0 });
    const messages = (await stored(buildId)).map((l) => l.message);
    expect(messages.slice(0, n)).toEqual(
      Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)),
    );
    expect(messages).toHaveLength(n + 1);
    expect(verifyCrc(messages)).toBe(true);
  });

  it('follows once the claim of a follower that died (it renews no more) has run out', async () => {
    cluster.kubelet.script(BUILDER, { lines: 100, linesPerSecond: 1_000, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const store = kiln.app.get(BuildLogsRepository);
    expect(await store.claimFollower(buildId, 'a-process-that-died', 1_000)).toBe(true);
    expect(await store.claimFollower(buildId, 'operator-b', 1_000)).toBe(false);

    const outcome = await follow(buildId, pod, {
      claim: { store, holder: 'operator-b', ttlMs: 1_000 },
    }).done;

    expect(outcome).toEqual({ complete: true, incomplete: [], abandoned: 0 });
    const messages = (await stored(buildId)).map((l) => l.message);
    expect(messages).toHaveLength(101);
    expect(verifyCrc(messages)).toBe(true);
    // Let go of when it ended.
    expect(await store.claimFollower(buildId, 'operator-c', 1_000)).toBe(true);
  });

  it('loses and doubles nothing when the stream is cut ten times mid-build, even inside lines that share a timestamp', async () => {
    const n = 4_000;
    cluster.kubelet.script(BUILDER, {
      lines: n,
      linesPerSecond: 2_000,
      linesPerWrite: 7,
      printCrc: true,
    });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const { done } = follow(buildId, pod);

    let cuts = 0;
    while (cuts < 10) {
      await sleep(60);
      if (cluster.openLogStreams({ pod }) > 0) cuts += cluster.cutLogStreams({ pod });
      if (podNamed(pod)?.status?.phase === 'Succeeded') break;
    }
    await done;

    expect(cuts).toBeGreaterThanOrEqual(5);
    const messages = (await stored(buildId)).map((l) => l.message);
    expect(messages.slice(0, n)).toEqual(
      Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)),
    );
    expect(verifyCrc(messages)).toBe(true);
  });

  it('counts a break after a stream that carried lines as a first failure, so cuts now and then never lengthen the wait', async () => {
    const n = 600;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 100, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const { done } = follow(buildId, pod);

    // Each cut comes a while after the stream reopened: long enough for it to carry new lines.
    let cuts = 0;
    const running = () => podNamed(pod)?.status?.phase !== 'Succeeded';
    while (cuts < 8 && running()) {
      while (cluster.openLogStreams({ pod }) === 0 && running()) await sleep(10);
      await sleep(300);
      cuts += cluster.cutLogStreams({ pod });
    }
    await done;

    const breaks = kiln.logs.lines.filter(
      (l) => l['build_id'] === buildId && l['msg'] === 'log stream broke; reopening it',
    );
    expect(cuts).toBeGreaterThanOrEqual(5);
    expect(breaks.length).toBeGreaterThanOrEqual(5);
    expect(breaks.map((l) => l['failures'])).toEqual(breaks.map(() => 1));
    for (const l of breaks) expect(l['retry_in_ms']).toBeLessThanOrEqual(FAST.retryBaseMs);
    const messages = (await stored(buildId)).map((l) => l.message);
    expect(messages).toHaveLength(n + 1);
    expect(verifyCrc(messages)).toBe(true);
  }, 30_000);

  it('reopens a stalled stream and goes on where it was', async () => {
    const n = 1_500;
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 1_500, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const { done } = follow(buildId, pod);
    while (cluster.openLogStreams({ pod }) === 0) await sleep(10);
    await sleep(200);

    expect(cluster.stallLogStreams({ pod })).toBe(1);
    await done;

    const messages = (await stored(buildId)).map((l) => l.message);
    expect(verifyCrc(messages)).toBe(true);
    expect(messages).toHaveLength(n + 1);
  });

  it('resumes from what is stored when a new follower takes over (an operator restart)', async () => {
    const n = 3_000;
    cluster.kubelet.script(BUILDER, {
      lines: n,
      linesPerSecond: 3_000,
      linesPerWrite: 5,
      printCrc: true,
    });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const first = follow(buildId, pod);
    await sleep(400);
    await first.follower.stop();
    await kiln.app.get(LogSink).release(buildId);

    const outcome = await follow(buildId, pod).done;

    expect(outcome.complete).toBe(true);
    const messages = (await stored(buildId)).map((l) => l.message);
    expect(messages.slice(0, n)).toEqual(
      Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)),
    );
    expect(verifyCrc(messages)).toBe(true);
  });

  it('a follower that takes over asks once where every container resumes, and stores no line of any twice', async () => {
    const n = 3_000;
    cluster.kubelet.script(SOURCE, { lines: ['cloning', 'checked out main'] });
    cluster.kubelet.script(BUILDER, { lines: n, linesPerSecond: 3_000, printCrc: true });
    const buildId = await newBuild();
    const pod = await runPod([
      { name: 'source', image: SOURCE, init: true },
      { name: 'build', image: BUILDER },
    ]);
    const first = follow(buildId, pod);
    const repository = kiln.app.get(BuildLogsRepository);
    while ((await repository.lineCount(buildId)) < 500) await sleep(20);
    await first.follower.stop();
    await kiln.app.get(LogSink).release(buildId);

    const asked: string[][] = [];
    const cursors: LogFollowerDeps['cursors'] = {
      containerCursors: (id, containers) => {
        asked.push([...containers]);
        return repository.containerCursors(id, containers);
      },
    };
    const outcome = await follow(buildId, pod, { cursors }).done;

    expect(outcome).toEqual({ complete: true, incomplete: [], abandoned: 0 });
    expect(asked).toEqual([['source', 'build']]);
    const lines = await stored(buildId);
    expect(lines.slice(0, 2)).toEqual([
      { container: 'source', message: 'cloning' },
      { container: 'source', message: 'checked out main' },
    ]);
    const built = lines.slice(2).map((l) => l.message);
    expect(built.slice(0, n)).toEqual(Array.from({ length: n }, (_, i) => numberedLine(i + 1, n)));
    expect(verifyCrc(built)).toBe(true);
  });

  it('says which lines are missing when the pod is deleted before its log was read', async () => {
    cluster.kubelet.script(BUILDER, { lines: 100_000, linesPerSecond: 500 });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const { done } = follow(buildId, pod);
    while ((await kiln.app.get(BuildLogsRepository).lineCount(buildId)) < 20) await sleep(50);

    cluster.removePod(NS, pod);
    const outcome = await done;

    // A deleted pod's gap, not one `abandon` left.
    expect(outcome).toEqual({ complete: false, incomplete: ['build'], abandoned: 0 });
    const lines = await stored(buildId);
    expect(lines.at(-1)).toEqual({
      container: 'kiln',
      message: expect.stringMatching(
        /^WARN: \[kiln\] the pod was deleted before its log was read: its lines after \S+ from container build are missing$/,
      ),
    });
    const numbered = lines.slice(0, -1).map((l) => l.message);
    expect(numbered).toEqual(numbered.map((_, i) => numberedLine(i + 1, 100_000)));
  });

  it('writes a marker for what was not read when the drain deadline passes', async () => {
    cluster.kubelet.script(BUILDER, { hang: true, lines: ['started'] });
    const buildId = await newBuild();
    const pod = await runPod([{ name: 'build', image: BUILDER }]);
    const { follower } = follow(buildId, pod);
    while ((await kiln.app.get(BuildLogsRepository).lineCount(buildId)) < 1) await sleep(20);

    const outcome = await follower.abandon('the drain deadline passed');

    expect(outcome).toEqual({ complete: false, incomplete: ['build'], abandoned: 1 });
    expect((await stored(buildId)).map((l) => l.message)).toEqual([
      'started',
      expect.stringMatching(/^WARN: \[kiln\] the drain deadline passed: its lines after /),
    ]);
    cluster.removePod(NS, pod);
  });
});

/**
 * The most lines of `numberedLine(·, n)` one piece PodLogs hands on can hold: each is its text and
 * a newline at least (the timestamp before it only makes a piece hold fewer).
 */
function linesPerPiece(n: number): number {
  return Math.ceil(PIECE_BYTES / (numberedLine(1, n).length + 1));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
