import { FakeClock } from './clock.js';
import { LeaderElector, type LeaderElectorOptions } from './leader-election.js';
import { Metrics } from '../../metrics/metrics.js';
import { parsePrometheusText, sumOf } from '../../../test/support/prometheus-text.js';
import {
  MemoryLeaseStore,
  type MemoryLeaseClient,
} from '../../../test/support/operator-runtime-fakes.js';

const NS = 'kiln';
const NAME = 'kiln-operator';

interface Candidate {
  elector: LeaderElector;
  client: MemoryLeaseClient;
  /** Fake-clock times (ms since the test began) at which terms started and ended. */
  started: number[];
  stopped: number[];
  signals: AbortSignal[];
  leaders: Array<string | undefined>;
}

function world() {
  const clock = new FakeClock();
  const store = new MemoryLeaseStore();
  const start = clock.now();
  const elapsed = (): number => clock.now() - start;
  const candidate = (identity: string, options: Partial<LeaderElectorOptions> = {}): Candidate => {
    const client = store.client();
    const elector = new LeaderElector({
      store: client,
      namespace: NS,
      name: NAME,
      identity,
      clock,
      random: () => 0,
      ...options,
    });
    const c: Candidate = { elector, client, started: [], stopped: [], signals: [], leaders: [] };
    elector.start({
      onStartedLeading: (signal) => {
        c.started.push(elapsed());
        c.signals.push(signal);
      },
      onStoppedLeading: () => void c.stopped.push(elapsed()),
      onNewLeader: (leader) => c.leaders.push(leader),
    });
    return c;
  };
  const lease = () => store.lease(NS, NAME);
  return { clock, store, candidate, lease, elapsed, start };
}

describe(LeaderElector.name, () => {
  it('creates an absent Lease, leads, and renews it every retry period', async () => {
    const { clock, candidate, lease, start } = world();
    const a = candidate('a');
    await clock.flush();

    expect(a.elector.isLeader).toBe(true);
    expect(a.started).toEqual([0]);
    expect(lease()).toMatchObject({
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      leaseTransitions: 0,
      acquireTime: start,
      renewTime: start,
    });
    await clock.advance(2000);
    expect(lease()?.renewTime).toBe(start + 2000);
    await clock.advance(60_000);
    expect(lease()?.renewTime).toBe(start + 62_000);
    expect(lease()?.acquireTime).toBe(start);
    expect(a.stopped).toEqual([]);
    expect(a.signals[0]?.aborted).toBe(false);
    await a.elector.stop();
  });

  it('waits while another identity holds an unexpired Lease, then takes it over after it expires', async () => {
    const { clock, store, candidate, lease, start } = world();
    store.put({
      namespace: NS,
      name: NAME,
      holderIdentity: 'gone',
      leaseDurationSeconds: 15,
      acquireTime: start - 60_000,
      renewTime: start,
      leaseTransitions: 3,
    });
    const b = candidate('b');
    await clock.advance(14_000);
    expect(b.elector.isLeader).toBe(false);
    expect(b.elector.leader).toBe('gone');

    await clock.advance(4000);

    expect(b.elector.isLeader).toBe(true);
    expect(b.started[0]).toBeGreaterThan(15_000);
    expect(lease()).toMatchObject({ holderIdentity: 'b', leaseTransitions: 4 });
    expect(lease()?.acquireTime).toBe(start + (b.started[0] ?? 0));
    expect(b.leaders).toEqual(['gone', 'b']);
    await b.elector.stop();
  });

  it('stops leading at once when no renewal succeeds within the renew deadline, and tries to acquire again', async () => {
    const { clock, candidate, lease, start } = world();
    const a = candidate('a');
    await clock.advance(4000);
    const renewedAt = (lease()?.renewTime ?? 0) - start;
    expect(renewedAt).toBe(4000);

    a.client.hang();
    await clock.advance(9999 - (clock.now() - start - renewedAt));
    expect(a.elector.isLeader).toBe(true);
    await clock.advance(1);

    expect(a.elector.isLeader).toBe(false);
    expect(a.stopped).toEqual([renewedAt + 10_000]);
    expect(a.signals[0]?.aborted).toBe(true);

    a.client.heal();
    await clock.advance(10_000);
    expect(a.elector.isLeader).toBe(true);
    expect(a.started).toHaveLength(2);
    expect(a.signals[1]?.aborted).toBe(false);
    await a.elector.stop();
  });

  it('stops leading at once when a renewal gets 409: someone else wrote the Lease first', async () => {
    const { clock, store, candidate, lease } = world();
    const a = candidate('a');
    await clock.flush();
    const update = a.client.update.bind(a.client);
    a.client.update = (next) => {
      const current = lease();
      if (current) store.put({ ...current, holderIdentity: 'intruder', renewTime: clock.now() });
      return update(next);
    };

    await clock.advance(2000);

    expect(a.elector.isLeader).toBe(false);
    expect(a.stopped).toEqual([2000]);
    expect(lease()?.holderIdentity).toBe('intruder');
    await a.elector.stop();
  });

  it('releases the Lease on stop, so that a waiting candidate takes over without waiting for expiry', async () => {
    const { clock, candidate, lease, elapsed } = world();
    const a = candidate('a');
    await clock.flush();
    const b = candidate('b');
    await clock.advance(5000);
    expect(b.elector.isLeader).toBe(false);

    await a.elector.stop();
    const releasedAt = elapsed();
    expect(lease()?.holderIdentity).toBeFalsy();
    expect(a.signals[0]?.aborted).toBe(true);
    expect(a.stopped).toEqual([releasedAt]);
    await clock.advance(2500);

    expect(b.elector.isLeader).toBe(true);
    expect((b.started[0] ?? 0) - releasedAt).toBeLessThanOrEqual(2400);
    await b.elector.stop();
  });

  it('of two candidates exactly one leads; when the leader is cut off, it stops by its renew deadline and the other takes over only after the Lease expired', async () => {
    const { clock, candidate, lease, start } = world();
    const a = candidate('a');
    const b = candidate('b');
    const leaders = (): number => [a, b].filter((c) => c.elector.isLeader).length;

    for (let t = 0; t < 30_000; t += 100) {
      await clock.advance(100);
      expect(leaders()).toBe(1);
    }
    const [leader, follower] = a.elector.isLeader ? [a, b] : [b, a];
    const renewedAt = (lease()?.renewTime ?? 0) - start;

    leader.client.hang();
    for (let t = 0; t < 30_000; t += 100) {
      await clock.advance(100);
      expect(leaders()).toBeLessThanOrEqual(1);
    }

    expect(leader.stopped).toEqual([renewedAt + 10_000]);
    expect(follower.started).toHaveLength(1);
    expect(follower.started[0]).toBeGreaterThan(renewedAt + 15_000);
    expect(follower.started[0]).toBeLessThanOrEqual(renewedAt + 15_000 + 2400);
    expect(lease()?.holderIdentity).toBe(follower.elector.identity);
    expect(lease()?.leaseTransitions).toBe(1);

    leader.client.heal();
    await clock.advance(10_000);
    expect(leader.elector.isLeader).toBe(false);
    expect(follower.elector.isLeader).toBe(true);
    await Promise.all([a.elector.stop(), b.elector.stop()]);
  });

  it('waits for onStoppedLeading to settle before it releases the Lease on stop', async () => {
    const { clock, store } = world();
    let finish: () => void = () => undefined;
    const wound = new Promise<void>((resolve) => (finish = resolve));
    const elector = new LeaderElector({
      store: store.client(),
      namespace: NS,
      name: NAME,
      identity: 'a',
      clock,
    });
    elector.start({ onStartedLeading: () => undefined, onStoppedLeading: () => wound });
    await clock.flush();

    let stopped = false;
    const stopping = elector.stop().then(() => (stopped = true));
    await clock.flush();
    expect(stopped).toBe(false);
    expect(store.lease(NS, NAME)?.holderIdentity).toBe('a');
    finish();
    await stopping;
    expect(store.lease(NS, NAME)?.holderIdentity).toBeFalsy();
  });

  it('reports kiln_operator_leader: 0 before it leads, 1 during each term, 0 after each', async () => {
    const { clock, candidate } = world();
    const metrics = new Metrics({ tenantLabels: false });
    const leader = async () =>
      sumOf(parsePrometheusText((await metrics.render()).body), 'kiln_operator_leader');
    const blocker = candidate('blocker');
    await clock.flush();
    const a = candidate('a', { metrics });
    await clock.advance(2000);
    expect(a.elector.isLeader).toBe(false);
    expect(await leader()).toBe(0);

    await blocker.elector.stop();
    await clock.advance(3000);
    expect(a.elector.isLeader).toBe(true);
    expect(await leader()).toBe(1);

    // A renewal that fails past the renew deadline ends the term.
    a.client.hang();
    await clock.advance(10_000);
    expect(a.elector.isLeader).toBe(false);
    expect(await leader()).toBe(0);
    a.client.heal();
    await clock.advance(10_000);
    expect(a.elector.isLeader).toBe(true);
    expect(await leader()).toBe(1);

    await a.elector.stop();
    expect(await leader()).toBe(0);
  });

  it('refuses timings where the renew deadline is not below the lease duration', () => {
    const store = new MemoryLeaseStore().client();
    const make = (leaseDurationMs: number, renewDeadlineMs: number) => () =>
      new LeaderElector({ store, namespace: NS, name: NAME, leaseDurationMs, renewDeadlineMs });
    expect(make(10_000, 10_000)).toThrow(/greater than renewDeadline/);
    expect(make(15_000, 2000)).toThrow(/1.2 × retryPeriod/);
    expect(make(15_500, 10_000)).toThrow(/whole seconds/);
  });

  it('names itself after the host with a random suffix by default', () => {
    const store = new MemoryLeaseStore().client();
    const one = new LeaderElector({ store, namespace: NS, name: NAME });
    const two = new LeaderElector({ store, namespace: NS, name: NAME });
    expect(one.identity).toMatch(/^.+-[0-9a-f]{8}$/);
    expect(one.identity).not.toBe(two.identity);
  });
});
