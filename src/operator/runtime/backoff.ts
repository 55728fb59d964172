/** `base · 2^(attempt−1)`, at most `cap` (attempt counts from 1). */
export function exponentialDelay(attempt: number, baseMs: number, capMs: number): number {
  const exponent = Math.min(Math.max(attempt, 1) - 1, 52);
  return Math.min(capMs, baseMs * 2 ** exponent);
}

/**
 * The exponential delay with "equal jitter": half of it fixed, half random. Retries of many
 * clients spread out, and the delay never exceeds the cap, so at the cap the rate of attempts
 * stays at most one per `cap / 2`.
 */
export function jitteredDelay(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number,
): number {
  const ceiling = exponentialDelay(attempt, baseMs, capMs);
  return ceiling / 2 + (random() * ceiling) / 2;
}
