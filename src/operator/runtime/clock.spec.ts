import { FakeClock } from './clock.js';

describe(FakeClock.name, () => {
  it('runs due timers in order of due time, then of creation, and leaves later ones pending', async () => {
    const clock = new FakeClock();
    const ran: string[] = [];
    clock.setTimeout(() => ran.push('b@20'), 20);
    clock.setTimeout(() => ran.push('a@10'), 10);
    clock.setTimeout(() => ran.push('c@20'), 20);
    clock.setTimeout(() => ran.push('d@31'), 31);

    await clock.advance(30);

    expect(ran).toEqual(['a@10', 'b@20', 'c@20']);
    expect(clock.pendingTimers).toBe(1);
  });

  it('lets awaiting code run between timers, so a loop of sleeps advances step by step', async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const seen: number[] = [];
    const loop = (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(100);
        await Promise.resolve();
        seen.push(clock.now() - start);
      }
    })();

    await clock.advance(1000);
    await loop;

    expect(seen).toEqual([100, 200, 300]);
    expect(clock.now() - start).toBe(1000);
  });

  it('ends a sleep early when its signal aborts, and cancels its timer', async () => {
    const clock = new FakeClock();
    const abort = new AbortController();
    let woke = false;
    const sleeping = clock.sleep(60_000, abort.signal).then(() => (woke = true));

    abort.abort();
    await sleeping;

    expect(woke).toBe(true);
    expect(clock.pendingTimers).toBe(0);
  });
});
