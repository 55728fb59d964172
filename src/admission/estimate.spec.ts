import { estimateStartMs } from './estimate.js';

describe(estimateStartMs.name, () => {
  const now = 1_000_000;
  const minute = 60_000;

  it('says nothing without a finished run to learn from, or when the limit holds every build', () => {
    expect(
      estimateStartMs({
        nowMs: now,
        capacity: 2,
        runningMs: [0],
        medianRunMs: undefined,
        ahead: 0,
      }),
    ).toBeUndefined();
    expect(
      estimateStartMs({ nowMs: now, capacity: 0, runningMs: [], medianRunMs: minute, ahead: 0 }),
    ).toBeUndefined();
  });

  it('first in line starts when the running build closest to its end is expected to end', () => {
    expect(
      estimateStartMs({
        nowMs: now,
        capacity: 2,
        runningMs: [4 * minute, 1 * minute],
        medianRunMs: 5 * minute,
        ahead: 0,
      }),
    ).toBe(now + minute);
  });

  it('builds ahead take the slots as they free, each for a median run', () => {
    const input = {
      nowMs: now,
      capacity: 2,
      runningMs: [4 * minute, 1 * minute],
      medianRunMs: 5 * minute,
    };
    // Slots free at +1 and +4 min; the third build in line gets the first slot again at +6.
    expect(estimateStartMs({ ...input, ahead: 1 })).toBe(now + 4 * minute);
    expect(estimateStartMs({ ...input, ahead: 2 })).toBe(now + 6 * minute);
    expect(estimateStartMs({ ...input, ahead: 3 })).toBe(now + 9 * minute);
  });

  it('a build that ran past the median is taken to end now, a slot no build holds is free now', () => {
    expect(
      estimateStartMs({
        nowMs: now,
        capacity: 3,
        runningMs: [9 * minute],
        medianRunMs: minute,
        ahead: 1,
      }),
    ).toBe(now);
  });
});
