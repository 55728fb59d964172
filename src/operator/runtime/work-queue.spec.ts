import { FakeClock } from './clock.js';
import { silentLogger } from '../../cluster/ports.js';
import { Controller, type Reconcile, TerminalError } from './controller.js';
import { WorkQueue } from './work-queue.js';
import { Metrics } from '../../metrics/metrics.js';
import { parsePrometheusText, sumOf } from '../../../test/support/prometheus-text.js';

/** What `metrics` would answer a scrape with, parsed. */
async function scraped(metrics: Metrics) {
  return parsePrometheusText((await metrics.render()).body);
}

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

  it('reports its depth exactly as keys are added, taken and dropped; delayed keys wait outside it', async () => {
    const clock = new FakeClock();
    const metrics = new Metrics({ tenantLabels: false });
    const queue = new WorkQueue({ clock, metrics, name: 'things' });
    const depth = async () =>
      sumOf(await scraped(metrics), 'kiln_operator_workqueue_depth', { controller: 'things' });
    expect(await depth()).toBe(0);

    queue.add('ns/a');
    queue.add('ns/b');
    queue.add('ns/a');
    queue.addAfter('ns/c', 100);
    expect(await depth()).toBe(2);
    const a = await queue.get();
    expect(await depth()).toBe(1);
    queue.add('ns/a');
    expect(await depth()).toBe(1);
    queue.done(a ?? '');
    expect(await depth()).toBe(2);
    await clock.advance(100);
    expect(await depth()).toBe(3);

    void queue.shutdown();
    expect(await depth()).toBe(0);
  });

  it('measures a key’s wait from its first add until a worker takes it', async () => {
    const clock = new FakeClock();
    const metrics = new Metrics({ tenantLabels: false });
    const queue = new WorkQueue({ clock, metrics, name: 'things' });
    const latency = async () => {
      const families = await scraped(metrics);
      const labels = { controller: 'things' };
      return {
        count: sumOf(families, 'kiln_operator_workqueue_latency_seconds_count', labels),
        sum: sumOf(families, 'kiln_operator_workqueue_latency_seconds_sum', labels),
      };
    };

    // Added again while it waits: the wait counts from the first add.
    queue.add('ns/a');
    await clock.advance(300);
    queue.add('ns/a');
    await clock.advance(200);
    const a = await queue.get();
    expect(await latency()).toEqual({ count: 1, sum: 0.5 });

    // Added while a worker has it: the wait counts from that add, through the rest of its turn.
    queue.add('ns/a');
    await clock.advance(100);
    queue.done(a ?? '');
    await clock.advance(50);
    // A worker already waiting takes a key at once.
    const taken = queue.get();
    expect(await taken).toBe('ns/a');
    const waiting = queue.get();
    queue.add('ns/b');
    expect(await waiting).toBe('ns/b');
    const after = await latency();
    expect(after.count).toBe(3);
    expect(after.sum).toBeCloseTo(0.65, 9);
  });
});

describe(Controller.name, () => {
  it('counts each reconcile by its result (success, requeue, error) and times it, per controller', async () => {
    const clock = new FakeClock();
    const metrics = new Metrics({ tenantLabels: false });
    const queue = new WorkQueue({ clock, backoffBaseMs: 60_000 });
    const controller = new Controller(queue, { workers: 1, name: 'things', metrics });
    void controller.run((key) => {
      if (key === 'ns/later') return Promise.resolve({ requeueAfterMs: 60_000 });
      if (key === 'ns/broken') return Promise.reject(new Error('transient'));
      if (key === 'ns/invalid') return Promise.reject(new TerminalError('never'));
      return Promise.resolve();
    });
    for (const key of ['ns/ok', 'ns/also-ok', 'ns/later', 'ns/broken', 'ns/invalid'])
      queue.add(key);
    await clock.flush();

    const families = await scraped(metrics);
    const count = (result: string) =>
      sumOf(families, 'kiln_operator_reconciles_total', { controller: 'things', result });
    expect([count('success'), count('requeue'), count('error')]).toEqual([2, 1, 2]);
    expect(
      sumOf(families, 'kiln_operator_reconcile_duration_seconds_count', { controller: 'things' }),
    ).toBe(5);
    await controller.stop();
  });

  it('counts a reconcile that fails because the controller stopped neither as an error nor at all', async () => {
    const clock = new FakeClock();
    const metrics = new Metrics({ tenantLabels: false });
    const controller = new Controller(new WorkQueue({ clock }), { name: 'things', metrics });
    void controller.run(async (_key, signal) => {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      throw new Error('aborted');
    });
    controller.queue.add('ns/a');
    await clock.flush();
    await controller.stop();

    const families = await scraped(metrics);
    expect(sumOf(families, 'kiln_operator_reconciles_total')).toBe(0);
    expect(sumOf(families, 'kiln_operator_reconcile_duration_seconds_count')).toBe(0);
  });
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
