import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import {
  describeError,
  httpStatusOf,
  silentLogger,
  type LeaseRecord,
  type LeaseStore,
  type RuntimeLogger,
} from '../../cluster/ports.js';
import type { Metrics } from '../../metrics/metrics.js';
import { abortable, linkSignals } from './signals.js';

export interface LeaderCallbacks {
  /** This process leads from now until `signal` aborts. */
  onStartedLeading(signal: AbortSignal): void;
  /**
   * This process no longer leads (called once per term, right after `signal` aborted). On
   * `stop()`, the elector waits for the returned promise before it releases the Lease, so work
   * still winding down never overlaps a successor's.
   */
  onStoppedLeading(): void | Promise<void>;
  /** The holder seen in the Lease changed (undefined: nobody holds it). */
  onNewLeader?(identity: string | undefined): void;
}

/** What the operator runtime needs from an elector (LeaderElector, or a stand-in). */
export interface Elector {
  start(callbacks: LeaderCallbacks): void;
  stop(): Promise<void>;
  readonly isLeader: boolean;
}

export interface LeaderElectorOptions {
  store: LeaseStore;
  namespace: string;
  name: string;
  /** Default: the host name and a random suffix. */
  identity?: string;
  /** How long a Lease is valid after its renewTime for everyone else (default 15 s). */
  leaseDurationMs?: number;
  /** The leader gives up when it has not renewed for this long (default 10 s). */
  renewDeadlineMs?: number;
  /** Between attempts to acquire or renew (default 2 s). */
  retryPeriodMs?: number;
  clock?: Clock;
  random?: () => number;
  logger?: RuntimeLogger;
  /** Where kiln_operator_leader goes: 0 from construction, 1 during each term. */
  metrics?: Metrics;
}

export function defaultIdentity(): string {
  return `${hostname()}-${randomBytes(4).toString('hex')}`;
}

type Attempt = 'acquired' | 'held-by-other' | 'failed';

/**
 * Leader election on a coordination.k8s.io/v1 Lease (client-node has no helper). A candidate
 * takes the Lease when it is absent, expired (`renewTime + leaseDurationSeconds < now`), released
 * (no holder) or already its own, writing with the read resourceVersion so that of two writers
 * one gets 409. The leader renews every retry period; when no renewal has succeeded for the
 * renew deadline, or it sees that someone else holds the Lease (or a 409), it stops leading at
 * once (the term's signal aborts) and goes back to trying to acquire. `stop()` releases the
 * Lease (empty holder) so that a successor takes over without waiting for the expiry.
 *
 * Like client-go's, this is no fence: a leader cut off from the API server acts until its renew
 * deadline, which is shorter than the lease duration others wait for. Side effects must stay
 * idempotent (deterministic names, conditional updates).
 */
export class LeaderElector implements Elector {
  readonly identity: string;
  private readonly store: LeaseStore;
  private readonly namespace: string;
  private readonly name: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly logger: RuntimeLogger;
  private readonly metrics: Metrics | undefined;
  private stopper = new AbortController();
  private loop?: Promise<void>;
  private term?: AbortController;
  private callbacks?: LeaderCallbacks;
  /** The Lease as this elector last wrote it (for renewals and the release). */
  private written?: LeaseRecord;
  private observedHolder?: string;
  private steppedDown: Promise<void> = Promise.resolve();

  constructor(options: LeaderElectorOptions) {
    this.store = options.store;
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity ?? defaultIdentity();
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.logger = options.logger ?? silentLogger;
    this.metrics = options.metrics;
    this.metrics?.set('kiln_operator_leader', {}, 0);
    if (this.leaseDurationMs <= this.renewDeadlineMs)
      throw new Error('leader election: leaseDuration must be greater than renewDeadline');
    if (this.renewDeadlineMs <= this.retryPeriodMs * 1.2)
      throw new Error('leader election: renewDeadline must be greater than 1.2 × retryPeriod');
    if (this.leaseDurationMs % 1000 !== 0)
      throw new Error(
        'leader election: leaseDuration must be whole seconds (leaseDurationSeconds)',
      );
  }

  get isLeader(): boolean {
    return this.term !== undefined;
  }

  /** The holder this elector last saw in the Lease. */
  get leader(): string | undefined {
    return this.observedHolder;
  }

  start(callbacks: LeaderCallbacks): void {
    if (this.loop) return;
    this.callbacks = callbacks;
    this.stopper = new AbortController();
    this.loop = this.run().finally(() => (this.loop = undefined));
  }

  /** Stops leading at once (if it was), stops trying, and releases the Lease if it holds it. */
  async stop(): Promise<void> {
    this.stopper.abort();
    const wasLeader = this.isLeader;
    this.stepDown('stopped');
    await this.loop;
    await this.steppedDown;
    if (wasLeader) await this.release();
  }

  private async run(): Promise<void> {
    const stop = this.stopper.signal;
    while (!stop.aborted) {
      const attempt = await this.tryAcquireOrRenew(stop);
      if (stop.aborted) break;
      if (attempt === 'acquired') await this.lead(stop);
      else await this.clock.sleep(this.retryPeriodMs * (1 + 0.2 * this.random()), stop);
    }
  }

  private async lead(stop: AbortSignal): Promise<void> {
    const term = new AbortController();
    this.term = term;
    this.metrics?.set('kiln_operator_leader', {}, 1);
    const { signal, dispose } = linkSignals(term.signal, stop);
    let deadline: TimerHandle | undefined;
    // Counted from the renewTime written (not from when the answer came back): others count
    // the lease duration from it too, so the leader always stops before anyone may take over.
    const armDeadline = (): void => {
      this.clock.clearTimeout(deadline);
      const renewedAt = this.written?.renewTime ?? this.clock.now();
      deadline = this.clock.setTimeout(
        () => this.stepDown('renew deadline passed'),
        renewedAt + this.renewDeadlineMs - this.clock.now(),
      );
    };
    armDeadline();
    this.logger.info({ lease: this.leaseName, identity: this.identity }, 'started leading');
    try {
      this.callbacks?.onStartedLeading(term.signal);
    } catch (error) {
      this.logger.error(describeError(error), 'onStartedLeading threw');
    }
    while (!signal.aborted) {
      await this.clock.sleep(this.retryPeriodMs, signal);
      if (signal.aborted) break;
      const attempt = await this.tryAcquireOrRenew(signal);
      if (signal.aborted) break;
      if (attempt === 'acquired') armDeadline();
      else if (attempt === 'held-by-other') this.stepDown('another holder took the lease');
    }
    this.clock.clearTimeout(deadline);
    dispose();
  }

  /** Ends the current term at once, if there is one. */
  private stepDown(reason: string): void {
    const term = this.term;
    if (!term) return;
    this.term = undefined;
    this.metrics?.set('kiln_operator_leader', {}, 0);
    term.abort();
    this.logger.warn({ lease: this.leaseName, identity: this.identity, reason }, 'stopped leading');
    const logError = (error: unknown): void =>
      this.logger.error(describeError(error), 'onStoppedLeading failed');
    try {
      this.steppedDown = Promise.resolve(this.callbacks?.onStoppedLeading()).catch(logError);
    } catch (error) {
      logError(error);
    }
  }

  /** One attempt, abandoned after half the renew deadline (a hung request must not block us). */
  private async tryAcquireOrRenew(outer: AbortSignal): Promise<Attempt> {
    const limit = new AbortController();
    const timer = this.clock.setTimeout(() => limit.abort(), this.renewDeadlineMs / 2);
    const { signal, dispose } = linkSignals(outer, limit.signal);
    try {
      const result = await this.attempt(signal);
      if (limit.signal.aborted && !outer.aborted)
        this.logger.warn(
          { lease: this.leaseName, identity: this.identity },
          'lease request timed out',
        );
      return result;
    } finally {
      this.clock.clearTimeout(timer);
      dispose();
    }
  }

  private async attempt(signal: AbortSignal): Promise<Attempt> {
    try {
      const lease = await abortable(this.store.get(this.namespace, this.name, signal), signal);
      const now = this.clock.now();
      if (lease === undefined) {
        this.written = await abortable(
          this.store.create(
            {
              namespace: this.namespace,
              name: this.name,
              holderIdentity: this.identity,
              leaseDurationSeconds: this.leaseDurationMs / 1000,
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
            signal,
          ),
          signal,
        );
        this.observe(this.identity);
        return 'acquired';
      }
      const holder = lease.holderIdentity ?? '';
      this.observe(holder === '' ? undefined : holder);
      const expiresAt = (lease.renewTime ?? 0) + (lease.leaseDurationSeconds ?? 0) * 1000;
      if (holder !== '' && holder !== this.identity && expiresAt >= now) return 'held-by-other';
      const ours = holder === this.identity;
      this.written = await abortable(
        this.store.update(
          {
            ...lease,
            holderIdentity: this.identity,
            leaseDurationSeconds: this.leaseDurationMs / 1000,
            acquireTime: ours ? (lease.acquireTime ?? now) : now,
            renewTime: now,
            leaseTransitions: (lease.leaseTransitions ?? 0) + (ours ? 0 : 1),
          },
          signal,
        ),
        signal,
      );
      this.observe(this.identity);
      return 'acquired';
    } catch (error) {
      if (signal.aborted) return 'failed';
      // 409: someone else wrote the Lease between our read and our write; they won.
      if (httpStatusOf(error) === 409) return 'held-by-other';
      this.logger.warn(
        { lease: this.leaseName, identity: this.identity, ...describeError(error) },
        'lease request failed',
      );
      return 'failed';
    }
  }

  /** Gives the Lease up (no holder), so that a successor need not wait for it to expire. */
  private async release(): Promise<void> {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const lease =
          attempt === 0 ? this.written : await this.store.get(this.namespace, this.name);
        if (lease?.holderIdentity !== this.identity) return;
        const now = this.clock.now();
        this.written = await this.store.update({
          ...lease,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
        });
        this.observe(undefined);
        return;
      } catch (error) {
        // A renewal that landed after we read the Lease makes our copy stale: read and retry.
        if (httpStatusOf(error) === 409 && attempt === 0) continue;
        this.logger.warn(
          { lease: this.leaseName, identity: this.identity, ...describeError(error) },
          'could not release the lease; it expires on its own',
        );
        return;
      }
    }
  }

  private observe(holder: string | undefined): void {
    if (holder === this.observedHolder) return;
    this.observedHolder = holder;
    try {
      this.callbacks?.onNewLeader?.(holder);
    } catch (error) {
      this.logger.error(describeError(error), 'onNewLeader threw');
    }
  }

  private get leaseName(): string {
    return `${this.namespace}/${this.name}`;
  }
}
