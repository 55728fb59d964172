/**
 * Waits for the next fixed rate-limit window when the current one (of `windowSeconds`, aligned
 * to the epoch as RateLimitService aligns them) ends within `marginMs`: counts a test makes on
 * both sides of a window's end are kept apart, and its expectations assume one window.
 */
export async function awayFromWindowEnd(windowSeconds: number, marginMs: number): Promise<void> {
  const windowMs = windowSeconds * 1000;
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await new Promise((done) => setTimeout(done, left + 100));
}
