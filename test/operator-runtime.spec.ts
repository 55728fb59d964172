import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { KubeClient } from '../src/kubernetes/kube-client.js';
import { KubeLeaseStore } from '../src/kubernetes/leases.js';
import { KubeListWatch } from '../src/kubernetes/list-watch.js';
import { Informer, type InformerOptions } from '../src/operator/runtime/informer.js';
import { LeaderElector } from '../src/operator/runtime/leader-election.js';
import { OperatorRuntime } from '../src/operator/runtime/operator-runtime.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { eventually, k8s, kubeConfigFor, merge } from './support/kube/client.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';

const NS = 'ops';
const CM_PATH = `/api/v1/namespaces/${NS}/configmaps`;
const LEASE = 'kiln-operator';
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${LEASE}`;

type ConfigMap = k8s.V1ConfigMap & { metadata: { name: string; namespace: string } };

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A TCP hop that can turn into a black hole: after `stall()` nothing passes in either direction
 * and connections stay open, as when packets to one replica are dropped.
 */
class StallingProxy {
  private readonly sockets = new Set<Socket>();
  private stalled = false;
  private constructor(private readonly server: Server) {}

  static async start(targetPort: number): Promise<StallingProxy> {
    const server = createServer();
    const proxy = new StallingProxy(server);
    server.on('connection', (client) => proxy.accept(client, targetPort));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stall(): void {
    this.stalled = true;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, targetPort: number): void {
    const upstream = connect(targetPort, '127.0.0.1');
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      this.sockets.add(from);
      from.on('data', (chunk: Buffer) => {
        if (!this.stalled) to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => {
        this.sockets.delete(from);
        to.destroy();
      });
    }
  }
}

noteDoubleOnly('the operator runtime on client-node');

describe('operator runtime against the Kubernetes API server double', () => {
  let server: KubeApiServer;
  let core: k8s.CoreV1Api;
  const stops: Array<() => Promise<void>> = [];

  beforeEach(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS], bookmarkIntervalMs: 200 });
    core = kubeConfigFor(server.url, NS).makeApiClient(k8s.CoreV1Api);
  });

  afterEach(async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
    await server.stop();
  });

  const clientFor = (url = server.url): KubeClient =>
    KubeClient.connect({ kind: 'server', server: url, token: 'test', namespace: NS });

  /** A started informer on the namespace's ConfigMaps, with a log of what it told its handler. */
  async function configMapInformer(options: InformerOptions = {}) {
    const source = KubeListWatch.forClient<ConfigMap>(clientFor(), {
      group: '',
      version: 'v1',
      plural: 'configmaps',
      namespace: NS,
    });
    const informer = new Informer(source, {
      backoffBaseMs: 50,
      backoffCapMs: 400,
      healthyWatchMs: 1000,
      ...options,
    });
    const events: string[] = [];
    informer.addHandler({
      onAdd: (o) => events.push(`add ${o.metadata.name}`),
      onUpdate: (before, after) => {
        if (before !== after) events.push(`update ${after.metadata.name}`);
      },
      onDelete: (o) => events.push(`delete ${o.metadata.name}`),
    });
    informer.start();
    stops.push(() => informer.stop());
    await informer.waitForSync();
    return { informer, events };
  }

  const create = (name: string, data: Record<string, string> = {}) =>
    core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name }, data } });
  const update = (name: string, data: Record<string, string>) =>
    core.patchNamespacedConfigMap({ namespace: NS, name, body: { data } }, merge);
  const remove = (name: string) => core.deleteNamespacedConfigMap({ namespace: NS, name });

  /** The cache equals what the server stores: the same names at the same resourceVersions. */
  const cacheMatchesServer = (informer: Informer<ConfigMap>): true | undefined => {
    const want = server
      .objects('v1', 'configmaps', NS)
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort();
    const have = informer
      .list()
      .map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort();
    return JSON.stringify(want) === JSON.stringify(have) ? true : undefined;
  };

  const watchRequests = () =>
    server.requests.filter((r) => r.path === CM_PATH && r.method === 'GET' && r.query.watch);

  describe('adapters', () => {
    it('KubeListWatch lists every page, with selectors, for namespaced and cluster-wide collections', async () => {
      for (let i = 0; i < 5; i++)
        await core.createNamespacedConfigMap({
          namespace: NS,
          body: { metadata: { name: `cm-${i}`, labels: { odd: String(i % 2 === 1) } } },
        });
      const ref = { group: '', version: 'v1', plural: 'configmaps' };
      const paged = new KubeListWatch<ConfigMap>(clientFor().kubeConfig, ref, { pageSize: 2 });
      const all = await paged.list();
      expect(all.items.map((o) => o.metadata.name).sort()).toEqual([
        'cm-0',
        'cm-1',
        'cm-2',
        'cm-3',
        'cm-4',
      ]);
      expect(all.resourceVersion).toBe(String(server.store.currentRv));
      expect(server.requestCount('/api/v1/configmaps', 'GET')).toBe(3);

      const odd = await KubeListWatch.forClient<ConfigMap>(clientFor(), {
        ...ref,
        namespace: NS,
        labelSelector: 'odd=true',
      }).list();
      expect(odd.items.map((o) => o.metadata.name).sort()).toEqual(['cm-1', 'cm-3']);

      const namespaces = await KubeListWatch.forClient(clientFor(), {
        group: '',
        version: 'v1',
        plural: 'namespaces',
      }).list();
      expect(namespaces.items.map((o) => o.metadata?.name).sort()).toEqual(['default', NS]);
    });

    it('KubeListWatch cancels a list whose signal aborts', async () => {
      const undo = server.delayRequests(2_000, { path: CM_PATH });
      const abort = new AbortController();
      const listing = KubeListWatch.forClient(clientFor(), {
        group: '',
        version: 'v1',
        plural: 'configmaps',
        namespace: NS,
      }).list(abort.signal);
      // Aborted while the double holds the request: in flight, not yet sent.
      await server.untilHeld(1);
      abort.abort();
      await expect(listing).rejects.toMatchObject({ name: 'AbortError' });
      expect(server.heldRequests).toBe(1); // did not wait for the answer
      undo();
      // The double keeps its own delay timer running after the client left.
      await server.untilHeld(0);
    });

    it('KubeLeaseStore creates, reads and updates Leases with optimistic concurrency', async () => {
      const store = new KubeLeaseStore(clientFor());
      expect(await store.get(NS, LEASE)).toBeUndefined();
      const renewTime = Date.UTC(2026, 0, 1, 12, 0, 0, 123);
      const created = await store.create({
        namespace: NS,
        name: LEASE,
        holderIdentity: 'a',
        leaseDurationSeconds: 15,
        acquireTime: renewTime,
        renewTime,
        leaseTransitions: 0,
      });
      expect(await store.get(NS, LEASE)).toEqual(created);
      expect(created).toMatchObject({ holderIdentity: 'a', renewTime, acquireTime: renewTime });
      expect(
        (
          server.object('coordination.k8s.io/v1', 'leases', NS, LEASE)?.spec as {
            renewTime: string;
          }
        ).renewTime,
      ).toBe('2026-01-01T12:00:00.123000Z');

      await expect(store.create({ namespace: NS, name: LEASE })).rejects.toMatchObject({
        status: 409,
      });
      const updated = await store.update({ ...created, holderIdentity: 'b' });
      expect(updated.holderIdentity).toBe('b');
      await expect(store.update({ ...created, holderIdentity: 'c' })).rejects.toMatchObject({
        status: 409,
      });
      const released = await store.update({ ...updated, holderIdentity: '' });
      expect(released.holderIdentity).toBeUndefined();
    });

    it('KubeLeaseStore cancels a request whose signal aborts', async () => {
      const undo = server.delayRequests(2_000, { path: LEASE_PATH });
      const abort = new AbortController();
      const reading = new KubeLeaseStore(clientFor()).get(NS, LEASE, abort.signal);
      await server.untilHeld(1);
      abort.abort();
      await expect(reading).rejects.toMatchObject({ name: 'AbortError' });
      expect(server.heldRequests).toBe(1); // did not wait for the answer
      undo();
      // The double keeps its own delay timer running after the client left.
      await server.untilHeld(0);
    });
  });

  describe(Informer.name, () => {
    it('follows creates, updates and deletes, watching from the list with bookmarks and a timeout', async () => {
      await create('before', { v: '1' });
      const { informer, events } = await configMapInformer();
      expect(informer.get(`${NS}/before`)).toMatchObject({ kind: 'ConfigMap', apiVersion: 'v1' });

      await create('a');
      await update('before', { v: '2' });
      await remove('a');
      await create('b', { k: 'v' });
      await eventually(() => cacheMatchesServer(informer));

      expect(events).toEqual(['add before', 'add a', 'update before', 'delete a', 'add b']);
      expect(informer.get(`${NS}/before`)?.data).toEqual({ v: '2' });
      const [first] = watchRequests();
      const list = server.requests.find(
        (r) => r.path === CM_PATH && r.method === 'GET' && !r.query.watch,
      );
      expect(list?.query).toMatchObject({ limit: '500' });
      expect(first?.query).toMatchObject({ allowWatchBookmarks: 'true' });
      // Five minutes ± 10 %.
      expect(Number(first?.query.timeoutSeconds)).toBeGreaterThanOrEqual(270);
      expect(Number(first?.query.timeoutSeconds)).toBeLessThanOrEqual(330);
      expect(Number(first?.query.resourceVersion)).toBeGreaterThan(0);
    });

    it('relists after a 410 Gone ERROR event on the watch, and the cache matches the server', async () => {
      await create('keep');
      await create('change');
      await create('vanish');
      const { informer, events } = await configMapInformer();
      events.length = 0;

      // The next watch is held for a while, then answered 410; changes land meanwhile.
      server.delayRequests(500, { path: CM_PATH, method: 'GET', count: 1 });
      server.goneNextWatch({ path: CM_PATH });
      server.closeWatches();
      await update('change', { v: '2' });
      await remove('vanish');
      await create('new');
      await eventually(() => (informer.stats.relists === 1 ? true : undefined));
      await eventually(() => cacheMatchesServer(informer));

      expect(events.sort()).toEqual(['add new', 'delete vanish', 'update change']);
      expect(server.requestCount(CM_PATH, 'GET') - watchRequests().length).toBe(2);
    });

    it('relists after an HTTP 410 on the watch', async () => {
      await create('a');
      const { informer } = await configMapInformer();

      server.goneNextWatch({ path: CM_PATH, asEvent: false });
      server.closeWatches();
      await eventually(() => (informer.stats.relists === 1 ? true : undefined));
      await create('b');

      await eventually(() => cacheMatchesServer(informer));
      expect(informer.keys().sort()).toEqual([`${NS}/a`, `${NS}/b`]);
    });

    it('resumes from the last resourceVersion after closeWatches(), without losing an event and without a relist', async () => {
      await create('a');
      const { informer, events } = await configMapInformer();
      await create('b');
      await eventually(() => (informer.get(`${NS}/b`) ? true : undefined));
      const seen = informer.lastResourceVersion;
      events.length = 0;

      server.delayRequests(500, { path: CM_PATH, method: 'GET', count: 1 });
      server.closeWatches();
      await update('a', { v: '2' });
      await remove('b');
      await create('c');
      await eventually(() => cacheMatchesServer(informer));

      expect(events).toEqual(['update a', 'delete b', 'add c']);
      expect(informer.stats.lists).toBe(1);
      expect(watchRequests().at(-1)?.query.resourceVersion).toBe(seen);
    });

    it('retries a watch that fails with 500 after a backoff and catches up', async () => {
      const { informer } = await configMapInformer();
      server.failNext(CM_PATH, 500, { method: 'GET', count: 2 });
      server.closeWatches();
      await create('during');

      await eventually(() => (informer.get(`${NS}/during`) ? true : undefined));
      expect(informer.stats.failures).toBeGreaterThanOrEqual(2);
      expect(informer.stats.lists).toBe(1);
    });

    it('keeps its attempts bounded while the API server is offline, and catches up once it is back', async () => {
      const { informer } = await configMapInformer();
      const attempts = (): number => informer.stats.lists + informer.stats.watches;
      const before = attempts();

      await server.goOffline();
      server.seed({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'offline', namespace: NS },
      });
      await sleep(3000);
      const during = attempts() - before;
      await server.goOnline();

      // Backoff 50 ms doubling to 400 ms, equal jitter: 4 attempts while it grows, then at least
      // 200 ms apart, so at most 4 + 3000 / 200 = 19 in 3 s (a fixed 50 ms retry would make 60).
      expect(during).toBeGreaterThanOrEqual(3);
      expect(during).toBeLessThanOrEqual(19);
      await eventually(() => (informer.get(`${NS}/offline`) ? true : undefined));
      expect(cacheMatchesServer(informer)).toBe(true);
    });

    it('keeps its watch requests bounded while the API server answers every watch with 503', async () => {
      const { informer } = await configMapInformer();
      const before = server.requestCount(CM_PATH, 'GET');

      server.failNext(CM_PATH, 503, { method: 'GET', count: 1000 });
      server.closeWatches();
      await sleep(3000);

      const during = server.requestCount(CM_PATH, 'GET') - before;
      expect(during).toBeGreaterThanOrEqual(3);
      expect(during).toBeLessThanOrEqual(19);
      expect(informer.hasSynced).toBe(true);
    });

    it('ends each watch at its lifetime (the server’s timeoutSeconds) and starts the next from where it was', async () => {
      const { informer } = await configMapInformer({
        watchLifetimeMs: 1000,
        watchLifetimeJitter: 0,
      });
      await eventually(() => (watchRequests().length >= 2 ? true : undefined), 5000);
      await create('between');
      await eventually(() => (watchRequests().length >= 3 ? true : undefined), 5000);

      expect(watchRequests().every((r) => r.query.timeoutSeconds === '1')).toBe(true);
      const rvs = watchRequests().map((r) => Number(r.query.resourceVersion));
      expect(rvs).toEqual([...rvs].sort((a, b) => a - b));
      expect(informer.stats.lifetimeEnds).toBeGreaterThanOrEqual(2);
      expect(informer.stats.lists).toBe(1);
      expect(informer.get(`${NS}/between`)).toBeDefined();
    });
  });

  describe(LeaderElector.name, () => {
    const timings = { leaseDurationMs: 2000, renewDeadlineMs: 1200, retryPeriodMs: 250 };

    /** An elector that records when it led, in wall-clock ms. */
    function candidate(identity: string, url = server.url, options: Partial<typeof timings> = {}) {
      const elector = new LeaderElector({
        store: new KubeLeaseStore(clientFor(url)),
        namespace: NS,
        name: LEASE,
        identity,
        ...timings,
        ...options,
      });
      const terms: Array<{ from: number; to?: number; signal: AbortSignal }> = [];
      elector.start({
        onStartedLeading: (signal) => terms.push({ from: Date.now(), signal }),
        onStoppedLeading: () => {
          const term = terms.at(-1);
          if (term) term.to = Date.now();
        },
      });
      stops.push(() => elector.stop());
      return { elector, terms };
    }

    const lease = () => server.object('coordination.k8s.io/v1', 'leases', NS, LEASE);

    it('of two electors on one Lease exactly one leads, and it keeps renewing the Lease', async () => {
      const a = candidate('a');
      const b = candidate('b');
      await eventually(() => (a.elector.isLeader || b.elector.isLeader ? true : undefined));
      const renewals = server.requestCount(LEASE_PATH, 'PUT');
      for (let i = 0; i < 30; i++) {
        expect([a, b].filter((c) => c.elector.isLeader)).toHaveLength(1);
        await sleep(50);
      }
      const leader = a.elector.isLeader ? a : b;
      expect(lease()?.spec).toMatchObject({
        holderIdentity: leader.elector.identity,
        leaseDurationSeconds: 2,
      });
      expect(server.requestCount(LEASE_PATH, 'PUT')).toBeGreaterThan(renewals);
      expect(leader.terms).toHaveLength(1);
    });

    it('a leader whose requests stall stops leading by its renew deadline; the other takes over only after the Lease expired', async () => {
      const proxy = await StallingProxy.start(server.port);
      stops.push(() => proxy.stop());
      const a = candidate('a', proxy.url);
      await eventually(() => (a.elector.isLeader ? true : undefined));
      const b = candidate('b');
      await sleep(600);
      expect(b.elector.isLeader).toBe(false);

      proxy.stall();
      const stalledAt = Date.now();
      const renewTime = (): number =>
        Date.parse(String((lease()?.spec as { renewTime?: string } | undefined)?.renewTime));
      const lastRenewal = renewTime();
      await eventually(() => (b.elector.isLeader ? true : undefined), 10_000);

      const [aTerm] = a.terms;
      const [bTerm] = b.terms;
      expect(aTerm?.to).toBeDefined();
      expect(aTerm?.signal.aborted).toBe(true);
      expect(a.elector.isLeader).toBe(false);
      // Never two leaders: a stopped before b started, and b waited for the expiry.
      expect(aTerm!.to!).toBeLessThanOrEqual(bTerm!.from);
      expect(bTerm!.from).toBeGreaterThanOrEqual(lastRenewal + timings.leaseDurationMs);
      expect(aTerm!.to!).toBeGreaterThanOrEqual(stalledAt);
      expect(lease()?.spec).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
      expect(renewTime()).toBeGreaterThan(lastRenewal);
    });

    it('a leader that stops releases the Lease, and the other takes over before it would have expired', async () => {
      const slow = { leaseDurationMs: 10_000, renewDeadlineMs: 5000, retryPeriodMs: 250 };
      const a = candidate('a', server.url, slow);
      await eventually(() => (a.elector.isLeader ? true : undefined));
      const b = candidate('b', server.url, slow);
      await sleep(600);
      const renewedAt = Date.parse(
        String((lease()?.spec as { renewTime?: string } | undefined)?.renewTime),
      );

      await a.elector.stop();
      expect(lease()?.spec).not.toHaveProperty('holderIdentity', 'a');
      await eventually(() => (b.elector.isLeader ? true : undefined), 5000);

      expect(b.terms[0]!.from).toBeLessThan(renewedAt + slow.leaseDurationMs);
      expect(a.terms[0]?.signal.aborted).toBe(true);
    });
  });

  describe(OperatorRuntime.name, () => {
    it('reconciles on the leader only, and the standby takes over every key when the leader stops', async () => {
      await create('one');
      await create('two');
      const runtimes = ['a', 'b'].map((identity) => {
        const reconciled: string[] = [];
        const runtime = new OperatorRuntime({
          reconcile: (key) => {
            reconciled.push(key);
            return Promise.resolve();
          },
          elector: new LeaderElector({
            store: new KubeLeaseStore(clientFor()),
            namespace: NS,
            name: LEASE,
            identity,
            leaseDurationMs: 2000,
            renewDeadlineMs: 1200,
            retryPeriodMs: 250,
          }),
        }).watch(
          new Informer(
            KubeListWatch.forClient<ConfigMap>(clientFor(), {
              group: '',
              version: 'v1',
              plural: 'configmaps',
              namespace: NS,
            }),
          ),
        );
        runtime.start();
        stops.push(() => runtime.stop());
        return { runtime, reconciled };
      });
      await eventually(() => (runtimes.some((r) => r.runtime.isRunning) ? true : undefined));
      const leader = runtimes.find((r) => r.runtime.isRunning)!;
      const standby = runtimes.find((r) => r !== leader)!;
      await create('three');
      await eventually(() => (leader.reconciled.length >= 3 ? true : undefined));

      expect(leader.reconciled.sort()).toEqual([`${NS}/one`, `${NS}/three`, `${NS}/two`]);
      expect(standby.reconciled).toEqual([]);

      await leader.runtime.stop();
      await eventually(() => (standby.reconciled.length >= 3 ? true : undefined), 5000);
      expect(standby.reconciled.sort()).toEqual([`${NS}/one`, `${NS}/three`, `${NS}/two`]);
    });
  });
});
