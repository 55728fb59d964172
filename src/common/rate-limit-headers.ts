import type { Response } from 'express';
import type { RateLimitInfo } from './errors.js';

/**
 * The spec's rate-limit headers (docs/api.md). X-RateLimit-Reset is the Unix time, in whole
 * seconds, at which the window resets: the spec has the client wait until that time. A refused
 * request also gets Retry-After in seconds.
 */
export function setRateLimitHeaders(
  response: Response,
  info: RateLimitInfo,
  refused: boolean,
  now: Date = new Date(),
): void {
  const resetSeconds = Math.ceil(info.resetAt.getTime() / 1000);
  response.setHeader('X-RateLimit-Limit', String(info.limit));
  response.setHeader('X-RateLimit-Remaining', String(Math.max(0, info.remaining)));
  response.setHeader('X-RateLimit-Reset', String(resetSeconds));
  if (refused) response.setHeader('Retry-After', String(retryAfterSeconds(info, now)));
}

/** Whole seconds until the window resets, at least 1: the Retry-After of a refusal. */
export function retryAfterSeconds(info: RateLimitInfo, now: Date = new Date()): number {
  return Math.max(1, Math.ceil((info.resetAt.getTime() - now.getTime()) / 1000));
}
