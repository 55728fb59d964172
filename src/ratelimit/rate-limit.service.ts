import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { RateLimitInfo } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { RateLimitRepository } from './rate-limit.repository.js';

export type RequestClass = 'read' | 'write';

export interface RateLimitDecision extends RateLimitInfo {
  readonly allowed: boolean;
}

const PRUNE_EVERY_MS = 60_000;
/** Longer keys are stored as their digest: a btree entry holds at most ~2.7 KB. */
const MAX_PLAIN_KEY_CHARS = 256;

/**
 * A counter key as stored: the key itself, or a digest when it is long. Client-chosen parts (the
 * client address a proxy passes in X-Forwarded-For, an e-mail) must not be able to make a key
 * too large for its index.
 */
export function counterKey(key: string): string {
  return key.length <= MAX_PLAIN_KEY_CHARS
    ? key
    : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/** One caller's requests in the current window, as this replica knows them. */
interface Counter {
  readonly key: string;
  /** Every replica's total when this replica last wrote the key (0 before it has). */
  total: number;
  /** Counted here, in the write under way. */
  sending: number;
  /** Counted here since. */
  pending: number;
}

/**
 * Fixed-window limits per caller (a user, or a client address when there is no valid token) and
 * request class, shared by every replica through Postgres without a round trip per request
 * (docs/adr/0025-hot-path-round-trips.md). A replica counts in memory and decides on the last
 * total it read plus what it counted since, so one replica is exact, and parallel requests cannot
 * overtake the limit. Every KILN_RATE_LIMIT_FLUSH_MS it adds its counts to Postgres in one
 * statement and reads back the totals: replicas together admit at most what the others receive
 * in about one flush interval more than the limit. Counts that cannot be written (the database
 * is down) are kept and written later. Only the current window is held, for at most
 * KILN_RATE_LIMIT_MAX_KEYS callers; callers past that are counted in Postgres, one upsert each.
 */
@Injectable()
export class RateLimitService implements OnApplicationShutdown {
  private readonly pruneTimer: NodeJS.Timeout;
  private readonly flushTimer: NodeJS.Timeout;
  /** Start (epoch ms) of the window `counters` hold. */
  private windowStart = 0;
  private counters = new Map<string, Counter>();
  /** Counters with requests not yet written. */
  private unwritten = new Set<Counter>();
  private writing: Promise<void> | undefined;
  private writesFailing = false;

  constructor(
    private readonly repository: RateLimitRepository,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.pruneTimer = setInterval(() => {
      const before = new Date(Date.now() - 2 * this.config.rateLimitWindowSeconds * 1000);
      this.repository
        .prune(before)
        .catch((error: unknown) => this.logger.warn({ err: error }, 'rate-limit prune failed'));
    }, PRUNE_EVERY_MS);
    this.pruneTimer.unref();
    // A write still under way (a slow or unreachable database) is not queued behind: the next
    // tick after it carries everything counted meanwhile.
    this.flushTimer = setInterval(() => {
      if (this.writing === undefined) void this.flush();
    }, config.rateLimitFlushMs);
    this.flushTimer.unref();
  }

  static classOf(method: string): RequestClass {
    return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 'read' : 'write';
  }

  /** Counts the request; undefined when the class is not limited. */
  async consume(
    caller: string,
    requestClass: RequestClass,
    now = new Date(),
  ): Promise<RateLimitDecision | undefined> {
    const limit =
      requestClass === 'read' ? this.config.rateLimitReads : this.config.rateLimitWrites;
    if (limit === 0) return undefined;
    return this.count(`${requestClass}|${caller}`, limit, now);
  }

  /**
   * Counts one event of a key with a limit of its own (a trigger's deliveries), in the same
   * windows and the same shared counters as the API's requests.
   */
  consumeUpTo(key: string, limit: number, now = new Date()): Promise<RateLimitDecision> {
    return this.count(`limit|${key}`, limit, now);
  }

  private async count(caller: string, limit: number, now: Date): Promise<RateLimitDecision> {
    const windowMs = this.config.rateLimitWindowSeconds * 1000;
    const windowStart = Math.floor(now.getTime() / windowMs) * windowMs;
    const key = counterKey(caller);
    const count =
      this.countInMemory(key, windowStart) ??
      (await this.repository.increment(key, new Date(windowStart)));
    return {
      allowed: count <= limit,
      limit,
      remaining: Math.max(0, limit - count),
      resetAt: new Date(windowStart + windowMs),
    };
  }

  /**
   * Writes what this replica counted since its last write, in one statement, and reads back every
   * replica's totals. One write at a time: a call during a write waits for it, then writes.
   */
  async flush(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
    this.writing = this.write().finally(() => {
      this.writing = undefined;
    });
    await this.writing;
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.pruneTimer);
    clearInterval(this.flushTimer);
    await this.flush(); // the last counts, for the replicas that stay
  }

  /**
   * Counts the request in memory and answers the window's count as this replica knows it, or
   * undefined when the request must be counted in Postgres: a caller past
   * KILN_RATE_LIMIT_MAX_KEYS, or a request dated before the window held (the clock went back).
   */
  private countInMemory(key: string, windowStart: number): number | undefined {
    if (windowStart > this.windowStart) {
      // What the last window counted no longer decides anything: it is dropped, even unwritten.
      this.windowStart = windowStart;
      this.counters = new Map();
      this.unwritten = new Set();
    }
    if (windowStart < this.windowStart) return undefined;
    let counter = this.counters.get(key);
    if (counter === undefined) {
      if (this.counters.size >= this.config.rateLimitMaxKeys) return undefined;
      counter = { key, total: 0, sending: 0, pending: 0 };
      this.counters.set(key, counter);
    }
    counter.pending += 1;
    this.unwritten.add(counter);
    return counter.total + counter.sending + counter.pending;
  }

  private async write(): Promise<void> {
    if (this.unwritten.size === 0) return;
    const batch = [...this.unwritten];
    const windowStart = new Date(this.windowStart);
    this.unwritten.clear();
    for (const counter of batch) {
      counter.sending = counter.pending;
      counter.pending = 0;
    }
    try {
      const totals = await this.repository.add(
        windowStart,
        new Map(batch.map((counter) => [counter.key, counter.sending])),
      );
      for (const counter of batch) {
        counter.total = totals.get(counter.key) ?? counter.total + counter.sending;
        counter.sending = 0;
      }
      if (this.writesFailing) this.logger.info('rate-limit counts are written again');
      this.writesFailing = false;
    } catch (error) {
      for (const counter of batch) {
        counter.pending += counter.sending;
        counter.sending = 0;
        // Unless its window ended meanwhile, the counter goes out with the next write.
        if (this.counters.get(counter.key) === counter) this.unwritten.add(counter);
      }
      if (!this.writesFailing) {
        this.logger.warn(
          { err: error },
          'rate-limit counts cannot be written; each replica limits on its own counts meanwhile',
        );
      }
      this.writesFailing = true;
    }
  }
}
