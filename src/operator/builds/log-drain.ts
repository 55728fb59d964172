import type { V1Pod } from '@kubernetes/client-node';
import { BUILD_METHODS } from '../../build-methods/methods.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { BuildLogFollower, FollowerBudget } from './log-follower.js';
import { containerStates, containersInOrder } from './pod-state.js';
import type { ReconcilerDeps } from './reconciler-ports.js';

/**
 * One follower of this process and the waits on it. Its times are this follower's own: a new
 * process has no follower, and one it starts gets a whole drain deadline to read what the pod
 * still holds, as the first did.
 */
interface Drain {
  readonly follower: BuildLogFollower;
  readonly pod: string;
  readonly containers: readonly string[];
  finished: boolean;
  /** Stopped or abandoned by the reconciler, which needs no wake for it. */
  letGo: boolean;
  /** When the reconciler first waited on it for the build's end (the drain deadline's start). */
  drainingSince?: number;
  /** When the reconciler first waited on it for a cancelled build (the settle's start). */
  settlingSince?: number;
}

type DrainDeps = Pick<
  ReconcilerDeps,
  'logs' | 'sink' | 'cursors' | 'logClaim' | 'logger' | 'settings' | 'wake' | 'metrics'
>;

/**
 * The log followers of this process, one per build whose pod it reads, and the waits for them:
 * a build's end is recorded only once every stream of its pod is stored, or a marker line says
 * what is missing (the drain deadline, a pod deleted first, a pod never seen). A follower that
 * reads its streams to the end wakes its Build's key (`wake`), so nothing polls while a log
 * drains; each wait also answers how long until its deadline, for a safety requeue then.
 */
export class LogDrains {
  /** The followers themselves: streams of this process, which no other process can hold. */
  private readonly drains = new Map<string, Drain>();
  /**
   * When this process first found a Job that ended while it ran without a pod in its cache
   * (podNeverFollowed). It only lengthens that wait: a process that starts afresh lists its pods
   * after such a Job ended, so a pod missing from its cache is gone, and it counts from the Job's
   * end alone.
   */
  private readonly awaitingPod = new Map<string, number>();
  private readonly startedAt: number;
  /** What all followers of this process hold together. */
  private readonly budget: FollowerBudget;

  constructor(
    private readonly deps: DrainDeps,
    private readonly now: () => number,
  ) {
    this.startedAt = now();
    this.budget = new FollowerBudget(deps.settings.follower);
  }

  /**
   * Follows the pod's log (one follower per build) and tells its follower the containers' states.
   * `key` is the Build's, woken when the follower has read every stream.
   */
  follow(key: string, record: BuildEntity, namespace: string, pod: V1Pod | undefined): void {
    let drain = this.drains.get(record.id);
    const podName = pod?.metadata?.name;
    if (drain === undefined && pod !== undefined && podName !== undefined) {
      drain = this.start(key, record, namespace, pod, podName);
    }
    // A pod of another name is not the one followed: for the follower, its pod is gone.
    drain?.follower.observe(
      containerStates(podName === drain.pod ? pod : undefined, drain.containers),
    );
  }

  /** True when this process follows the build's log. */
  isFollowing(buildId: string): boolean {
    return this.drains.has(buildId);
  }

  /**
   * How long to wait for the build's log streams to be stored; undefined once they are, or once
   * the wait is over (the pod is gone, or the drain deadline passed: a marker says what is
   * missing).
   */
  async drained(buildId: string, podGone: boolean): Promise<number | undefined> {
    const drain = this.drains.get(buildId);
    if (drain === undefined || drain.finished) return undefined;
    drain.drainingSince ??= this.now();
    const deadlineMs = this.deps.settings.drainDeadlineMs;
    const left = drain.drainingSince + deadlineMs - this.now();
    if (!podGone && left > 0) return left;
    drain.letGo = true;
    const outcome = await drain.follower.abandon(
      podGone
        ? 'the pod was deleted before its log was read'
        : `the log was not read to its end within ${seconds(deadlineMs)} s of the build's end`,
    );
    if (!podGone) this.droppedAtDeadline(outcome.abandoned);
    return undefined;
  }

  /**
   * The Job ended and this process never followed a pod of it: its pod is not in the cache.
   * After a watch outage the pod informer may catch up later than the Job's (its arrival wakes
   * the Build's key), so the end waits for the pod (its log is then read) up to the drain
   * deadline: from when the Job ended in the cluster (`endedAtMs`) if that was before this
   * process started, else from when this process first found it so. A pod seen before
   * (`podSeen`: its name is in the Build's status) and gone now, or one still unseen at the
   * deadline, leaves one marker line: the log is missing, never silently empty. Answers how long
   * to wait; undefined once the marker is written.
   */
  async podNeverFollowed(
    record: BuildEntity,
    podSeen: boolean,
    endedAtMs: number,
  ): Promise<number | undefined> {
    let since = endedAtMs;
    if (endedAtMs >= this.startedAt) {
      since = this.awaitingPod.get(record.id) ?? this.now();
      this.awaitingPod.set(record.id, since);
    }
    const deadlineMs = this.deps.settings.drainDeadlineMs;
    const left = since + deadlineMs - this.now();
    if (!podSeen && left > 0) return left;
    const why = podSeen
      ? 'the pod was deleted before its log was read'
      : `no pod of the Job was seen within ${seconds(deadlineMs)} s of its end`;
    await this.deps.sink.append(record.id, [
      { text: `WARN: [kiln] ${why}: the log of every container is missing`, container: 'kiln' },
    ]);
    if (!podSeen) this.droppedAtDeadline(1);
    return undefined;
  }

  /**
   * A cancelled build's log: the lines printed up to the cancel are being read, so they get a
   * moment (`cancelSettleMs`), then the follower stops. Answers how long the moment lasts yet;
   * undefined once the follower has stopped (or none reads).
   */
  async cancelSettled(buildId: string): Promise<number | undefined> {
    const drain = this.drains.get(buildId);
    if (drain === undefined || drain.finished) return undefined;
    drain.settlingSince ??= this.now();
    const left = drain.settlingSince + this.deps.settings.cancelSettleMs - this.now();
    if (left > 0) return left;
    drain.letGo = true;
    await drain.follower.stop();
    return undefined;
  }

  /** Stops reading the build's log, without a marker. */
  async stop(buildId: string): Promise<void> {
    const drain = this.drains.get(buildId);
    if (drain === undefined) return;
    drain.letGo = true;
    await drain.follower.stop();
  }

  /** Forgets the build (its log is stored, or it is given up on). */
  forget(buildId: string): void {
    this.drains.delete(buildId);
    this.awaitingPod.delete(buildId);
  }

  /** Stops every follower without a marker (lost lease, shutdown): the next leader resumes. */
  async stopAll(): Promise<void> {
    const all = [...this.drains.values()];
    this.drains.clear();
    for (const drain of all) drain.letGo = true;
    await Promise.all(all.map((drain) => drain.follower.stop()));
  }

  /**
   * Counts the gaps the drain deadline left, one per marker line: how many lines each hides is
   * unknown (they were never read), so each gap counts as one line.
   */
  private droppedAtDeadline(gaps: number): void {
    if (gaps > 0)
      this.deps.metrics.inc('kiln_log_lines_dropped_total', { cause: 'drain_deadline' }, gaps);
  }

  private start(
    key: string,
    record: BuildEntity,
    namespace: string,
    pod: V1Pod,
    podName: string,
  ): Drain {
    const { logs, sink, cursors, logger, logClaim, settings } = this.deps;
    const containers = containersInOrder(pod);
    const follower = new BuildLogFollower(
      {
        logs,
        sink,
        cursors,
        logger,
        budget: this.budget,
        ...(logClaim === undefined ? {} : { claim: logClaim }),
      },
      {
        buildId: record.id,
        namespace,
        pod: podName,
        containers: containers.map((name) => ({
          name,
          ...(name === 'build' ? { format: BUILD_METHODS[record.spec.method].logFormat } : {}),
        })),
      },
      settings.follower,
    );
    const drain: Drain = { follower, pod: podName, containers, finished: false, letGo: false };
    void follower.done.finally(() => {
      drain.finished = true;
      // Read to its end (or its claim went to another operator): the Build's wait is over.
      if (!drain.letGo) this.deps.wake(key);
    });
    this.drains.set(record.id, drain);
    return drain;
  }
}

function seconds(ms: number): number {
  return Math.round(ms / 1000);
}
