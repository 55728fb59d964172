import type { QueueOrder } from './admission.repository.js';
import { QueueOrders } from './queue-orders.js';

/** Small tests: when QueueOrders reads the queue's order again, against a queue in memory. */
describe(QueueOrders.name, () => {
  /** A queue whose generation the test moves; each read answers the generation it read. */
  function queue() {
    const state = { generation: 1, reads: 0, nowMs: 0, fail: false };
    const gate: { open?: () => void } = {};
    let held = false;
    const read = async (): Promise<QueueOrder> => {
      const generation = String(state.generation);
      state.reads++;
      if (held) await new Promise<void>((resolve) => (gate.open = resolve));
      if (state.fail) throw new Error('the database is away');
      return { generation, places: new Map() };
    };
    const errors: unknown[] = [];
    const orders = new QueueOrders(
      read,
      { trustMs: 10_000, staleMs: 1_000 },
      (error) => errors.push(error),
      () => state.nowMs,
    );
    return {
      state,
      orders,
      errors,
      hold: () => (held = true),
      release: () => {
        held = false;
        gate.open?.();
      },
    };
  }

  it('reads the order once per generation, however many ask', async () => {
    const { state, orders } = queue();

    const entries = await Promise.all([orders.at('1'), orders.at('1'), orders.at('1')]);
    await orders.at('1');

    expect(state.reads).toBe(1);
    expect(new Set(entries).size).toBe(1);
    expect(entries[0].order.generation).toBe('1');
  });

  it('reads it again first once the generation moved and the order is older than staleMs', async () => {
    const { state, orders } = queue();
    await orders.at('1');

    state.generation = 2;
    state.nowMs = 1_001;
    const entry = await orders.at('2');

    expect(state.reads).toBe(2);
    expect(entry.order.generation).toBe('2');
  });

  it('answers an order younger than staleMs at a newer generation, and reads the new one behind it', async () => {
    const { state, orders } = queue();
    const first = await orders.at('1');

    state.generation = 2;
    state.nowMs = 1_000;

    expect(await orders.at('2')).toBe(first);
    expect(state.reads).toBe(2);
    await new Promise((resolve) => setImmediate(resolve));
    expect(await orders.at('2')).not.toBe(first);
    expect((await orders.at('2')).order.generation).toBe('2');
    expect(state.reads).toBe(2);
  });

  it('reads a moved queue behind the answer at most once per half of staleMs', async () => {
    const { state, orders } = queue();
    const first = await orders.at('1');
    state.generation = 2;
    state.nowMs = 499;

    expect(await orders.at('2')).toBe(first);
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.reads).toBe(1);

    state.nowMs = 500;
    expect(await orders.at('2')).toBe(first);
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.reads).toBe(2);
  });

  it('answers `fresh` only with an order read at the generation asked for or later', async () => {
    const { state, orders } = queue();
    await orders.at('1');
    state.generation = 2;

    expect((await orders.fresh('2')).order.generation).toBe('2');
    expect((await orders.fresh('2')).order.generation).toBe('2');
    expect((await orders.fresh('1')).order.generation).toBe('2');
    expect(state.reads).toBe(2);
  });

  it('waits for a read under way that reads the generation asked for, rather than reading twice', async () => {
    const { state, orders, hold, release } = queue();
    state.generation = 3;
    hold();

    const first = orders.at('3');
    const second = orders.at('3');
    release();

    expect((await first).order.generation).toBe('3');
    expect(await second).toBe(await first);
    expect(state.reads).toBe(1);
  });

  it('reads again when the read under way read an older generation than the one asked for', async () => {
    const { state, orders, hold, release } = queue();
    hold();
    const old = orders.at('1');
    state.generation = 2;
    const newer = orders.at('2');
    release();

    expect((await old).order.generation).toBe('1');
    expect((await newer).order.generation).toBe('2');
    expect(state.reads).toBe(2);
  });

  it('answers an old order of the same generation at once and reads it again behind the answer', async () => {
    const { state, orders } = queue();
    const first = await orders.at('1');
    state.nowMs = 10_001;

    expect(await orders.at('1')).toBe(first);
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.reads).toBe(2);
    expect(await orders.at('1')).not.toBe(first);
  });

  it('keeps no failed read: the next question reads again, and a read behind an answer is reported', async () => {
    const { state, orders, errors } = queue();
    state.fail = true;
    await expect(orders.at('1')).rejects.toThrow('the database is away');
    state.fail = false;
    const entry = await orders.at('1');

    state.nowMs = 20_000;
    state.fail = true;
    expect(await orders.at('1')).toBe(entry);
    await new Promise((resolve) => setImmediate(resolve));

    expect(errors).toEqual([new Error('the database is away')]);
    expect(state.reads).toBe(3);
  });
});
