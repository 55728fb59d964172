import { KubeClient } from '../src/kubernetes/kube-client.js';
import { KubeLeaseStore } from '../src/kubernetes/leases.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import { COLLECTIONS, NS, OperatorGround, until } from './support/operator-ground.js';
import { type Family, scrape, sumOf } from './support/prometheus-text.js';
import type { TestApp } from './support/test-app.js';

noteDoubleOnly('the operator’s metrics');

/** The operator's one controller: the `controller` label of its reconcile and queue metrics. */
const CONTROLLER = { controller: 'builds' };
const LEASE = 'kiln-operator';

type Scrape = Map<string, Family>;

/** A scrape of a kiln's /metrics over HTTP (an operator's, or the API's). */
const metricsOf = (kiln: TestApp): Promise<Scrape> => scrape(`${kiln.baseUrl}/metrics`);

/** Requests to the API server counted with this verb and a status code matching `code`. */
function requests(families: Scrape, verb: string, code: RegExp | string): number {
  const family = families.get('kiln_kube_api_requests_total');
  return (family?.samples ?? [])
    .filter((s) => s.labels['verb'] === verb)
    .filter((s) =>
      typeof code === 'string' ? s.labels['code'] === code : code.test(s.labels['code'] ?? ''),
    )
    .reduce((total, s) => total + s.value, 0);
}

const TWO_XX = /^2\d\d$/;

const reconciles = (families: Scrape, result: string): number =>
  sumOf(families, 'kiln_operator_reconciles_total', { ...CONTROLLER, result });

const restarts = (families: Scrape, resource: string): number =>
  sumOf(families, 'kiln_operator_watch_restarts_total', { resource });

/**
 * The operator's and the Kubernetes client's metrics (docs/operations.md, "Operator metrics"),
 * scraped over HTTP from operator-only kilns (KILN_ROLE=operator) running against the Kubernetes
 * API server double, with faults through the double's hooks. Every check compares two scrapes.
 */
describe('the operator’s metrics', () => {
  let ground: OperatorGround;

  beforeAll(async () => {
    ground = await OperatorGround.start('metrics-operator');
  });

  afterEach(() => ground.reset());

  afterAll(() => ground.close());

  /** An operator-only kiln once it leads and its workers run. */
  async function leadingOperator(): Promise<TestApp> {
    const operator = await ground.startOperator();
    await until('the operator to lead', () => ground.runtimeOf(operator).isRunning);
    return operator;
  }

  /** Scrapes `kiln` until `probe` holds for the scrape, and returns that scrape. */
  function scrapeUntil(kiln: TestApp, what: string, probe: (s: Scrape) => boolean) {
    return until(what, async () => {
      const families = await metricsOf(kiln);
      return probe(families) ? families : undefined;
    });
  }

  it('counts an operator build to success: reconciles, their duration, the queue’s latency, the API server requests, and the lead', async () => {
    ground.builder({ lines: 30, linesPerSecond: 300, printCrc: true });
    const apiBefore = await metricsOf(ground.api);
    // A fresh operator's registry starts at zero: the informers' first lists and watches (made
    // before it answers HTTP) count from there.
    const operator = await leadingOperator();
    const led = await metricsOf(operator);

    const id = await ground.startedBuild();
    expect((await ground.ended(id)).status).toBe('success');
    await ground.expectMirrored(id, 'success');
    const after = await scrapeUntil(
      operator,
      'the queue to drain',
      (s) =>
        sumOf(s, 'kiln_operator_workqueue_depth', CONTROLLER) === 0 &&
        reconciles(s, 'success') > reconciles(led, 'success'),
    );

    expect(sumOf(led, 'kiln_operator_leader')).toBe(1);
    expect(sumOf(after, 'kiln_operator_leader')).toBe(1);
    expect(reconciles(after, 'error')).toBe(0);
    // Every reconcile counted by its result is timed.
    expect(sumOf(after, 'kiln_operator_reconcile_duration_seconds_count', CONTROLLER)).toBe(
      ['success', 'requeue', 'error'].reduce((n, result) => n + reconciles(after, result), 0),
    );
    const moved = (name: string) => sumOf(after, name, CONTROLLER) - sumOf(led, name, CONTROLLER);
    expect(moved('kiln_operator_reconcile_duration_seconds_count')).toBeGreaterThan(0);
    expect(moved('kiln_operator_workqueue_latency_seconds_count')).toBeGreaterThan(0);
    const sent = (verb: string) => requests(after, verb, TWO_XX) - requests(led, verb, TWO_XX);
    // The Job, its ConfigMap and Secret, Events; the Build's status; the pod's log stream.
    expect(sent('create')).toBeGreaterThan(0);
    expect(sent('patch')).toBeGreaterThan(0);
    expect(sent('get')).toBeGreaterThan(0);
    // The caches of Builds, Jobs, Pods and Events: listed, then watched.
    expect(requests(after, 'list', TWO_XX)).toBeGreaterThanOrEqual(4);
    expect(requests(after, 'watch', TWO_XX)).toBeGreaterThanOrEqual(4);
    // The API's own client counts too: it wrote the Build resource.
    const apiAfter = await metricsOf(ground.api);
    expect(requests(apiAfter, 'create', TWO_XX) - requests(apiBefore, 'create', TWO_XX)).toBe(1);
  });

  it('counts the restarts of watches broken or answered 410 Gone, by resource, and the relists', async () => {
    const operator = await leadingOperator();
    await until('every informer to watch', () => ground.cluster.openWatches >= 4);
    const before = await metricsOf(operator);

    // The Jobs' next watch is refused with an HTTP 410; the Builds' gets a 410 ERROR event.
    ground.cluster.goneNextWatch({ path: COLLECTIONS.jobs, asEvent: false });
    ground.cluster.goneNextWatch({ path: COLLECTIONS.builds });
    ground.cluster.closeWatches();
    const after = await scrapeUntil(
      operator,
      'the watches to restart after the 410s',
      (s) => restarts(s, 'jobs') - restarts(before, 'jobs') >= 2,
    );
    await until('every informer to watch again', () => ground.cluster.openWatches >= 4);
    const settled = await scrapeUntil(
      operator,
      'the Builds’ watch to restart after its 410',
      (s) => restarts(s, 'builds') - restarts(before, 'builds') >= 2,
    );

    // Closed: one restart each; the 410 answers: one more each.
    expect(restarts(settled, 'pods') - restarts(before, 'pods')).toBeGreaterThanOrEqual(1);
    expect(restarts(settled, 'job-events') - restarts(before, 'job-events')).toBeGreaterThanOrEqual(
      1,
    );
    expect(requests(after, 'watch', '410') - requests(before, 'watch', '410')).toBe(1);
    // Each 410 relists its collection.
    expect(
      requests(settled, 'list', TWO_XX) - requests(before, 'list', TWO_XX),
    ).toBeGreaterThanOrEqual(2);
  });

  it('counts the API server’s 500s to writes by verb and code, and the reconciles that failed on them', async () => {
    ground.builder({ lines: 10, linesPerSecond: 200, printCrc: true });
    const operator = await leadingOperator();
    const before = await metricsOf(operator);

    ground.cluster.failNext(COLLECTIONS.jobs, 500, { method: 'POST', count: 2 });
    const id = await ground.startedBuild();
    expect((await ground.ended(id)).status).toBe('success');
    const after = await metricsOf(operator);

    expect(requests(after, 'create', '500') - requests(before, 'create', '500')).toBe(2);
    expect(reconciles(after, 'error') - reconciles(before, 'error')).toBe(2);
    expect(reconciles(after, 'success') - reconciles(before, 'success')).toBeGreaterThan(0);
  });

  it('counts the 409s of status writes as requeues, not errors', async () => {
    ground.builder({ lines: 10, linesPerSecond: 200, printCrc: true });
    const operator = await leadingOperator();
    const before = await metricsOf(operator);

    ground.cluster.failNext(
      /^\/apis\/kiln\.dev\/v1alpha1\/namespaces\/[^/]+\/builds\/[^/]+\/status$/,
      409,
      {
        method: 'PATCH',
        count: 3,
        reason: 'Conflict',
      },
    );
    const id = await ground.startedBuild();
    expect((await ground.ended(id)).status).toBe('success');
    await ground.expectMirrored(id, 'success');
    const after = await metricsOf(operator);

    // The three injected 409s, and any the double answers on its own to a write that raced a
    // newer resourceVersion (optimistic concurrency): each is a requeue, none an error.
    const conflicts = requests(after, 'patch', '409') - requests(before, 'patch', '409');
    expect(conflicts).toBeGreaterThanOrEqual(3);
    expect(reconciles(after, 'requeue') - reconciles(before, 'requeue')).toBeGreaterThanOrEqual(
      conflicts,
    );
    expect(reconciles(after, 'error') - reconciles(before, 'error')).toBe(0);
  });

  it('reports the lead lost when another holder takes the Lease, and regained when it lapses', async () => {
    const operator = await leadingOperator();
    await scrapeUntil(operator, 'leader 1', (s) => sumOf(s, 'kiln_operator_leader') === 1);

    // Another identity writes the Lease as its own, for 3 s, as a replica that won it would.
    const leases = new KubeLeaseStore(
      KubeClient.connect({
        kind: 'server',
        server: ground.cluster.url,
        token: 'test',
        namespace: NS,
      }),
    );
    await until('the intruder to hold the Lease', async () => {
      const lease = await leases.get(NS, LEASE);
      if (lease === undefined) return false;
      const now = Date.now();
      return leases
        .update({
          ...lease,
          holderIdentity: 'intruder',
          leaseDurationSeconds: 3,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: (lease.leaseTransitions ?? 0) + 1,
        })
        .then(
          () => true,
          () => false, // 409: the operator renewed meanwhile; read again
        );
    });
    await scrapeUntil(operator, 'leader 0', (s) => sumOf(s, 'kiln_operator_leader') === 0);
    expect(ground.runtimeOf(operator).isLeader).toBe(false);

    await scrapeUntil(operator, 'leader 1 again', (s) => sumOf(s, 'kiln_operator_leader') === 1);
    expect((await leases.get(NS, LEASE))?.holderIdentity).not.toBe('intruder');
  });

  it('reports the keys waiting while the workers are busy, and a depth of 0 once the queue drains', async () => {
    ground.builder({ lines: 5, linesPerSecond: 100, printCrc: true });
    const operator = await ground.startOperator({ env: { KILN_OPERATOR_WORKERS: '1' } });
    await until('the operator to lead', () => ground.runtimeOf(operator).isRunning);
    const depth = (s: Scrape) => sumOf(s, 'kiln_operator_workqueue_depth', CONTROLLER);

    // The one worker waits on each status write while the other builds' keys queue up.
    const release = ground.cluster.delayRequests(1_500, { path: /\/builds\/[^/]+\/status$/ });
    ground.onReset(() => Promise.resolve(release()));
    const ids = [
      await ground.startedBuild(),
      await ground.startedBuild(),
      await ground.startedBuild(),
    ];
    await scrapeUntil(operator, 'keys to wait in the queue', (s) => depth(s) >= 1);

    release();
    for (const id of ids) expect((await ground.ended(id)).status).toBe('success');
    const drained = await scrapeUntil(operator, 'the queue to drain', (s) => depth(s) === 0);
    expect(depth(drained)).toBe(0);
  });
});
