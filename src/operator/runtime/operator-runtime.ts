import { systemClock, type Clock } from './clock.js';
import { Controller, type Reconcile } from './controller.js';
import { objectKey, type Informer } from './informer.js';
import type { Elector } from './leader-election.js';
import {
  describeError,
  silentLogger,
  type KubeObjectLike,
  type RuntimeLogger,
} from '../../cluster/ports.js';
import type { Metrics } from '../../metrics/metrics.js';
import { WorkQueue, type WorkQueueOptions } from './work-queue.js';

export interface OperatorRuntimeOptions {
  reconcile: Reconcile;
  /** Reconciles at once (default 2). */
  workers?: number;
  /** Without one, this process leads from `start()` to `stop()`. */
  elector?: Elector;
  clock?: Clock;
  /** Per-key backoff of the work queue. */
  queue?: Omit<WorkQueueOptions, 'clock' | 'metrics' | 'name'>;
  /** In logs, and the `controller` label of the reconcile and work-queue metrics. */
  name?: string;
  logger?: RuntimeLogger;
  /** Where reconciles and the work queue are measured (the informers and elector have their own). */
  metrics?: Metrics;
}

interface Source {
  informer: {
    start(): void;
    stop(): Promise<void>;
    waitForSync(signal: AbortSignal): Promise<boolean>;
  };
  /** The reconcile keys of every cached object. */
  allKeys(): Iterable<string>;
}

/**
 * Composes informers, a work queue and workers under a leader elector. Informers run from
 * `start()` to `stop()`, leader or not, so a standby keeps warm caches. Each leadership term
 * waits until every informer has synced (and the previous term's reconciles have returned),
 * then enqueues the key of every cached object and starts the workers; informer changes enqueue
 * keys while it leads. When the term ends (lease lost, or `stop()`), the workers stop at once:
 * the signal of in-flight reconciles aborts and no further key is handed out.
 */
export class OperatorRuntime {
  private readonly sources: Source[] = [];
  private readonly counts = new Map<string, number>();
  private readonly clock: Clock;
  private readonly logger: RuntimeLogger;
  private readonly name: string;
  private controller?: Controller;
  /** Resolves when the last term's reconciles have all returned. */
  private previousTerm: Promise<void> = Promise.resolve();
  private ownTerm?: AbortController;
  private started = false;
  private leading = false;

  constructor(private readonly options: OperatorRuntimeOptions) {
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? silentLogger;
    this.name = options.name ?? 'operator';
  }

  /**
   * Feeds an informer's changes to the queue. `toKeys` maps an object to the keys to reconcile
   * (default: its own key; e.g. a Job maps to its owner's key). An update enqueues the keys of
   * the object before and after it once each, and only when `changed(before, after)` says it is
   * worth a reconcile (default: every update); a resync (`onUpdate(object, object)`) always is.
   */
  watch<T extends KubeObjectLike>(
    informer: Informer<T>,
    toKeys: (object: T) => Iterable<string> = (object) => [objectKey(object)],
    options: { changed?: (before: T, after: T) => boolean } = {},
  ): this {
    if (this.started) throw new Error('OperatorRuntime: add informers before start()');
    const changed = options.changed ?? (() => true);
    informer.addHandler({
      onAdd: (object) => this.enqueueAll(toKeys(object)),
      onUpdate: (before, after) => {
        if (before !== after && !changed(before, after)) return;
        this.enqueueAll(new Set([...toKeys(before), ...toKeys(after)]));
      },
      onDelete: (object) => this.enqueueAll(toKeys(object)),
    });
    this.sources.push({
      informer,
      allKeys: function* () {
        for (const object of informer.list()) yield* toKeys(object);
      },
    });
    return this;
  }

  /** True while this process leads (workers may still be waiting for the caches). */
  get isLeader(): boolean {
    return this.leading;
  }

  /** True while workers take keys. */
  get isRunning(): boolean {
    return this.controller !== undefined;
  }

  /** Reconciles started for `key`, over every term. */
  reconcileCount(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  get reconcileCounts(): ReadonlyMap<string, number> {
    return this.counts;
  }

  /** The current term's queue (undefined while not running). */
  get queue(): WorkQueue | undefined {
    return this.controller?.queue;
  }

  /**
   * Queues `key` for a reconcile while this process leads (a no-op otherwise): for a reconciler
   * whose wait ended on something no informer watches, such as a log stream read to its end.
   */
  enqueue(key: string): void {
    this.enqueueAll([key]);
  }

  /** Starts the informers and the election; returns without waiting for leadership. */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const { informer } of this.sources) informer.start();
    const elector = this.options.elector;
    if (elector) {
      elector.start({
        onStartedLeading: (signal) => this.beginTerm(signal),
        // Resolves when the term's reconciles have returned: only then is the Lease released.
        onStoppedLeading: () => this.previousTerm,
      });
    } else {
      this.ownTerm = new AbortController();
      this.beginTerm(this.ownTerm.signal);
    }
  }

  /** Stops the workers at once (aborting in-flight reconciles), the election and the informers. */
  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    this.ownTerm?.abort();
    await this.options.elector?.stop();
    await this.previousTerm;
    await Promise.all(this.sources.map(({ informer }) => informer.stop()));
  }

  private beginTerm(signal: AbortSignal): void {
    this.leading = true;
    const after = this.previousTerm;
    let endTerm: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => (endTerm = resolve));
    this.previousTerm = ended;
    signal.addEventListener('abort', () => (this.leading = false), { once: true });
    void this.runTerm(signal, after).then(endTerm, (error: unknown) => {
      this.logger.error({ operator: this.name, ...describeError(error) }, 'term failed');
      endTerm();
    });
  }

  private async runTerm(signal: AbortSignal, previous: Promise<void>): Promise<void> {
    await previous;
    const synced = await Promise.all(
      this.sources.map(({ informer }) => informer.waitForSync(signal)),
    );
    if (signal.aborted || synced.includes(false)) return;
    const metrics = this.options.metrics;
    const queue = new WorkQueue({
      ...this.options.queue,
      clock: this.clock,
      name: this.name,
      ...(metrics === undefined ? {} : { metrics }),
    });
    const controller = new Controller(queue, {
      name: this.name,
      logger: this.logger,
      ...(metrics === undefined ? {} : { metrics }),
      ...(this.options.workers !== undefined ? { workers: this.options.workers } : {}),
    });
    this.controller = controller;
    for (const source of this.sources) this.enqueueAll(source.allKeys());
    const stopped = new Promise<void>((resolve) =>
      signal.addEventListener(
        'abort',
        () => {
          if (this.controller === controller) this.controller = undefined;
          resolve(controller.stop());
        },
        { once: true },
      ),
    );
    this.logger.info({ operator: this.name }, 'caches synced; workers started');
    await Promise.all([controller.run((key, s) => this.reconcile(key, s)), stopped]);
  }

  private reconcile(key: string, signal: AbortSignal): ReturnType<Reconcile> {
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    return this.options.reconcile(key, signal);
  }

  private enqueueAll(keys: Iterable<string>): void {
    const queue = this.controller?.queue;
    if (!queue) return;
    for (const key of keys) queue.add(key);
  }
}
