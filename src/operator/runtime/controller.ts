import { SpanStatusCode, trace } from '@opentelemetry/api';
import { describeError, silentLogger, type RuntimeLogger } from '../../cluster/ports.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { WorkQueue } from './work-queue.js';

/** What a reconcile asks for: nothing (done), or to look again after a while. */
export interface ReconcileResult {
  /** Reconcile this key again after this long (an expected wait, not an error). */
  requeueAfterMs?: number;
}

/**
 * A failure that trying again cannot mend (an invalid spec, a refused access), as
 * controller-runtime's TerminalError: the Controller logs it and does not requeue the key. A
 * reconciler that can say so in the object's status catches it and writes that first; one that
 * escapes is still not retried. Any other error is taken for transient and requeued with backoff.
 */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

/**
 * Brings the world in line with the desired state for one key. Resolving means success; throwing
 * means "try again with backoff", unless it is a TerminalError. `signal` aborts when this process must stop acting (it lost
 * the lease, or it is shutting down): stop at the next await and write nothing more.
 */
export type Reconcile = (key: string, signal: AbortSignal) => Promise<ReconcileResult | void>;

export interface ControllerOptions {
  /** Reconciles running at once, at most (default 2). */
  workers?: number;
  /** The `controller` label of its metrics, and its name in logs. */
  name?: string;
  logger?: RuntimeLogger;
  /** Where reconciles are counted and timed (kiln_operator_reconcile*). */
  metrics?: Metrics;
}

/** How a reconcile ended, as kiln_operator_reconciles_total's `result` says it. */
type ReconcileOutcome = 'success' | 'requeue' | 'error';

/**
 * Runs `reconcile` for the keys of a work queue on N workers: an error requeues the key with its
 * backoff (a TerminalError does not), `requeueAfterMs` requeues it after that delay, success
 * forgets its backoff.
 */
export class Controller {
  private readonly aborter = new AbortController();
  private readonly counts = new Map<string, number>();
  private workers?: Promise<void>;
  private readonly workerCount: number;
  private readonly name: string;
  private readonly logger: RuntimeLogger;
  private readonly metrics: Metrics | undefined;

  constructor(
    readonly queue: WorkQueue,
    options: ControllerOptions = {},
  ) {
    this.workerCount = Math.max(1, options.workers ?? 2);
    this.name = options.name ?? 'controller';
    this.logger = options.logger ?? silentLogger;
    this.metrics = options.metrics;
  }

  /** Aborts when `stop()` is called; every reconcile gets it. */
  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  /** Starts the workers; resolves once all of them have returned (after `stop()`). */
  run(reconcile: Reconcile): Promise<void> {
    this.workers ??= Promise.all(
      Array.from({ length: this.workerCount }, () => this.work(reconcile)),
    ).then(() => undefined);
    return this.workers;
  }

  /**
   * Stops at once: aborts the signal of the reconciles in flight, stops handing out keys, and
   * resolves when the in-flight reconciles have returned.
   */
  async stop(): Promise<void> {
    this.aborter.abort();
    await this.queue.shutdown();
    await this.workers;
  }

  /** How many reconciles started for `key`. */
  reconcileCount(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  get reconcileCounts(): ReadonlyMap<string, number> {
    return this.counts;
  }

  /**
   * One reconcile in a span of its own trace (a no-op until tracing is on): the controller, the
   * object's namespace and name, and the result as the reconcile metrics count it. The
   * reconcile's database calls and log lines fall inside it.
   */
  private traced(reconcile: Reconcile, key: string): Promise<ReconcileResult | void> {
    const slash = key.indexOf('/');
    const attributes = {
      'kiln.controller': this.name,
      ...(slash < 0 ? {} : { 'k8s.namespace.name': key.slice(0, slash) }),
      'kiln.resource.name': key.slice(slash + 1),
    };
    return trace
      .getTracer('kiln')
      .startActiveSpan(`reconcile ${this.name}`, { root: true, attributes }, async (span) => {
        try {
          const result = await reconcile(key, this.aborter.signal);
          const requeue = result?.requeueAfterMs !== undefined && result.requeueAfterMs > 0;
          span.setAttribute('kiln.reconcile.result', requeue ? 'requeue' : 'success');
          return result;
        } catch (error) {
          const type = error instanceof Error ? error.name : 'error';
          span.setAttributes({ 'kiln.reconcile.result': 'error', 'error.type': type });
          span.setStatus({ code: SpanStatusCode.ERROR, message: type });
          throw error;
        } finally {
          span.end();
        }
      });
  }

  private async work(reconcile: Reconcile): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      const started = process.hrtime.bigint();
      let outcome: ReconcileOutcome | undefined;
      try {
        outcome = await this.reconcileOnce(reconcile, key);
      } finally {
        this.queue.done(key);
        if (outcome !== undefined) this.record(outcome, started);
      }
    }
  }

  /**
   * One reconcile of `key` and what the queue does after it. Undefined when it threw after this
   * controller stopped (a lost lease, a shutdown): cut short, it is neither a success nor an
   * error of its own.
   */
  private async reconcileOnce(
    reconcile: Reconcile,
    key: string,
  ): Promise<ReconcileOutcome | undefined> {
    try {
      const result = await this.traced(reconcile, key);
      const after = result?.requeueAfterMs;
      const outcome = after !== undefined && after > 0 ? 'requeue' : 'success';
      if (this.aborter.signal.aborted) return outcome;
      this.queue.forget(key);
      if (outcome === 'requeue') this.queue.addAfter(key, after ?? 0);
      return outcome;
    } catch (error) {
      if (this.aborter.signal.aborted) return undefined;
      if (error instanceof TerminalError) {
        this.queue.forget(key);
        this.logger.error(
          { controller: this.name, key, ...describeError(error) },
          'reconcile failed for good; not retried',
        );
        return 'error';
      }
      this.queue.addRateLimited(key);
      this.logger.warn(
        {
          controller: this.name,
          key,
          ...describeError(error),
          failures: this.queue.numRequeues(key),
        },
        'reconcile failed; requeued with backoff',
      );
      return 'error';
    }
  }

  private record(outcome: ReconcileOutcome, started: bigint): void {
    if (this.metrics === undefined) return;
    const labels = { controller: this.name };
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    this.metrics.observe('kiln_operator_reconcile_duration_seconds', labels, seconds);
    this.metrics.inc('kiln_operator_reconciles_total', { ...labels, result: outcome });
  }
}
