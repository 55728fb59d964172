import { exponentialDelay } from './backoff.js';
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import type { Metrics } from '../../metrics/metrics.js';

export interface WorkQueueOptions {
  clock?: Clock;
  /** First per-key retry delay (default 5 ms), doubling per consecutive failure… */
  backoffBaseMs?: number;
  /** …up to this (default 5 min). */
  backoffCapMs?: number;
  /** Where its depth and latency go (kiln_operator_workqueue_*), labelled by `name`. */
  metrics?: Metrics;
  /** The `controller` label of its metrics (default `controller`). */
  name?: string;
}

/**
 * A queue of string keys, as client-go's workqueue: a key added while it waits is queued once;
 * a key being processed is never handed out again until `done(key)`, and if it was added
 * meanwhile it is queued again then; `addAfter` delays an add (the earliest deadline per key
 * wins); `addRateLimited` delays by the key's own exponential backoff until `forget(key)`.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys waiting to be processed: queued, or to be queued when their processing ends. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private readonly delayed = new Map<string, { due: number; timer: TimerHandle }>();
  private readonly failures = new Map<string, number>();
  /**
   * When each waiting key was first added (by the clock): a key added again while it waits keeps
   * its first time. Taken out when a worker takes the key, for the latency histogram.
   */
  private readonly addedAt = new Map<string, number>();
  private readonly drainWaiters: Array<() => void> = [];
  private stopping = false;
  private readonly clock: Clock;
  private readonly backoffBaseMs: number;
  private readonly backoffCapMs: number;
  private readonly metrics: Metrics | undefined;
  private readonly labels: { controller: string };

  constructor(options: WorkQueueOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.backoffBaseMs = options.backoffBaseMs ?? 5;
    this.backoffCapMs = options.backoffCapMs ?? 5 * 60_000;
    this.metrics = options.metrics;
    this.labels = { controller: options.name ?? 'controller' };
    this.reportDepth();
  }

  /** Keys waiting to be handed out. */
  get length(): number {
    return this.queue.length;
  }

  /** Keys handed out and not yet `done`. */
  get inFlight(): number {
    return this.processing.size;
  }

  /** Keys waiting for an `addAfter`/`addRateLimited` delay. */
  get delayedCount(): number {
    return this.delayed.size;
  }

  get shuttingDown(): boolean {
    return this.stopping;
  }

  add(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (!this.addedAt.has(key)) this.addedAt.set(key, this.clock.now());
    if (!this.processing.has(key)) this.enqueue(key);
  }

  addAfter(key: string, ms: number): void {
    if (this.stopping) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const due = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing && existing.due <= due) return;
    this.clock.clearTimeout(existing?.timer);
    const timer = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { due, timer });
  }

  /** Adds after the key's backoff: base · 2^(failures so far), capped. */
  addRateLimited(key: string): void {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    this.addAfter(key, exponentialDelay(failures, this.backoffBaseMs, this.backoffCapMs));
  }

  /** Clears the key's backoff (after a success). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** Consecutive failures recorded for the key since its last `forget`. */
  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /**
   * The next key (now marked as being processed), waiting for one if needed; undefined once
   * the queue shuts down.
   */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.reportDepth();
      this.handOut(key);
      return Promise.resolve(key);
    }
    if (this.stopping) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Ends the processing of `key`; a key added meanwhile is queued again now. */
  done(key: string): void {
    if (!this.processing.delete(key)) return;
    if (this.dirty.has(key) && !this.stopping) this.enqueue(key);
    if (this.processing.size === 0) for (const wake of this.drainWaiters.splice(0)) wake();
  }

  /**
   * Stops handing out work: queued and delayed keys are dropped, later adds are ignored, and
   * waiting `get()` calls resolve undefined. Resolves once every key handed out is `done`.
   */
  shutdown(): Promise<void> {
    this.stopping = true;
    for (const { timer } of this.delayed.values()) this.clock.clearTimeout(timer);
    this.delayed.clear();
    this.queue.length = 0;
    this.reportDepth();
    this.dirty.clear();
    this.addedAt.clear();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private enqueue(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter === undefined) {
      this.queue.push(key);
      this.reportDepth();
      return;
    }
    this.handOut(key);
    waiter(key);
  }

  /** Marks `key` as being processed and records how long it waited since its first add. */
  private handOut(key: string): void {
    this.dirty.delete(key);
    this.processing.add(key);
    const added = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (added !== undefined && this.metrics !== undefined) {
      const seconds = Math.max(0, this.clock.now() - added) / 1000;
      this.metrics.observe('kiln_operator_workqueue_latency_seconds', this.labels, seconds);
    }
  }

  private reportDepth(): void {
    this.metrics?.set('kiln_operator_workqueue_depth', this.labels, this.queue.length);
  }
}
