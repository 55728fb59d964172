import type { V1Pod } from '@kubernetes/client-node';
import { BUILD_METHODS } from '../../build-methods/methods.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { BuildLogFollower } from './log-follower.js';
import { containerStates, containersInOrder } from './pod-state.js';
import type { ReconcilerDeps } from './reconciler-ports.js';

interface Following {
  readonly follower: BuildLogFollower;
  readonly pod: string;
  readonly containers: readonly string[];
  finished: boolean;
}

type DrainDeps = Pick<
  ReconcilerDeps,
  'logs' | 'sink' | 'cursors' | 'logClaim' | 'logger' | 'settings'
>;

/**
 * The log followers of this process, one per build whose pod it reads, and the waits for them:
 * a build's end is recorded only once every stream of its pod is stored, or a marker line says
 * what is missing (the drain deadline, a pod deleted first, a pod never seen).
 */
export class LogDrains {
  private readonly following = new Map<string, Following>();
  private readonly drainingSince = new Map<string, number>();
  private readonly cancellingSince = new Map<string, number>();

  constructor(
    private readonly deps: DrainDeps,
    private readonly now: () => number,
  ) {}

  /** Follows the pod's log (a follower per build) and tells its follower the containers' states. */
  follow(record: BuildEntity, namespace: string, pod: V1Pod | undefined): Following | undefined {
    let following = this.following.get(record.id);
    const podName = pod?.metadata?.name;
    if (following === undefined && pod !== undefined && podName !== undefined) {
      following = this.start(record, namespace, pod, podName);
    }
    // A pod of another name is not the one followed: for the follower, its pod is gone.
    following?.follower.observe(
      containerStates(podName === following.pod ? pod : undefined, following.containers),
    );
    return following;
  }

  /** True when this process follows the build's log. */
  isFollowing(buildId: string): boolean {
    return this.following.has(buildId);
  }

  /**
   * The Job ended and no pod of it was ever followed: its pod is not in the cache. After a watch
   * outage the pod informer may catch up later than the Job's, so the end waits for the pod (its
   * log is then read, `follow=false`) up to the drain deadline. A pod seen before and gone now,
   * or one still unseen at the deadline, leaves one marker line: the log is missing, never
   * silently empty.
   */
  async podNeverFollowed(record: BuildEntity, seen: boolean): Promise<boolean> {
    const since = this.drainingSince.get(record.id) ?? this.now();
    this.drainingSince.set(record.id, since);
    const deadlineMs = this.deps.settings.drainDeadlineMs;
    if (!seen && this.now() - since < deadlineMs) return false;
    const why = seen
      ? 'the pod was deleted before its log was read'
      : `no pod of the Job was seen within ${Math.round(deadlineMs / 1000)} s of its end`;
    await this.deps.sink.append(record.id, [
      { text: `WARN: [kiln] ${why}: the log of every container is missing`, container: 'kiln' },
    ]);
    return true;
  }

  /** True once the build's log streams are stored (or the drain deadline wrote its marker). */
  async drained(buildId: string, podGone: boolean): Promise<boolean> {
    const following = this.following.get(buildId);
    if (following === undefined || following.finished) return true;
    const since = this.drainingSince.get(buildId) ?? this.now();
    this.drainingSince.set(buildId, since);
    const deadlineMs = this.deps.settings.drainDeadlineMs;
    if (podGone || this.now() - since >= deadlineMs) {
      await following.follower.abandon(
        podGone
          ? 'the pod was deleted before its log was read'
          : `the log was not read to its end within ${Math.round(deadlineMs / 1000)} s of the build's end`,
      );
      return true;
    }
    return false;
  }

  /**
   * A cancelled build's log: the lines printed up to the cancel are being read, so they get a
   * moment (`cancelSettleMs`), then the follower stops. True once it has (or none reads).
   */
  async cancelSettled(buildId: string): Promise<boolean> {
    const following = this.following.get(buildId);
    if (following === undefined || following.finished) return true;
    const since = this.cancellingSince.get(buildId) ?? this.now();
    this.cancellingSince.set(buildId, since);
    if (this.now() - since < this.deps.settings.cancelSettleMs) return false;
    await following.follower.stop();
    return true;
  }

  /** Stops reading the build's log, without a marker. */
  async stop(buildId: string): Promise<void> {
    await this.following.get(buildId)?.follower.stop();
  }

  /** Forgets the build (its log is stored, or it is given up on). */
  forget(buildId: string): void {
    this.following.delete(buildId);
    this.drainingSince.delete(buildId);
    this.cancellingSince.delete(buildId);
  }

  /** Stops every follower without a marker (lost lease, shutdown): the next leader resumes. */
  async stopAll(): Promise<void> {
    const all = [...this.following.values()];
    this.following.clear();
    await Promise.all(all.map((f) => f.follower.stop()));
  }

  private start(record: BuildEntity, namespace: string, pod: V1Pod, podName: string): Following {
    const { logs, sink, cursors, logger, logClaim, settings } = this.deps;
    const containers = containersInOrder(pod);
    const follower = new BuildLogFollower(
      { logs, sink, cursors, logger, ...(logClaim === undefined ? {} : { claim: logClaim }) },
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
    const entry: Following = { follower, pod: podName, containers, finished: false };
    void follower.done.finally(() => {
      entry.finished = true;
    });
    this.following.set(record.id, entry);
    return entry;
  }
}
