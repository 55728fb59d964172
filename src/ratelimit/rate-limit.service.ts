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

/**
 * Fixed-window limits per caller (a user, or a client address when there is no valid token) and
 * request class, counted in Postgres so every replica enforces the same limit. One upsert per
 * request returns the new count, so parallel requests cannot overtake the limit.
 */
@Injectable()
export class RateLimitService implements OnApplicationShutdown {
  private readonly pruneTimer: NodeJS.Timeout;

  constructor(
    private readonly counters: RateLimitRepository,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    this.pruneTimer = setInterval(() => {
      const before = new Date(Date.now() - 2 * this.config.rateLimitWindowSeconds * 1000);
      this.counters
        .prune(before)
        .catch((error: unknown) => this.logger.warn({ err: error }, 'rate-limit prune failed'));
    }, PRUNE_EVERY_MS);
    this.pruneTimer.unref();
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
    const windowMs = this.config.rateLimitWindowSeconds * 1000;
    const windowStart = new Date(Math.floor(now.getTime() / windowMs) * windowMs);
    const count = await this.counters.increment(
      counterKey(`${requestClass}|${caller}`),
      windowStart,
    );
    return {
      allowed: count <= limit,
      limit,
      remaining: Math.max(0, limit - count),
      resetAt: new Date(windowStart.getTime() + windowMs),
    };
  }

  onApplicationShutdown(): void {
    clearInterval(this.pruneTimer);
  }
}
