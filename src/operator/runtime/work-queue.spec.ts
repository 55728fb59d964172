import { FakeClock } from './clock.js';
import { silentLogger } from '../../cluster/ports.js';
import { Controller, type Reconcile, TerminalError } from './controller.js';
import { WorkQueue } from './work-queue.js';

/** A promise with its resolve, to hold a reconcile open until the test lets it go. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe(WorkQueue.name, () => {
  it('queues a key added several times while it waits only once', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    queue.add('ns/a');
    queue.add('ns/b');
    queue.add('ns/a');
    queue.add('ns/a');

    expect(queue.length).toBe(2);
    expect(await queue.get()).toBe('ns/a');
    expect(await queue.get()).toBe('ns/b');
    expect(queue.length).toBe(0);
  });

  it('does not hand out a key being processed; one added meanwhile is queued again when it is done', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    queue.add('ns/a');
    const key = await queue.get();
    queue.add('ns/a');
    queue.add('ns/a');

    expect(queue.length).toBe(0);
    queue.done(key ?? '');
    expect(queue.length).toBe(1);
    expect(await queue.get()).toBe('ns/a');
  });

  it('keeps the earliest deadline when a key is added after different delays', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    queue.addAfter('ns/a', 1000);
    queue.addAfter('ns/a', 300);
    queue.addAfter('ns/a', 5000);

    await clock.advance(299);
    expect(queue.length).toBe(0);
    await clock.advance(1);
    expect(queue.length).toBe(1);
    await clock.advance(10_000);
    expect(queue.length).toBe(1);
  });

  it('grows a key’s backoff exponentially up to the cap, and forget resets it', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock, backoffBaseMs: 5, backoffCapMs: 60 });
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      const before = clock.now();
      queue.addRateLimited('ns/a');
      await clock.advanceUntil(() => queue.length === 1, 1, 1000);
      delays.push(clock.now() - before);
      queue.done((await queue.get()) ?? '');
    }
    expect(delays).toEqual([5, 10, 20, 40, 60, 60]);
    expect(queue.numRequeues('ns/a')).toBe(6);

    queue.forget('ns/a');
    const before = clock.now();
    queue.addRateLimited('ns/a');
    await clock.advanceUntil(() => queue.length === 1, 1, 1000);
    expect(clock.now() - before).toBe(5);
  });

  it('on shutdown drops waiting work, ignores new adds, wakes idle getters, and waits for keys in flight', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    queue.add('ns/busy');
    const busy = await queue.get();
    queue.add('ns/waiting');
    queue.addAfter('ns/later', 100);

    let drained = false;
    const shutdown = queue.shutdown().then(() => (drained = true));
    queue.add('ns/new');
    await clock.flush();

    expect(await queue.get()).toBeUndefined();
    expect(queue.length).toBe(0);
    expect(queue.delayedCount).toBe(0);
    expect(drained).toBe(false);
    queue.done(busy ?? '');
    await shutdown;
    expect(drained).toBe(true);
  });
});

describe(Controller.name, () => {
  it('never runs two reconciles of one key at once, and reconciles a key changed during its reconcile again', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const controller = new Controller(queue, { workers: 4 });
    let running = 0;
    let most = 0;
    const first = gate();
    let calls = 0;
    const reconcile: Reconcile = async () => {
      calls++;
      running++;
      most = Math.max(most, running);
      if (calls === 1) await first.promise;
      running--;
    };
    const done = controller.run(reconcile);
    queue.add('ns/a');
    await clock.flush();
    queue.add('ns/a');
    queue.add('ns/a');
    await clock.flush();
    expect(calls).toBe(1);

    first.open();
    await clock.flush();

    expect(calls).toBe(2);
    expect(most).toBe(1);
    expect(controller.reconcileCount('ns/a')).toBe(2);
    await controller.stop();
    await done;
  });

  it('runs at most as many reconciles at once as it has workers', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const controller = new Controller(queue, { workers: 3 });
    const hold = gate();
    let running = 0;
    let most = 0;
    void controller.run(async () => {
      running++;
      most = Math.max(most, running);
      await hold.promise;
      running--;
    });
    for (let i = 0; i < 10; i++) queue.add(`ns/k${i}`);
    await clock.flush();

    expect(running).toBe(3);
    hold.open();
    await clock.flush();
    expect(most).toBe(3);
    expect([...controller.reconcileCounts.keys()]).toHaveLength(10);
    await controller.stop();
  });

  it('requeues a failing key with growing delays and resets the backoff after a success', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock, backoffBaseMs: 5 });
    const controller = new Controller(queue, { workers: 1 });
    const attempts: number[] = [];
    const start = clock.now();
    let failuresLeft = 4;
    void controller.run(() => {
      attempts.push(clock.now() - start);
      if (failuresLeft-- > 0) return Promise.reject(new Error('transient'));
      return Promise.resolve();
    });
    queue.add('ns/a');
    await clock.advance(1000);

    // Attempts at 0, then 5, 10, 20 and 40 ms after each failure.
    expect(attempts).toEqual([0, 5, 15, 35, 75]);
    expect(queue.numRequeues('ns/a')).toBe(0);
    expect(queue.delayedCount).toBe(0);
    await controller.stop();
  });

  it('does not requeue a key whose reconcile failed with a TerminalError, and logs it', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock, backoffBaseMs: 5 });
    const logged: string[] = [];
    const logger = {
      ...silentLogger,
      error: (_: unknown, message: string) => logged.push(message),
    };
    const controller = new Controller(queue, { workers: 1, logger });
    let attempts = 0;
    void controller.run(() => {
      attempts++;
      return Promise.reject(new TerminalError('the spec names no method kiln knows'));
    });
    queue.add('ns/a');
    await clock.advance(60_000);

    expect(attempts).toBe(1);
    expect(queue.delayedCount).toBe(0);
    expect(queue.numRequeues('ns/a')).toBe(0);
    expect(logged).toEqual(['reconcile failed for good; not retried']);
    await controller.stop();
  });

  it('reconciles again after requeueAfterMs, without counting it as a failure', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const controller = new Controller(queue, { workers: 1 });
    const at: number[] = [];
    const start = clock.now();
    void controller.run(() => {
      at.push(clock.now() - start);
      return Promise.resolve(at.length < 3 ? { requeueAfterMs: 30_000 } : undefined);
    });
    queue.add('ns/a');
    await clock.advance(120_000);

    expect(at).toEqual([0, 30_000, 60_000]);
    expect(queue.numRequeues('ns/a')).toBe(0);
    await controller.stop();
  });

  it('stop() aborts the signal of reconciles in flight, takes no more keys, and waits for them', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const controller = new Controller(queue, { workers: 2 });
    const seen: string[] = [];
    let returned = 0;
    void controller.run(async (key, signal) => {
      seen.push(key);
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      await clock.sleep(0);
      returned++;
      throw new Error('aborted');
    });
    queue.add('ns/a');
    queue.add('ns/b');
    queue.add('ns/c');
    await clock.flush();

    let stopped = false;
    const stopping = controller.stop().then(() => (stopped = true));
    await clock.flush();
    expect(stopped).toBe(false);
    await clock.advance(1);
    await stopping;

    expect(returned).toBe(2);
    expect(seen).toEqual(['ns/a', 'ns/b']);
    expect(queue.delayedCount).toBe(0);
  });
});
