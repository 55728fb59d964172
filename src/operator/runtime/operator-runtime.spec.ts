import { FakeClock } from './clock.js';
import type { Reconcile } from './controller.js';
import { Informer } from './informer.js';
import { LeaderElector } from './leader-election.js';
import { OperatorRuntime } from './operator-runtime.js';
import { MemoryLeaseStore, MemoryListWatch } from '../../../test/support/operator-runtime-fakes.js';

interface Obj {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
  owner?: string;
}

const obj = (name: string, owner?: string): Obj => ({
  metadata: { name, namespace: 'ns' },
  ...(owner ? { owner } : {}),
});

function setup(reconcile: Reconcile, options: { withElector?: boolean } = {}) {
  const clock = new FakeClock();
  const primary = new MemoryListWatch<Obj>();
  const secondary = new MemoryListWatch<Obj>();
  const leases = new MemoryLeaseStore();
  const leaseClient = leases.client();
  const elector = options.withElector
    ? new LeaderElector({
        store: leaseClient,
        namespace: 'kiln',
        name: 'op',
        identity: 'me',
        clock,
        random: () => 0,
      })
    : undefined;
  const primaryInformer = new Informer(primary, { clock });
  const secondaryInformer = new Informer(secondary, { clock });
  const runtime = new OperatorRuntime({
    reconcile,
    clock,
    workers: 2,
    ...(elector ? { elector } : {}),
  })
    .watch(primaryInformer)
    .watch(secondaryInformer, (o) => (o.owner ? [`ns/${o.owner}`] : []));
  return { clock, primary, secondary, leases, leaseClient, runtime, primaryInformer };
}

describe(OperatorRuntime.name, () => {
  it('starts the workers only once every informer has synced, then reconciles every cached key', async () => {
    const reconciled: string[] = [];
    const { clock, primary, secondary, runtime } = setup((key) => {
      reconciled.push(key);
      return Promise.resolve();
    });
    primary.upsert(obj('a'));
    primary.upsert(obj('b'));
    secondary.upsert(obj('job-c', 'c'));
    secondary.goDown();

    runtime.start();
    await clock.advance(5000);
    expect(runtime.isLeader).toBe(true);
    expect(runtime.isRunning).toBe(false);
    expect(reconciled).toEqual([]);

    secondary.goUp();
    await clock.advance(20_000); // the list's backoff has grown to a few seconds

    expect(runtime.isRunning).toBe(true);
    expect(reconciled.sort()).toEqual(['ns/a', 'ns/b', 'ns/c']);
    await runtime.stop();
  });

  it('reconciles the keys of objects that change while it runs, mapping secondary objects to their owner', async () => {
    const { clock, primary, secondary, runtime } = setup(() => Promise.resolve());
    runtime.start();
    await clock.advance(1000);
    expect(runtime.isRunning).toBe(true);

    primary.upsert(obj('a'));
    await clock.flush();
    secondary.upsert(obj('job-a', 'a'));
    await clock.flush();
    secondary.upsert(obj('orphan'));
    await clock.flush();
    primary.remove('ns', 'a');
    await clock.flush();

    expect(runtime.reconcileCount('ns/a')).toBe(3);
    expect(runtime.reconcileCount('ns/orphan')).toBe(0);
    await runtime.stop();
  });

  it('reconciles a key handed to enqueue() while it leads, and ignores one handed over before', async () => {
    const { clock, runtime } = setup(() => Promise.resolve());
    runtime.enqueue('ns/early');
    runtime.start();
    await clock.advance(1000);
    expect(runtime.isRunning).toBe(true);

    runtime.enqueue('ns/woken');
    await clock.flush();

    expect(runtime.reconcileCount('ns/woken')).toBe(1);
    expect(runtime.reconcileCount('ns/early')).toBe(0);
    await runtime.stop();
  });

  it('reconciles an update once, and not at all when `changed` finds nothing worth it', async () => {
    const clock = new FakeClock();
    const source = new MemoryListWatch<Obj & { note?: string; spec?: string }>();
    const informer = new Informer(source, { clock, resyncPeriodMs: 60_000 });
    const runtime = new OperatorRuntime({ reconcile: () => Promise.resolve(), clock }).watch(
      informer,
      undefined,
      { changed: (before, after) => before.spec !== after.spec },
    );
    runtime.start();
    await clock.advance(1000);
    source.upsert({ ...obj('a'), spec: 'v1' });
    await clock.flush();
    expect(runtime.reconcileCount('ns/a')).toBe(1);

    source.upsert({ ...obj('a'), spec: 'v2' });
    await clock.flush();
    expect(runtime.reconcileCount('ns/a')).toBe(2);

    source.upsert({ ...obj('a'), spec: 'v2', note: 'a sidecar was here' });
    await clock.flush();
    expect(runtime.reconcileCount('ns/a')).toBe(2);

    // A resync hands every cached object on unchanged: always reconciled.
    await clock.advance(60_000);
    expect(runtime.reconcileCount('ns/a')).toBe(3);
    await runtime.stop();
  });

  it('keeps warm caches but reconciles nothing while another process holds the Lease', async () => {
    const reconciled: string[] = [];
    const { clock, primary, leases, runtime, primaryInformer } = setup(
      (key) => {
        reconciled.push(key);
        return Promise.resolve();
      },
      { withElector: true },
    );
    leases.put({
      namespace: 'kiln',
      name: 'op',
      holderIdentity: 'other',
      leaseDurationSeconds: 15,
      renewTime: clock.now(),
    });
    primary.upsert(obj('a'));
    runtime.start();
    await clock.advance(10_000);
    primary.upsert(obj('b'));
    await clock.advance(1000);

    expect(primaryInformer.keys().sort()).toEqual(['ns/a', 'ns/b']);
    expect(runtime.isLeader).toBe(false);
    expect(reconciled).toEqual([]);

    await clock.advance(10_000); // the other holder never renewed: the Lease expired
    expect(runtime.isLeader).toBe(true);
    expect(reconciled.sort()).toEqual(['ns/a', 'ns/b']);
    await runtime.stop();
  });

  it('on losing the Lease stops at once: in-flight reconciles see their signal abort and no key is taken after', async () => {
    const signals: AbortSignal[] = [];
    let finishedAfterAbort = 0;
    const { clock, primary, leaseClient, runtime, primaryInformer } = setup(
      async (_key, signal) => {
        signals.push(signal);
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        finishedAfterAbort++;
      },
      { withElector: true },
    );
    primary.upsert(obj('a'));
    primary.upsert(obj('b'));
    runtime.start();
    await clock.advance(1000);
    expect(signals).toHaveLength(2);

    leaseClient.hang();
    await clock.advance(10_000);

    expect(runtime.isLeader).toBe(false);
    expect(runtime.isRunning).toBe(false);
    expect(signals.every((s) => s.aborted)).toBe(true);
    expect(finishedAfterAbort).toBe(2);
    primary.upsert(obj('c'));
    await clock.advance(1000);
    expect(primaryInformer.keys().sort()).toEqual(['ns/a', 'ns/b', 'ns/c']);
    expect(signals).toHaveLength(2);

    leaseClient.heal();
    await clock.advance(10_000);
    expect(runtime.isRunning).toBe(true);
    // A new term: two workers take two of the three cached keys again.
    expect(signals).toHaveLength(4);
    expect(signals.slice(2).every((s) => !s.aborted)).toBe(true);
    await runtime.stop();
  });

  it('starts a new term only after the last term’s reconciles have returned', async () => {
    const log: string[] = [];
    let first = true;
    const { clock, primary, leaseClient, runtime } = setup(
      async (key, signal) => {
        log.push(`start ${key}`);
        if (first) {
          first = false;
          // Ignores its signal for a while, as a reconcile stuck in a slow call would.
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          await clock.sleep(20_000);
        }
        log.push(`end ${key}`);
      },
      { withElector: true },
    );
    primary.upsert(obj('a'));
    runtime.start();
    await clock.advance(1000);
    leaseClient.hang();
    await clock.advance(10_000);
    leaseClient.heal();
    await clock.advance(8000);
    expect(runtime.isLeader).toBe(true);
    expect(log).toEqual(['start ns/a']);

    await clock.advance(15_000);

    expect(log).toEqual(['start ns/a', 'end ns/a', 'start ns/a', 'end ns/a']);
    await runtime.stop();
  });

  it('stop() aborts in-flight reconciles, waits for them, then releases the Lease', async () => {
    let aborted = false;
    const { clock, primary, leases, runtime } = setup(
      async (_key, signal) => {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        await clock.sleep(0);
        aborted = true;
      },
      { withElector: true },
    );
    primary.upsert(obj('a'));
    runtime.start();
    await clock.advance(1000);
    expect(leases.lease('kiln', 'op')?.holderIdentity).toBe('me');

    const stopping = runtime.stop();
    await clock.flush();
    expect(leases.lease('kiln', 'op')?.holderIdentity).toBe('me');
    await clock.advance(1);
    await stopping;

    expect(aborted).toBe(true);
    expect(leases.lease('kiln', 'op')?.holderIdentity).toBeFalsy();
    expect(clock.pendingTimers).toBe(0);
  });
});
