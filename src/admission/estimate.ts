/**
 * When a waiting build may start, from how long the builds it waits behind have run and how long
 * builds run (docs/adr/0042-admission-in-postgres.md). A guess, and said to be one: each running
 * build is taken to end after the median run (one past it ends at once), each slot that frees is
 * taken by the next waiting build in line, which then runs a median run too.
 *
 * `capacity`: the slots the build waits for (the limit); `runningMs`: how long the builds in them
 * have run; `ahead`: the waiting builds that take a slot before it. Undefined when nothing can be
 * said: no build ran to its end yet, or the limit is 0 (nothing runs until it is raised).
 */
export function estimateStartMs(input: {
  readonly nowMs: number;
  readonly capacity: number;
  readonly runningMs: readonly number[];
  readonly medianRunMs: number | undefined;
  readonly ahead: number;
}): number | undefined {
  const { nowMs, capacity, runningMs, medianRunMs, ahead } = input;
  if (medianRunMs === undefined || capacity <= 0) return undefined;
  // When each slot frees: a running build's remaining median, a slot no build holds now.
  const frees = runningMs.slice(0, capacity).map((ran) => Math.max(0, medianRunMs - ran));
  while (frees.length < capacity) frees.push(0);
  frees.sort((a, b) => a - b);
  // The builds ahead take the slots as they free, each for a median run. Every slot frees within
  // a median run, so the slots free again in the same order, round after round: the build after
  // `ahead` others gets slot `ahead % capacity` in round `ahead / capacity`.
  const rounds = Math.floor(ahead / capacity);
  const rest = ahead % capacity;
  const at = frees[rest]! + rounds * medianRunMs;
  return nowMs + at;
}
