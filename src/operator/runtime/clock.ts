declare const timerBrand: unique symbol;
/** An opaque timer, from `Clock.setTimeout`. */
export type TimerHandle = { readonly [timerBrand]: true };

/** Time, behind a port: the runtime never calls Date.now() or setTimeout() itself. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
  /** Resolves after `ms`, or early once `signal` aborts (it never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      resolve();
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The real clock. */
export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    return setTimeout(callback, Math.max(0, ms)) as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) clearTimeout(handle as unknown as NodeJS.Timeout);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }
}

export const systemClock: Clock = new SystemClock();

interface FakeTimer {
  due: number;
  seq: number;
  callback: () => void;
}

/**
 * A clock for tests: time stands still until `advance(ms)`, which runs the timers that fall due,
 * in order of due time (then of creation), and lets promises settle after each one, so code that
 * awaits between timers (sleep, then an in-memory request, then sleep again) runs as it would.
 */
export class FakeClock implements Clock {
  private current: number;
  private seq = 0;
  private readonly timers = new Map<number, FakeTimer>();

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const seq = ++this.seq;
    this.timers.set(seq, { due: this.current + Math.max(0, ms), seq, callback });
    return seq as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle !== undefined) this.timers.delete(handle as unknown as number);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Timers not yet run. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Moves time on by `ms`, running every timer that falls due (also ones set meanwhile). */
  async advance(ms: number): Promise<void> {
    const target = this.current + Math.max(0, ms);
    await this.flush();
    for (;;) {
      let next: FakeTimer | undefined;
      for (const timer of this.timers.values())
        if (
          timer.due <= target &&
          (next === undefined ||
            timer.due < next.due ||
            (timer.due === next.due && timer.seq < next.seq))
        )
          next = timer;
      if (next === undefined) break;
      this.timers.delete(next.seq);
      this.current = Math.max(this.current, next.due);
      next.callback();
      await this.flush();
    }
    this.current = target;
    await this.flush();
  }

  /**
   * Advances in steps of `stepMs` until `check()` holds; throws after `limitMs` of fake time.
   * Returns the fake time that passed.
   */
  async advanceUntil(check: () => boolean, stepMs: number, limitMs: number): Promise<number> {
    const start = this.current;
    while (!check()) {
      if (this.current - start >= limitMs)
        throw new Error(`condition not met within ${limitMs} ms of fake time`);
      await this.advance(stepMs);
    }
    return this.current - start;
  }

  /** Lets pending promise chains settle (microtasks, then a few macrotask turns). */
  async flush(): Promise<void> {
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
