import { FakeClock } from './clock.js';
import {
  Informer,
  LAST_APPLIED_ANNOTATION,
  objectKey,
  trimForCache,
  type InformerOptions,
} from './informer.js';
import type { ListWatchSource, WatchEvent } from '../../cluster/ports.js';
import { MemoryListWatch, StatusError } from '../../../test/support/operator-runtime-fakes.js';
import { Metrics } from '../../metrics/metrics.js';
import { parsePrometheusText, sumOf } from '../../../test/support/prometheus-text.js';

interface Thing {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
  data?: Record<string, string>;
}

const thing = (name: string, data: Record<string, string> = {}): Thing => ({
  metadata: { name, namespace: 'ns' },
  data,
});

function setup(options: InformerOptions = {}) {
  const clock = new FakeClock();
  const source = new MemoryListWatch<Thing>();
  const informer = new Informer(source, { clock, ...options });
  const events: string[] = [];
  informer.addHandler({
    onAdd: (o) => events.push(`add ${objectKey(o)}`),
    onUpdate: (before, after) =>
      events.push(`${before === after ? 'resync' : 'update'} ${objectKey(after)}`),
    onDelete: (o) => events.push(`delete ${objectKey(o)}`),
  });
  // Times (fake ms since the test began) at which each watch call was made.
  const watchTimes: number[] = [];
  const start = clock.now();
  const watch = source.watch.bind(source);
  source.watch = (...args) => {
    watchTimes.push(clock.now() - start);
    return watch(...args);
  };
  return { clock, source, informer, events, watchTimes, start };
}

const gaps = (times: number[]): number[] => times.slice(1).map((t, i) => t - (times[i] ?? 0));

describe(Informer.name, () => {
  it('lists, is synced after the first list, and follows adds, updates and deletes from the watch', async () => {
    const { clock, source, informer, events } = setup();
    source.upsert(thing('a'));
    source.upsert(thing('b'));
    expect(informer.hasSynced).toBe(false);

    informer.start();
    await clock.flush();
    expect(informer.hasSynced).toBe(true);
    source.upsert(thing('a', { v: '2' }));
    source.remove('ns', 'b');
    source.upsert(thing('c'));
    await clock.flush();

    expect(events).toEqual(['add ns/a', 'add ns/b', 'update ns/a', 'delete ns/b', 'add ns/c']);
    expect(informer.keys().sort()).toEqual(['ns/a', 'ns/c']);
    expect(informer.get('ns/a')?.data).toEqual({ v: '2' });
    expect(informer.lastResourceVersion).toBe(source.resourceVersion);
    await informer.stop();
  });

  it('starts each watch from the last resourceVersion seen, so a restarted watch misses nothing', async () => {
    const { clock, source, informer } = setup();
    informer.start();
    await clock.flush();
    source.upsert(thing('a'));
    await clock.flush();
    const seen = informer.lastResourceVersion;

    source.endWatches();
    source.upsert(thing('b'));
    source.upsert(thing('a', { v: '2' }));
    await clock.advance(1000);

    expect(source.lastWatch?.resourceVersion).toBe(seen);
    expect(informer.keys().sort()).toEqual(['ns/a', 'ns/b']);
    expect(informer.get('ns/a')?.data).toEqual({ v: '2' });
    expect(source.lists).toBe(1);
    await informer.stop();
  });

  it('moves its resourceVersion on with BOOKMARKs and watches on from there', async () => {
    const clock = new FakeClock();
    const watches: Array<{ rv: string; send: (e: WatchEvent<Thing>) => void; end: () => void }> =
      [];
    const source: ListWatchSource<Thing> = {
      description: 'scripted',
      list: () => Promise.resolve({ items: [], resourceVersion: '5' }),
      watch: (rv, onEvent, onDone) => {
        watches.push({ rv, send: onEvent, end: () => onDone() });
        return { abort: () => undefined };
      },
    };
    const informer = new Informer(source, { clock });
    informer.start();
    await clock.flush();

    watches[0]?.send({ type: 'BOOKMARK', resourceVersion: '9' });
    expect(informer.lastResourceVersion).toBe('9');
    await clock.advance(20_000);
    watches[0]?.end();
    await clock.flush();

    expect(watches.map((w) => w.rv)).toEqual(['5', '9']);
    await informer.stop();
  });

  it('relists after 410 Gone: vanished objects get a delete, changed ones an update, new ones an add', async () => {
    const { clock, source, informer, events } = setup();
    source.upsert(thing('keep'));
    source.upsert(thing('change'));
    source.upsert(thing('vanish'));
    informer.start();
    await clock.flush();
    events.length = 0;

    source.goDown();
    await clock.flush();
    source.upsert(thing('change', { v: '2' }));
    source.remove('ns', 'vanish');
    source.upsert(thing('new'));
    source.compact();
    source.goUp();
    await clock.advance(5000);

    expect(informer.stats.relists).toBe(1);
    expect(events.sort()).toEqual(['add ns/new', 'delete ns/vanish', 'update ns/change']);
    expect(informer.keys().sort()).toEqual(['ns/change', 'ns/keep', 'ns/new']);
    expect(source.lists).toBe(2);
    await informer.stop();
  });

  it('relists at once when a healthy watch ends with a 410 ERROR', async () => {
    const { clock, source, informer } = setup();
    informer.start();
    await clock.advance(20_000);
    const lists = source.lists;

    source.endWatches(new StatusError(410, 'too old resource version'));
    await clock.flush();

    expect(source.lists).toBe(lists + 1);
    expect(informer.stats.relists).toBe(1);
    await informer.stop();
  });

  it('restarts a failing watch after jittered exponential backoff: 500 ms doubling up to 30 s', async () => {
    const highest = setup({ random: () => 0.9999999 });
    highest.informer.start();
    await highest.clock.flush();
    highest.watchTimes.splice(0, Infinity, highest.clock.now() - highest.start);
    highest.source.goDown();
    await highest.clock.advance(3 * 60_000);

    expect(gaps(highest.watchTimes).map((g) => Math.round(g))).toEqual([
      500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000,
    ]);
    await highest.informer.stop();

    const lowest = setup({ random: () => 0 });
    lowest.informer.start();
    await lowest.clock.flush();
    lowest.watchTimes.splice(0, Infinity, lowest.clock.now() - lowest.start);
    lowest.source.goDown();
    await lowest.clock.advance(60_000);

    expect(gaps(lowest.watchTimes).slice(0, 8)).toEqual([
      250, 500, 1000, 2000, 4000, 8000, 15_000, 15_000,
    ]);
    await lowest.informer.stop();
  });

  it.each([1, 42, 4242])(
    'OP-05 makes at most 10 watch attempts in any minute of a 5-minute outage, and is back within 30 s of its end (seed %i)',
    async (start) => {
      let seed = start;
      const random = (): number => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
      const { clock, source, informer, watchTimes, start: t0 } = setup({ random });
      informer.start();
      await clock.flush();
      watchTimes.length = 0;
      source.goDown();
      await clock.advance(5 * 60_000);

      for (const from of watchTimes) {
        const inWindow = watchTimes.filter((t) => t >= from && t < from + 60_000).length;
        expect(inWindow).toBeLessThanOrEqual(10);
      }
      expect(watchTimes.length).toBeGreaterThanOrEqual(5);

      source.goUp();
      const back = clock.now() - t0;
      await clock.advance(30_000);
      source.upsert(thing('after-the-outage'));
      await clock.flush();
      expect(watchTimes.at(-1)! - back).toBeLessThanOrEqual(30_000);
      expect(informer.get('ns/after-the-outage')).toBeDefined();
      await informer.stop();
    },
  );

  it('retries a failing first list with backoff, and is synced once a list succeeds', async () => {
    const { clock, source, informer } = setup({ random: () => 0.9999999 });
    source.goDown();
    informer.start();
    await clock.advance(3000);
    expect(informer.hasSynced).toBe(false);
    expect(source.lists).toBe(3); // at 0, 500 and 1500 ms
    let synced = false;
    void informer.waitForSync().then((ok) => (synced = ok));

    source.goUp();
    await clock.advance(2000);

    expect(synced).toBe(true);
    expect(source.watches).toBe(1);
    await informer.stop();
  });

  it('resets the backoff after a healthy watch', async () => {
    const { clock, source, informer, watchTimes, start } = setup({ random: () => 0.9999999 });
    informer.start();
    await clock.flush();
    source.goDown();
    await clock.advance(7000); // retries at 0.5, 1.5, 3.5 s: the next delay would be 8 s
    source.goUp();
    await clock.advance(8000);
    expect(source.openWatches).toBe(1);
    await clock.advance(15_000); // open for longer than healthyWatchMs (10 s)
    watchTimes.splice(0, Infinity, clock.now() - start);

    source.goDown();
    await clock.advance(2000);

    // The healthy watch's end restarts at once; the failures after it start again at 500 ms.
    expect(gaps(watchTimes).map((g) => Math.round(g))).toEqual([0, 500, 1000]);
    await informer.stop();
  });

  it('ends each watch at its lifetime cap and starts the next one from where it was', async () => {
    const { clock, source, informer, watchTimes } = setup({ random: () => 0.5 });
    informer.start();
    await clock.flush();
    source.upsert(thing('a'));
    await clock.flush();
    expect(source.lastWatch?.options?.timeoutSeconds).toBe(300);

    // The fake server ignores timeoutSeconds (like a half-open connection): the informer's own
    // timer ends the watch a moment after the lifetime.
    await clock.advance(302_000);

    expect(watchTimes).toHaveLength(2);
    expect(watchTimes[1]).toBeGreaterThanOrEqual(300_000);
    expect(watchTimes[1]).toBeLessThanOrEqual(302_000);
    expect(informer.stats.lifetimeEnds).toBe(1);
    expect(source.lastWatch?.resourceVersion).toBe(source.resourceVersion);
    expect(source.openWatches).toBe(1);
    await informer.stop();
  });

  it('counts a restart for each watch that fails, gets 410, ends early or goes silent past its timeout, and none for one the server ends at its timeout', async () => {
    const metrics = new Metrics({ tenantLabels: false });
    const { clock, source, informer } = setup({ random: () => 0.5, name: 'things', metrics });
    const restarts = async () =>
      sumOf(
        parsePrometheusText((await metrics.render()).body),
        'kiln_operator_watch_restarts_total',
        { resource: 'things' },
      );
    informer.start();
    await clock.flush();

    // Healthy watches (open 20 s), each restarted at once.
    await clock.advance(20_000);
    source.endWatches(new Error('connection reset'));
    await clock.advance(20_000);
    source.endWatches(new StatusError(410, 'too old resource version'));
    await clock.advance(20_000);
    // Closed cleanly long before its timeout (client-node's idle timeout, a proxy).
    source.endWatches();
    await clock.flush();
    expect(await restarts()).toBe(3);
    expect(informer.stats.relists).toBe(1);

    // The server ends the watch at the 300 s it was asked for: the routine end.
    await clock.advance(300_000);
    source.endWatches();
    await clock.flush();
    expect(await restarts()).toBe(3);

    // The server says nothing past the timeout (a half-open connection): the informer's own timer.
    await clock.advance(302_000);
    expect(await restarts()).toBe(4);
    expect(informer.stats.restarts).toBe(4);
    expect(source.openWatches).toBe(1);
    await informer.stop();
    expect(await restarts()).toBe(4);
  });

  it('jitters the watch lifetime by ±10 %', async () => {
    for (const [random, seconds] of [
      [0, 270],
      [0.9999999, 330],
    ] as const) {
      const { clock, source, informer } = setup({ random: () => random });
      informer.start();
      await clock.flush();
      expect(source.lastWatch?.options?.timeoutSeconds).toBe(seconds);
      await informer.stop();
    }
  });

  it('notifies every cached object again each resync period', async () => {
    const { clock, source, informer, events } = setup({ resyncPeriodMs: 10 * 60_000 });
    source.upsert(thing('a'));
    source.upsert(thing('b'));
    informer.start();
    await clock.flush();
    events.length = 0;

    await clock.advance(10 * 60_000 - 1);
    expect(events).toEqual([]);
    await clock.advance(1);
    expect(events.sort()).toEqual(['resync ns/a', 'resync ns/b']);
    await clock.advance(10 * 60_000);
    expect(events).toHaveLength(4);
    expect(informer.stats.resyncs).toBe(2);
    await informer.stop();
  });

  it('hands out frozen objects: writing to a cached object throws', async () => {
    const { clock, source, informer } = setup();
    source.upsert(thing('a', { k: 'v' }));
    informer.start();
    await clock.flush();

    const cached = informer.get('ns/a');
    expect(Object.isFrozen(cached)).toBe(true);
    expect(() => {
      (cached as Thing).data!.k = 'changed';
    }).toThrow(TypeError);
    const copy = structuredClone(cached) as Thing;
    copy.data!.k = 'changed';
    expect(informer.get('ns/a')?.data).toEqual({ k: 'v' });
    await informer.stop();
  });

  it('caches and hands out what `transform` returns, for listed and watched objects alike', async () => {
    const clock = new FakeClock();
    const source = new MemoryListWatch<Thing>();
    const seen: Thing[] = [];
    const informer = new Informer(source, {
      clock,
      transform: (object) => ({ ...object, data: { kept: object.data?.kept ?? '' } }),
    });
    informer.addHandler({
      onAdd: (o) => seen.push(o),
      onUpdate: (_before, after) => seen.push(after),
      onDelete: (o) => seen.push(o),
    });
    source.upsert(thing('listed', { kept: '1', dropped: 'x' }));
    informer.start();
    await clock.flush();
    source.upsert(thing('watched', { kept: '2', dropped: 'y' }));
    source.upsert(thing('listed', { kept: '3', dropped: 'z' }));
    source.remove('ns', 'watched');
    await clock.flush();

    expect(seen.map((o) => [objectKey(o), o.data])).toEqual([
      ['ns/listed', { kept: '1' }],
      ['ns/watched', { kept: '2' }],
      ['ns/listed', { kept: '3' }],
      ['ns/watched', { kept: '2' }],
    ]);
    expect(informer.list().map((o) => o.data)).toEqual([{ kept: '3' }]);
    expect(Object.isFrozen(informer.get('ns/listed')?.data)).toBe(true);
    await informer.stop();
  });

  it('keeps going when a handler throws', async () => {
    const { clock, source, informer, events } = setup();
    informer.addHandler({
      onAdd: () => {
        throw new Error('handler bug');
      },
    });
    informer.start();
    await clock.flush();
    source.upsert(thing('a'));
    source.upsert(thing('b'));
    await clock.flush();

    expect(events).toEqual(['add ns/a', 'add ns/b']);
    await informer.stop();
  });

  it('stop() ends the watch, and no handler runs after it', async () => {
    const { clock, source, informer, events } = setup();
    informer.start();
    await clock.flush();

    await informer.stop();
    source.upsert(thing('late'));
    await clock.advance(60_000);

    expect(source.openWatches).toBe(0);
    expect(events).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
  });
});

describe(trimForCache.name, () => {
  const managedFields = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': {} } }];

  it('drops managedFields and the last-applied annotation and keeps every other field', () => {
    const object = {
      apiVersion: 'v1',
      kind: 'Thing',
      metadata: {
        name: 'a',
        namespace: 'ns',
        uid: 'u1',
        resourceVersion: '7',
        labels: { app: 'x' },
        annotations: { [LAST_APPLIED_ANNOTATION]: '{"kind":"Thing"}', keep: 'me' },
        finalizers: ['kiln.dev/logs'],
        ownerReferences: [{ kind: 'Build', name: 'b', uid: 'u0', controller: true }],
        managedFields,
      },
      spec: { suspend: true },
      status: { state: 'queued' },
    };

    expect(trimForCache(structuredClone(object))).toEqual({
      ...object,
      metadata: {
        name: 'a',
        namespace: 'ns',
        uid: 'u1',
        resourceVersion: '7',
        labels: { app: 'x' },
        annotations: { keep: 'me' },
        finalizers: ['kiln.dev/logs'],
        ownerReferences: [{ kind: 'Build', name: 'b', uid: 'u0', controller: true }],
      },
    });
  });

  it('leaves no empty annotations behind, and an object with nothing to drop as it is', () => {
    const applied = {
      metadata: { name: 'a', annotations: { [LAST_APPLIED_ANNOTATION]: '{}' }, managedFields },
    };
    expect(trimForCache(applied)).toEqual({ metadata: { name: 'a' } });

    const plain = { metadata: { name: 'b', annotations: { keep: 'me' } }, spec: {} };
    expect(trimForCache(plain)).toBe(plain);
    expect(plain.metadata.annotations).toEqual({ keep: 'me' });
  });
});
