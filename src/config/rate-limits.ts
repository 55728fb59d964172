import type { EnvReader } from './reader.js';

/** Requests per window and caller, and how replicas share their counts. */
export function readRateLimits(read: EnvReader) {
  return {
    rateLimitReads: read.integer('KILN_RATE_LIMIT_READS', 600, 0, 1_000_000),
    rateLimitWrites: read.integer('KILN_RATE_LIMIT_WRITES', 60, 0, 1_000_000),
    rateLimitWindowSeconds: read.integer('KILN_RATE_LIMIT_WINDOW_SECONDS', 60, 1, 3600),
    rateLimitFlushMs: read.integer('KILN_RATE_LIMIT_FLUSH_MS', 100, 10, 600_000),
    rateLimitMaxKeys: read.integer('KILN_RATE_LIMIT_MAX_KEYS', 50_000, 1, 10_000_000),
  };
}
