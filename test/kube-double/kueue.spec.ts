import { createHash } from 'node:crypto';
import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, k8s, kubeConfigFor, merge } from '../support/kube/client.js';
import { FakeKueue } from '../support/kube/kueue.js';

// The fake Kueue (test/support/kube/kueue.ts) over real HTTP: Jobs made as kiln makes them in
// KILN_ADMISSION=kueue mode (suspended, with the queue-name label), run by the double's Job
// controller and kubelet, admitted by ClusterQueue quota.

const NS = 'builds';
const KUEUE = { group: 'kueue.x-k8s.io', version: 'v1beta1' };
const API_VERSION = 'kueue.x-k8s.io/v1beta1';
const QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';
const IMAGE = 'registry.example/kaniko@sha256:1111';
const HANGS = 'registry.example/hangs@sha256:2222';
const FIRST = 'registry.example/first@sha256:3333';
const TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

type Condition = {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration: number;
};
type Quota = { cpu?: string; memory?: string; pods?: number };

const flavor = (name = 'default', spec: object = {}) => ({
  apiVersion: API_VERSION,
  kind: 'ResourceFlavor',
  metadata: { name },
  spec,
});

const clusterQueue = (name: string, quota: Quota, spec: object = {}) => {
  const covered = Object.keys(quota);
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterQueue',
    metadata: { name },
    spec: {
      namespaceSelector: {},
      resourceGroups: [
        {
          coveredResources: covered,
          flavors: [
            {
              name: 'default',
              resources: Object.entries(quota).map(([resource, nominalQuota]) => ({
                name: resource,
                nominalQuota,
              })),
            },
          ],
        },
      ],
      ...spec,
    },
  };
};

const localQueue = (name: string, cq: string) => ({
  apiVersion: API_VERSION,
  kind: 'LocalQueue',
  metadata: { name, namespace: NS },
  spec: { clusterQueue: cq },
});

/** A build Job as kiln makes it in kueue mode: suspended, naming its LocalQueue. */
const buildJob = (
  name: string,
  queue: string | undefined,
  options: { image?: string; cpu?: string; suspend?: boolean } = {},
): k8s.V1Job => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name, ...(queue !== undefined ? { labels: { [QUEUE_LABEL]: queue } } : {}) },
  spec: {
    backoffLimit: 0,
    ...(options.suspend !== undefined ? { suspend: options.suspend } : { suspend: true }),
    template: {
      spec: {
        restartPolicy: 'Never',
        containers: [
          {
            name: 'build',
            image: options.image ?? IMAGE,
            resources: { requests: { cpu: options.cpu ?? '500m', memory: '256Mi' } },
          },
        ],
      },
    },
  },
});

/** Kueue's name for a Job's Workload, computed here as jobframework/workload_names.go does. */
const expectedWorkloadName = (job: string, uid: string): string =>
  `job-${job}-${createHash('sha1').update(`Job\nbatch\n${job}\n${uid}`).digest('hex').slice(0, 5)}`;

describe(`${FakeKueue.name}: Kueue v1beta1 in the API server double`, () => {
  let server: KubeApiServer;
  let custom: k8s.CustomObjectsApi;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;
  let releaseFirst: () => void;

  beforeEach(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS], kueue: true });
    const config = kubeConfigFor(server.url, NS);
    custom = config.makeApiClient(k8s.CustomObjectsApi);
    batch = config.makeApiClient(k8s.BatchV1Api);
    core = config.makeApiClient(k8s.CoreV1Api);
    // IMAGE builds at once, HANGS until its pod is deleted, FIRST until the test releases it.
    const released = new Promise<void>((resolve) => (releaseFirst = resolve));
    server.kubelet.script(IMAGE, { lines: ['building'] });
    server.kubelet.script(HANGS, { hang: true });
    server.kubelet.script(FIRST, {
      lines: ['first'],
      run: async () => {
        await released;
        return { exitCode: 0 };
      },
    });
  });

  afterEach(async () => {
    releaseFirst();
    // The API server refused none of the fake Kueue's writes.
    expect(server.kueue?.refusals).toEqual([]);
    await server.stop();
  });

  const createCluster = (body: object, plural: string) =>
    custom.createClusterCustomObject({ ...KUEUE, plural, body });
  const createLocalQueue = (name: string, cq: string) =>
    custom.createNamespacedCustomObject({
      ...KUEUE,
      namespace: NS,
      plural: 'localqueues',
      body: localQueue(name, cq),
    });
  /** A ResourceFlavor `default`, a ClusterQueue `cq` with this quota, a LocalQueue `lq` on it. */
  const queues = async (quota: Quota, spec: object = {}): Promise<void> => {
    await createCluster(flavor(), 'resourceflavors');
    await createCluster(clusterQueue('cq', quota, spec), 'clusterqueues');
    await createLocalQueue('lq', 'cq');
  };

  const readJob = (name: string) => batch.readNamespacedJob({ namespace: NS, name });
  const workloads = async (): Promise<any[]> =>
    (await custom.listNamespacedCustomObject({ ...KUEUE, namespace: NS, plural: 'workloads' }))
      .items;
  /** The Workload of a Job, once it satisfies `check`. */
  const untilWorkload = (job: string, check: (wl: any) => boolean = () => true) =>
    eventually(async () => {
      const wl = (await workloads()).find((w) => w.metadata.ownerReferences?.[0]?.name === job);
      return wl !== undefined && check(wl) ? wl : undefined;
    });
  const condition = (wl: any, type: string): Condition | undefined =>
    (wl.status?.conditions ?? []).find((c: Condition) => c.type === type);
  const brief = (c: Condition | undefined) =>
    c && { type: c.type, status: c.status, reason: c.reason, message: c.message };
  const isTrue = (type: string) => (wl: any) => condition(wl, type)?.status === 'True';
  const untilJob = (name: string, check: (job: k8s.V1Job) => boolean) =>
    eventually(async () => {
      const job = await readJob(name);
      return check(job) ? job : undefined;
    });
  const jobDone = (job: k8s.V1Job) =>
    (job.status?.conditions ?? []).some((c) => c.type === 'Complete' && c.status === 'True');
  const podsOf = async (job: string) =>
    (await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job}` })).items;
  const eventsAbout = async (name: string) =>
    (
      await core.listNamespacedEvent({
        namespace: NS,
        fieldSelector: `involvedObject.name=${name}`,
      })
    ).items.map((e) => ({ type: e.type, reason: e.reason, message: e.message }));
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('admits one Job at a time under a pods quota of 1: the second stays Pending until the first completes, then runs', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 1 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('first', 'lq', { image: FIRST }),
    });
    await batch.createNamespacedJob({ namespace: NS, body: buildJob('second', 'lq') });

    const first = await untilWorkload('first', isTrue('Admitted'));
    expect(brief(condition(first, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'True',
      reason: 'QuotaReserved',
      message: 'Quota reserved in ClusterQueue cq',
    });
    expect(brief(condition(first, 'Admitted'))).toEqual({
      type: 'Admitted',
      status: 'True',
      reason: 'Admitted',
      message: 'The workload is admitted',
    });
    await untilJob('first', (job) => job.spec?.suspend === false);
    await eventually(async () =>
      (await podsOf('first')).some((p) => p.status?.phase === 'Running') ? true : undefined,
    );

    const second = await untilWorkload(
      'second',
      (wl) => condition(wl, 'QuotaReserved') !== undefined,
    );
    expect(brief(condition(second, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'False',
      reason: 'Pending',
      message:
        "couldn't assign flavors to pod set main: insufficient unused quota for pods in flavor default, 1 more needed",
    });
    expect(condition(second, 'Admitted')).toBeUndefined();
    expect(second.status.admission).toBeUndefined();
    expect(second.status.resourceRequests).toEqual([
      { name: 'main', resources: { cpu: '500m', memory: '256Mi', pods: '1' } },
    ]);
    expect((await readJob('second')).spec?.suspend).toBe(true);
    expect(await podsOf('second')).toEqual([]);
    expect(await eventsAbout(second.metadata.name)).toContainEqual({
      type: 'Warning',
      reason: 'Pending',
      message:
        "couldn't assign flavors to pod set main: insufficient unused quota for pods in flavor default, 1 more needed",
    });

    releaseFirst();
    await untilJob('first', jobDone);
    const finished = await untilWorkload(
      'first',
      (wl) => isTrue('Finished')(wl) && wl.metadata.finalizers === undefined,
    );
    expect(brief(condition(finished, 'Finished'))).toEqual({
      type: 'Finished',
      status: 'True',
      reason: 'Succeeded',
      message: 'Reached expected number of succeeded pods',
    });
    // Finishing frees the quota but keeps the record of the admission.
    expect(finished.status.admission.clusterQueue).toBe('cq');
    expect(isTrue('Admitted')(finished)).toBe(true);

    const admitted = await untilWorkload('second', isTrue('Admitted'));
    expect(brief(condition(admitted, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'True',
      reason: 'QuotaReserved',
      message: 'Quota reserved in ClusterQueue cq',
    });
    await untilJob('second', jobDone);
    expect(await eventsAbout('second')).toEqual(
      expect.arrayContaining([
        {
          type: 'Normal',
          reason: 'CreatedWorkload',
          message: `Created Workload: ${NS}/${admitted.metadata.name}`,
        },
        { type: 'Normal', reason: 'Started', message: 'Admitted by clusterQueue cq' },
        {
          type: 'Normal',
          reason: 'FinishedWorkload',
          message: `Workload '${NS}/${admitted.metadata.name}' is declared finished`,
        },
      ]),
    );
  });

  it('names the Workload after its Job, owns it by the Job and copies the pod template as pod set main', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 5 });
    const created = await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('shape', 'lq'),
    });
    const uid = created.metadata?.uid ?? '';
    const wl = await untilWorkload('shape', isTrue('Admitted'));

    expect(wl.metadata.name).toBe(expectedWorkloadName('shape', uid));
    expect(wl.metadata.labels).toEqual({ 'kueue.x-k8s.io/job-uid': uid });
    expect(wl.metadata.finalizers).toEqual(['kueue.x-k8s.io/resource-in-use']);
    expect(wl.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: 'shape',
        uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    // The Job as stored, in JSON, rather than as client-node's typed model.
    const stored = await (
      await fetch(`${server.url}/apis/batch/v1/namespaces/${NS}/jobs/shape`)
    ).json();
    const template = stored.spec.template;
    expect(wl.spec).toEqual({
      active: true,
      podSets: [
        {
          name: 'main',
          count: 1,
          template: {
            // The Job controller's own labels stay behind, but batch.kubernetes.io/job-name.
            metadata: { labels: { 'batch.kubernetes.io/job-name': 'shape' } },
            spec: template.spec,
          },
        },
      ],
      priority: 0,
      priorityClassSource: '',
      queueName: 'lq',
    });
    expect(wl.status.admission).toEqual({
      clusterQueue: 'cq',
      podSetAssignments: [
        {
          name: 'main',
          flavors: { cpu: 'default', memory: 'default', pods: 'default' },
          resourceUsage: { cpu: '500m', memory: '256Mi', pods: '1' },
          count: 1,
        },
      ],
    });
    for (const c of wl.status.conditions as Condition[]) {
      expect(c.lastTransitionTime).toMatch(TIME);
      expect(c.observedGeneration).toBe(1);
    }
    expect(wl.status.conditions.map((c: Condition) => c.type)).toEqual([
      'QuotaReserved',
      'Admitted',
    ]);
    expect(await eventsAbout(wl.metadata.name)).toEqual([
      {
        type: 'Normal',
        reason: 'QuotaReserved',
        message: expect.stringMatching(
          /^Quota reserved in ClusterQueue cq, wait time since queued was \d+s$/,
        ),
      },
      {
        type: 'Normal',
        reason: 'Admitted',
        message: 'Admitted by ClusterQueue cq, wait time since reservation was 0s',
      },
    ]);

    // The Job is started as Kueue starts it: unsuspended, its pods labelled with their pod set.
    const started = await untilJob('shape', (job) => job.spec?.suspend === false);
    expect(started.spec?.template.metadata?.labels).toMatchObject({
      'kueue.x-k8s.io/podset': 'main',
    });
    await untilJob('shape', jobDone);
  });

  it('keeps a Job whose LocalQueue does not exist suspended, its Workload Inadmissible, and admits it once the LocalQueue exists', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 5 });
    await batch.createNamespacedJob({ namespace: NS, body: buildJob('lost', 'nowhere') });
    const wl = await untilWorkload('lost', (w) => condition(w, 'QuotaReserved') !== undefined);
    expect(brief(condition(wl, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'False',
      reason: 'Inadmissible',
      message: "LocalQueue nowhere doesn't exist",
    });
    expect(condition(wl, 'QuotaReserved')?.lastTransitionTime).toMatch(TIME);
    expect(wl.status.admission).toBeUndefined();
    await sleep(200);
    expect((await readJob('lost')).spec?.suspend).toBe(true);
    expect(await podsOf('lost')).toEqual([]);

    await createLocalQueue('nowhere', 'cq');
    await untilWorkload('lost', isTrue('Admitted'));
    await untilJob('lost', jobDone);
  });

  it('says why a Workload waits: a stopped ClusterQueue, a resource it does not cover, a request over its quota', async () => {
    await queues({ cpu: '1', pods: 5 }, { stopPolicy: 'Hold' });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('held', 'lq', { cpu: '250m' }),
    });
    const held = await untilWorkload('held', (w) => condition(w, 'QuotaReserved') !== undefined);
    expect(brief(condition(held, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'False',
      reason: 'Inadmissible',
      message: 'ClusterQueue cq is inactive',
    });
    const cq = await eventually(async () => {
      const read: any = await custom.getClusterCustomObject({
        ...KUEUE,
        plural: 'clusterqueues',
        name: 'cq',
      });
      return read.status?.conditions !== undefined ? read : undefined;
    });
    expect(brief(cq.status.conditions[0])).toEqual({
      type: 'Active',
      status: 'False',
      reason: 'Stopped',
      message: "Can't admit new workloads: is stopped.",
    });

    // The job asks for memory, which the ClusterQueue does not cover.
    await custom.patchClusterCustomObject(
      { ...KUEUE, plural: 'clusterqueues', name: 'cq', body: { spec: { stopPolicy: 'None' } } },
      merge,
    );
    const uncovered = await untilWorkload(
      'held',
      (w) => condition(w, 'QuotaReserved')?.reason === 'Pending',
    );
    expect(condition(uncovered, 'QuotaReserved')?.message).toBe(
      "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue",
    );

    await batch.deleteNamespacedJob({
      namespace: NS,
      name: 'held',
      propagationPolicy: 'Background',
    });
    await custom.patchClusterCustomObject(
      {
        ...KUEUE,
        plural: 'clusterqueues',
        name: 'cq',
        body: {
          spec: {
            resourceGroups: [
              {
                coveredResources: ['cpu', 'memory', 'pods'],
                flavors: [
                  {
                    name: 'default',
                    resources: [
                      { name: 'cpu', nominalQuota: '1' },
                      { name: 'memory', nominalQuota: '1Gi' },
                      { name: 'pods', nominalQuota: 5 },
                    ],
                  },
                ],
              },
            ],
          },
        },
      },
      merge,
    );
    await batch.createNamespacedJob({ namespace: NS, body: buildJob('huge', 'lq', { cpu: '2' }) });
    const huge = await untilWorkload('huge', (w) => condition(w, 'QuotaReserved') !== undefined);
    expect(brief(condition(huge, 'QuotaReserved'))).toEqual({
      type: 'QuotaReserved',
      status: 'False',
      reason: 'Pending',
      message:
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)",
    });
  });

  it('admits past a Workload that cannot fit under BestEffortFIFO, and not under StrictFIFO', async () => {
    await createCluster(flavor(), 'resourceflavors');
    await createCluster(
      clusterQueue('best', { cpu: '1', memory: '8Gi', pods: 5 }),
      'clusterqueues',
    );
    await createCluster(
      clusterQueue(
        'strict',
        { cpu: '1', memory: '8Gi', pods: 5 },
        { queueingStrategy: 'StrictFIFO' },
      ),
      'clusterqueues',
    );
    await createLocalQueue('best', 'best');
    await createLocalQueue('strict', 'strict');
    for (const queue of ['best', 'strict']) {
      await batch.createNamespacedJob({
        namespace: NS,
        body: buildJob(`${queue}-big`, queue, { cpu: '2' }),
      });
      await batch.createNamespacedJob({ namespace: NS, body: buildJob(`${queue}-small`, queue) });
    }

    await untilWorkload('best-small', isTrue('Admitted'));
    await untilJob('best-small', jobDone);
    const big = await untilWorkload(
      'strict-big',
      (w) => condition(w, 'QuotaReserved') !== undefined,
    );
    expect(brief(condition(big, 'QuotaReserved'))?.reason).toBe('Pending');
    await sleep(200);
    // StrictFIFO: the head that does not fit blocks the queue; the one behind it is not tried.
    const blocked = await untilWorkload('strict-small');
    expect(blocked.status?.conditions).toBeUndefined();
    expect((await readJob('strict-small')).spec?.suspend).toBe(true);
  });

  it("marks a failed Job's Workload Finished with reason Failed and the Job's message", async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 1 });
    server.kubelet.script('registry.example/fails@sha256:4444', { exitCode: 1 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('broken', 'lq', { image: 'registry.example/fails@sha256:4444' }),
    });
    const wl = await untilWorkload('broken', isTrue('Finished'));
    expect(brief(condition(wl, 'Finished'))).toEqual({
      type: 'Finished',
      status: 'True',
      reason: 'Failed',
      message: 'Job has reached the specified backoff limit',
    });
  });

  it('frees the quota of a deleted Job: its Workload goes with it and the next one is admitted', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 1 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('stuck', 'lq', { image: HANGS }),
    });
    await untilWorkload('stuck', isTrue('Admitted'));
    await batch.createNamespacedJob({ namespace: NS, body: buildJob('next', 'lq') });
    const waiting = await untilWorkload('next', (w) => condition(w, 'QuotaReserved') !== undefined);
    expect(condition(waiting, 'QuotaReserved')?.reason).toBe('Pending');

    const stuck = (await workloads()).find((w) => w.metadata.ownerReferences[0].name === 'stuck');
    await batch.deleteNamespacedJob({
      namespace: NS,
      name: 'stuck',
      propagationPolicy: 'Background',
    });
    await eventually(async () =>
      (await workloads()).some((w) => w.metadata.name === stuck.metadata.name) ? undefined : true,
    );
    await untilWorkload('next', isTrue('Admitted'));
    await untilJob('next', jobDone);
  });

  it('keeps the ClusterQueue and LocalQueue status: Active, pending, reserving and admitted Workloads, flavor usage', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 1 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('one', 'lq', { image: HANGS }),
    });
    await untilWorkload('one', isTrue('Admitted'));
    await batch.createNamespacedJob({ namespace: NS, body: buildJob('two', 'lq') });

    const usage = (withBorrowed: boolean) => [
      {
        name: 'default',
        resources: [
          { name: 'cpu', total: '500m', ...(withBorrowed ? { borrowed: '0' } : {}) },
          { name: 'memory', total: '256Mi', ...(withBorrowed ? { borrowed: '0' } : {}) },
          { name: 'pods', total: '1', ...(withBorrowed ? { borrowed: '0' } : {}) },
        ],
      },
    ];
    const cq = await eventually(async () => {
      const read: any = await custom.getClusterCustomObject({
        ...KUEUE,
        plural: 'clusterqueues',
        name: 'cq',
      });
      return read.status?.pendingWorkloads === 1 ? read : undefined;
    });
    expect({ ...cq.status, conditions: cq.status.conditions.map(brief) }).toEqual({
      pendingWorkloads: 1,
      reservingWorkloads: 1,
      admittedWorkloads: 1,
      flavorsReservation: usage(true),
      flavorsUsage: usage(true),
      conditions: [
        { type: 'Active', status: 'True', reason: 'Ready', message: 'Can admit new workloads' },
      ],
    });
    const lq: any = await custom.getNamespacedCustomObject({
      ...KUEUE,
      namespace: NS,
      plural: 'localqueues',
      name: 'lq',
    });
    expect({ ...lq.status, conditions: lq.status.conditions.map(brief) }).toEqual({
      pendingWorkloads: 1,
      reservingWorkloads: 1,
      admittedWorkloads: 1,
      flavorsReservation: usage(false),
      flavorUsage: usage(false),
      flavors: [{ name: 'default', resources: ['cpu', 'memory', 'pods'] }],
      conditions: [
        {
          type: 'Active',
          status: 'True',
          reason: 'Ready',
          message: 'Can submit new workloads to localQueue',
        },
      ],
    });
  });

  it('serves the pending Workloads of a LocalQueue with their positions through the visibility API', async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 1 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('running', 'lq', { image: HANGS }),
    });
    await untilWorkload('running', isTrue('Admitted'));
    for (const name of ['queued-b', 'queued-a'])
      await batch.createNamespacedJob({ namespace: NS, body: buildJob(name, 'lq') });
    const b = await untilWorkload('queued-b', (w) => condition(w, 'QuotaReserved') !== undefined);
    const a = await untilWorkload('queued-a', (w) => condition(w, 'QuotaReserved') !== undefined);

    const path = `/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/${NS}/localqueues/lq/pendingworkloads`;
    const response = await fetch(`${server.url}${path}`);
    expect(response.status).toBe(200);
    const summary = await response.json();
    const item = (wl: any, position: number) => ({
      metadata: {
        name: wl.metadata.name,
        namespace: NS,
        creationTimestamp: wl.metadata.creationTimestamp,
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name: wl.metadata.ownerReferences[0].name,
            uid: wl.metadata.ownerReferences[0].uid,
          },
        ],
      },
      priority: 0,
      localQueueName: 'lq',
      positionInClusterQueue: position,
      positionInLocalQueue: position,
    });
    // First come, first served: b was created before a.
    expect(summary).toEqual({
      kind: 'PendingWorkloadsSummary',
      apiVersion: 'visibility.kueue.x-k8s.io/v1beta1',
      metadata: {},
      items: [item(b, 0), item(a, 1)],
    });
    const paged = await (await fetch(`${server.url}${path}?offset=1&limit=1`)).json();
    expect(paged.items).toEqual([item(a, 1)]);
    const inClusterQueue = await (
      await fetch(
        `${server.url}/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/cq/pendingworkloads`,
      )
    ).json();
    expect(inClusterQueue.items).toEqual([item(b, 0), item(a, 1)]);

    const missing = await fetch(
      `${server.url}/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/${NS}/localqueues/nope/pendingworkloads`,
    );
    expect(missing.status).toBe(404);
    expect((await missing.json()).message).toBe(
      'localqueue.visibility.kueue.x-k8s.io "nope" not found',
    );
  });

  it("suspends a Job at create that names a queue, or that the namespace's LocalQueue default takes, as Kueue's Job webhook does", async () => {
    await queues({ cpu: '4', memory: '8Gi', pods: 5 });
    const named = await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('eager', 'lq', { suspend: false }),
    });
    expect(named.spec?.suspend).toBe(true);
    const plain = await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('plain', undefined, { suspend: false }),
    });
    expect(plain.spec?.suspend).toBe(false);
    expect(plain.metadata?.labels?.[QUEUE_LABEL]).toBeUndefined();

    await createLocalQueue('default', 'cq');
    const defaulted = await batch.createNamespacedJob({
      namespace: NS,
      body: buildJob('defaulted', undefined, { suspend: false }),
    });
    expect(defaulted.metadata?.labels?.[QUEUE_LABEL]).toBe('default');
    expect(defaulted.spec?.suspend).toBe(true);
  });
});
