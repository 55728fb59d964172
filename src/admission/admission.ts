import { Inject, Injectable, type OnApplicationShutdown, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { ConflictError, RateLimitedError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { LogSink } from '../logs/log-sink.js';
import { Metrics } from '../metrics/metrics.js';
import { type AdmissionState, AdmissionStore, type QueuePlaceRow } from './admission.repository.js';
import { estimateStartMs } from './estimate.js';
import type { AdmissionLimits, WaitReason } from './fair-share.js';
import { type OrderEntry, type Outlook, QueueOrders } from './queue-orders.js';

/** What a build waits for, as GET /builds/{id} and /status show it (`queue`). */
export interface QueueView {
  /** 1-based, in the order admission takes the waiting builds; null once admitted. */
  readonly position: number | null;
  /** A WaitReason, or what the cluster says once admitted (ClusterQuota, Unschedulable, …). */
  readonly reason: string;
  readonly message: string;
  /** A guess from recent runs; null when there is nothing to guess from. */
  readonly estimatedStart: Date | null;
}

/** A build as admission reads it. */
export interface AdmittableBuild {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
}

/** What became of a build's wait: admitted (run it), ended without a run, or still waiting. */
export type WaitOutcome = 'admitted' | 'ended' | 'waiting';

/** Why a build waits in the cluster once admitted: told by the operator, from Events and pods. */
export interface ClusterWait {
  readonly reason: string;
  readonly message: string;
}

/**
 * Admission (docs/adr/0042-admission-in-postgres.md): which started builds run, for every runner
 * and the operator. Runners enqueue a started build, wait until `outcome` says it is admitted,
 * and release it when it ends; they never count slots. A pass admits what the limits allow by
 * fair share (AdmissionStore, in one transaction under one lock across every kiln process),
 * writes a `[kiln]` line to the log of each build whose wait begins, changes reason or ends, and
 * fails the builds that waited past KILN_QUEUE_TTL_SECONDS (QueueTimeout). Each process that runs
 * builds also looks at the queue every KILN_ADMISSION_POLL_MS: a slot another process freed.
 */
@Injectable()
export class Admission implements OnApplicationShutdown {
  readonly limits: AdmissionLimits;
  private readonly watchers = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private passAgain = false;
  private stopped = false;
  /** The queue's order, read at most once per generation for the places this process answers. */
  private readonly orders: QueueOrders;
  /** The generation the reasons were last written at, and when (ms). */
  private reasonsAt: { generation: string; atMs: number } | undefined;

  constructor(
    private readonly store: AdmissionStore,
    private readonly config: KilnConfig,
    private readonly lifecycle: BuildLifecycle,
    @Inject(LogSink) private readonly sink: Pick<LogSink, 'append'>,
    @Inject(LOGGER) private readonly logger: Logger,
    /** Without Metrics (medium tests build admission by hand) no wait is observed. */
    @Optional() private readonly metrics?: Metrics,
  ) {
    const { maxRunning, tenantMaxRunning, projectMaxRunning } = config.admission;
    this.limits = { maxRunning, tenantMaxRunning, projectMaxRunning };
    this.orders = new QueueOrders(
      () => this.store.order(this.limits),
      { trustMs: this.trustMs(), staleMs: Math.min(config.admission.pollMs, 1000) },
      (error) => this.logger.warn({ err: error }, 'admission could not order the queue'),
    );
  }

  /**
   * Refuses a start that would put the tenant past KILN_TENANT_MAX_QUEUED waiting builds (429,
   * with Retry-After). Counted before the start; two starts at once may both pass the last place.
   */
  async checkRoom(tenantId: string): Promise<void> {
    const max = this.config.admission.tenantMaxQueued;
    if (max === undefined) return;
    const waiting = await this.store.waitingOfTenant(tenantId);
    if (waiting < max) return;
    const { medianRunMs } = await this.store.outlook({ tenantId });
    const retryMs = Math.min(Math.max(medianRunMs ?? 60_000, 1_000), 3_600_000);
    throw new RateLimitedError(
      `This tenant has ${waiting} builds waiting to run, its limit (KILN_TENANT_MAX_QUEUED is ${max}); start this one once some have run`,
      { limit: max, remaining: 0, resetAt: new Date(Date.now() + retryMs) },
    );
  }

  /**
   * A started build waits to be admitted (again after a taken-back start); a pass follows. Where
   * nothing is limited (no installation, tenant or project limit, no tenant with its own) it is
   * admitted at once, without a pass. Answers what it recorded ('waiting' even if the pass that
   * followed admitted it), or undefined when admission knew the build already (or it is not
   * in_progress): then nothing changed and no pass ran.
   */
  async enqueue(buildId: string): Promise<'waiting' | 'admitted' | undefined> {
    const { maxRunning, tenantMaxRunning, projectMaxRunning } = this.limits;
    const unlimited =
      maxRunning === undefined && tenantMaxRunning === undefined && projectMaxRunning === undefined;
    const recorded = await this.store.enqueue(buildId, unlimited);
    if (recorded?.kind === 'admitted') {
      this.observeWait(recorded);
      for (const watcher of this.watchers) watcher();
    } else if (recorded?.kind === 'waiting') {
      await this.pass();
    }
    return recorded?.kind;
  }

  /**
   * Counts a build that runs already (its Job made before admission existed, or by hand) as
   * admitted, whatever the limits say: it holds a slot until it ends.
   */
  async adopt(buildId: string): Promise<void> {
    await this.store.adopt(buildId);
  }

  /** Where each build stands: admitted, ended without a run, or waiting; absent: never enqueued. */
  async outcomes(buildIds: readonly string[]): Promise<Map<string, WaitOutcome>> {
    const { states } = await this.store.states(buildIds);
    return new Map([...states].map(([id, state]) => [id, outcomeOf(state)]));
  }

  /** The build's run (or wait) is over: its slot goes to the next build at once. */
  async release(buildId: string): Promise<void> {
    const ended = await this.store.release(buildId);
    if (ended !== 'nothing') await this.pass();
  }

  /**
   * Calls `watcher` after every pass of this process, the polling ones included, until the
   * returned function is called. While any watcher is registered, this process polls.
   */
  watch(watcher: () => void): () => void {
    this.watchers.add(watcher);
    this.schedule();
    return () => {
      this.watchers.delete(watcher);
    };
  }

  /**
   * One admission pass: admits what the limits allow and tells the watchers (the reasons of the
   * builds still waiting are written at the next poll). Passes of this process run one at a
   * time; one asked for during a pass runs after it.
   */
  pass(): Promise<void> {
    if (this.passing !== undefined) {
      this.passAgain = true;
      return this.passing;
    }
    this.passing = (async () => {
      try {
        do {
          this.passAgain = false;
          await this.passOnce();
        } while (this.passAgain);
      } finally {
        this.passing = undefined;
      }
    })();
    return this.passing;
  }

  /**
   * The `queue` of each waiting build of `builds`: its place and reason while it waits to be
   * admitted, or what the cluster says once admitted and its pod does not run yet.
   */
  async queueOf(builds: readonly AdmittableBuild[]): Promise<Map<string, QueueView>> {
    const views = new Map<string, QueueView>();
    if (builds.length === 0) return views;
    const ids = builds.map((build) => build.id);
    const { generation, states } = await this.store.states(ids);
    const waiting = ids.filter((id) => {
      const state = states.get(id);
      return state !== undefined && state.admittedAt === null && state.releasedAt === null;
    });
    // Only a build that waits to be admitted needs its place, which orders the whole queue.
    const placed = waiting.length === 0 ? undefined : await this.placesOf(waiting, generation);
    for (const build of builds) {
      const place = placed?.places.get(build.id);
      if (placed !== undefined && place !== undefined) {
        views.set(build.id, await this.viewOf(build, place, placed.entry));
        continue;
      }
      const state = states.get(build.id);
      if (
        state !== undefined &&
        state.admittedAt !== null &&
        state.releasedAt === null &&
        state.reason !== null
      ) {
        views.set(build.id, {
          position: null,
          reason: state.reason,
          message: state.message ?? state.reason,
          estimatedStart: null,
        });
      }
    }
    return views;
  }

  /**
   * The places of waiting builds, from the order of the queue this process read once per
   * generation and shares with every request (QueueOrders).
   */
  private async placesOf(
    waiting: readonly string[],
    generation: string,
  ): Promise<{ entry: OrderEntry; places: Map<string, QueuePlaceRow> }> {
    let entry = await this.orders.at(generation);
    const absent = () => waiting.filter((id) => !entry.order.places.has(id));
    // A build the order does not have began to wait after it was read: a newer order has it.
    if (absent().length > 0) entry = await this.orders.fresh(generation);
    const places = new Map<string, QueuePlaceRow>();
    for (const id of waiting) {
      const place = entry.order.places.get(id);
      if (place !== undefined) places.set(id, place);
    }
    // Still absent: it began to wait as that order was read; its place alone.
    const missing = absent();
    if (missing.length > 0) {
      for (const [id, place] of await this.store.places(missing, this.limits))
        places.set(id, place);
    }
    return { entry, places };
  }

  /**
   * What an admitted build waits for in the cluster, or nothing (undefined): its pod runs. A
   * change of reason is one `[kiln]` line in the build's log, never one per Event (a refusal
   * that names each new pod it refused updates the message silently).
   */
  async clusterWait(buildId: string, wait: ClusterWait | undefined): Promise<void> {
    if (!(await this.store.setClusterReason(buildId, wait))) return;
    const line =
      wait === undefined
        ? 'no longer waiting for the cluster'
        : `waiting for the cluster (${wait.reason}): ${wait.message}`;
    await this.say(buildId, line);
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped || this.timer !== undefined || this.watchers.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.poll().finally(() => this.schedule());
    }, this.config.admission.pollMs);
    this.timer.unref();
  }

  /** What no write in this process announces: slots freed elsewhere, ended builds, expired waits. */
  private async poll(): Promise<void> {
    try {
      await this.store.sweep();
      await this.expire();
      await this.pass();
      await this.refreshReasons();
    } catch (error) {
      this.logger.warn({ err: error }, 'admission could not look at the queue; it tries again');
    }
  }

  private async passOnce(): Promise<void> {
    const admitted = await this.store.admit(this.limits);
    // Committed: each build is admitted by one pass only (the statement admits only waiting rows).
    for (const build of admitted) this.observeWait(build);
    for (const build of admitted) {
      if (build.waitedFor === null) continue;
      const waited = build.admittedAt.getTime() - build.queuedAt.getTime();
      await this.say(build.buildId, `admitted to run after waiting ${duration(waited)}`);
    }
    for (const watcher of this.watchers) watcher();
  }

  /**
   * Writes what every waiting build waits for now, and a `[kiln]` line to each whose wait began or
   * whose reason changed. It orders the whole queue, so only when the queue's generation moved
   * since it last did (or that was long ago: see QueueOrders): nothing else changes a reason.
   */
  private async refreshReasons(): Promise<void> {
    const generation = await this.store.generation();
    const last = this.reasonsAt;
    if (last?.generation === generation && Date.now() - last.atMs <= this.trustMs()) return;
    const changes = await this.store.refreshReasons(this.limits);
    this.reasonsAt = { generation, atMs: Date.now() };
    for (const { buildId, before, place } of changes) {
      const text = `${reasonMessage(place.reason, place, this.limits)} (${ordinal(place.position)} in line)`;
      await this.say(
        buildId,
        before === null ? `waiting to run: ${text}` : `still waiting, now because ${text}`,
      );
    }
  }

  /**
   * How long an order of the queue (or the reasons written from one) is believed while the
   * generation stays the same: ten polls.
   */
  private trustMs(): number {
    return 10 * this.config.admission.pollMs;
  }

  /** Fails the builds that waited past KILN_QUEUE_TTL_SECONDS, saying how long and behind what. */
  private async expire(): Promise<void> {
    const ttlMs = this.config.admission.queueTtlMs;
    const expired = await this.store.waitingSince(new Date(Date.now() - ttlMs));
    for (const build of expired) {
      const behind =
        build.reason === null ? '' : ` (it waited for: ${reasonWords(build.reason as WaitReason)})`;
      const message = `The build waited ${duration(Date.now() - build.queuedAt.getTime())} to be admitted, longer than the queue's time to live (KILN_QUEUE_TTL_SECONDS: ${duration(ttlMs)})${behind}`;
      try {
        await this.lifecycle.fail(build.buildId, 'QueueTimeout', message);
        await this.say(build.buildId, message, 'ERROR');
      } catch (error) {
        // Ended meanwhile (cancelled, admitted and run): nothing to expire. Anything else is
        // tried again at the next look; the other builds go on.
        if (!(error instanceof ConflictError)) {
          this.logger.warn({ err: error, build_id: build.buildId }, 'could not expire a wait');
          continue;
        }
      }
      await this.store.release(build.buildId);
    }
  }

  /** kiln_build_wait_seconds: from the start to the admission, by the database's clock. */
  private observeWait(build: {
    tenantId: string;
    method: string;
    queuedAt: Date;
    admittedAt: Date;
  }): void {
    const seconds = (build.admittedAt.getTime() - build.queuedAt.getTime()) / 1000;
    this.metrics?.observe(
      'kiln_build_wait_seconds',
      { method: build.method, tenant: build.tenantId },
      Math.max(0, seconds),
    );
  }

  private async viewOf(
    build: AdmittableBuild,
    place: QueuePlaceRow,
    entry: OrderEntry,
  ): Promise<QueueView> {
    const { limits } = this;
    const scope =
      place.reason === 'TenantLimit'
        ? { capacity: place.tenantMax ?? 0, ahead: place.tenantRank - 1, tenantId: build.tenantId }
        : place.reason === 'ProjectLimit'
          ? {
              capacity: limits.projectMaxRunning ?? 0,
              ahead: place.projectRank - 1,
              projectId: build.projectId,
            }
          : {
              capacity: limits.maxRunning ?? place.runningTotal + place.position,
              ahead: place.position - 1,
            };
    const outlook = await this.outlookOf(scope, entry);
    // How long each running build has run now, from when the outlook was read.
    const sinceMs = Date.now() - outlook.atMs;
    const at = estimateStartMs({
      nowMs: Date.now(),
      runningMs: outlook.runningMs.map((ms) => ms + sinceMs),
      medianRunMs: outlook.medianRunMs,
      ...scope,
    });
    return {
      position: place.position,
      reason: place.reason,
      message: reasonMessage(place.reason, place, limits),
      estimatedStart: at === undefined ? null : new Date(at),
    };
  }

  /**
   * The running builds and latest runs of a scope, read once per order of the queue: the same
   * generation, the same builds running and the same runs ended.
   */
  private outlookOf(
    scope: { tenantId?: string; projectId?: string },
    entry: OrderEntry,
  ): Promise<Outlook> {
    const key = `${scope.tenantId ?? ''}/${scope.projectId ?? ''}`;
    let outlook = entry.outlooks.get(key);
    if (outlook === undefined) {
      outlook = (async () => ({ ...(await this.store.outlook(scope)), atMs: Date.now() }))();
      entry.outlooks.set(key, outlook);
      // A read that failed is not kept: the next request reads again.
      outlook.catch(() => entry.outlooks.delete(key));
    }
    return outlook;
  }

  private async say(
    buildId: string,
    text: string,
    level: 'INFO' | 'ERROR' = 'INFO',
  ): Promise<void> {
    try {
      await this.sink.append(buildId, [
        { text: `${level === 'INFO' ? '' : `${level}: `}[kiln] ${text}`, container: 'kiln' },
      ]);
    } catch (error) {
      // The reason is in the build's status either way; the line is the courtesy.
      this.logger.warn({ err: error, build_id: buildId }, 'could not log a change of admission');
    }
  }
}

function outcomeOf(state: AdmissionState): WaitOutcome {
  if (state.admittedAt !== null) return 'admitted';
  return state.releasedAt === null ? 'waiting' : 'ended';
}

/** What holds a waiting build back, in words, with the counts that hold it. */
export function reasonMessage(
  reason: WaitReason,
  place: Pick<QueuePlaceRow, 'runningTotal' | 'tenantRunning' | 'tenantMax' | 'projectRunning'>,
  limits: AdmissionLimits,
): string {
  switch (reason) {
    case 'Admissible':
      return 'a build slot is free; it starts within moments';
    case 'InstallationLimit':
      return limits.maxRunning === 0
        ? 'this installation runs no builds now: its limit on running builds (KILN_MAX_RUNNING) is 0'
        : `all ${limits.maxRunning ?? place.runningTotal} build slots of this installation are in use`;
    case 'TenantLimit':
      return place.tenantMax === 0
        ? "this tenant's limit on running builds is 0: none runs until an administrator raises it"
        : `this tenant runs ${place.tenantRunning} builds, its limit (${place.tenantMax})`;
    case 'ProjectLimit':
      return `this project runs ${place.projectRunning} builds, its limit (${limits.projectMaxRunning})`;
  }
}

/** The reason of a wait in a few words, for a message that outlives the counts. */
function reasonWords(reason: WaitReason): string {
  switch (reason) {
    case 'Admissible':
      return 'a free slot';
    case 'InstallationLimit':
      return "the installation's limit on running builds";
    case 'TenantLimit':
      return "the tenant's limit on running builds";
    case 'ProjectLimit':
      return "the project's limit on running builds";
    default:
      return reason;
  }
}

/** 1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, 21st. */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/** 45 s, 3 min 5 s, 2 h 10 min. */
export function duration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60)
    return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}
