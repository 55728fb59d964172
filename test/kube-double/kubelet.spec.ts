import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, expectStatus, k8s, kubeConfigFor, merge } from '../support/kube/client.js';
import { crcLine, summarize, verifyCrc } from '../support/kube/kubelet.js';

const NS = 'jobs';
const KANIKO = 'registry.example/kaniko@sha256:1111';
const GIT = 'registry.example/git@sha256:2222';

type Condition = { type: string; status: string; reason?: string; message?: string };

const jobBody = (
  name: string,
  options: {
    image?: string;
    init?: string[];
    spec?: Partial<k8s.V1JobSpec>;
  } = {},
): k8s.V1Job => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name },
  spec: {
    backoffLimit: 0,
    ...options.spec,
    template: {
      spec: {
        restartPolicy: 'Never',
        ...(options.init
          ? { initContainers: options.init.map((image, i) => ({ name: `init-${i}`, image })) }
          : {}),
        containers: [{ name: 'build', image: options.image ?? KANIKO }],
      },
    },
  },
});

describe(`${KubeApiServer.name} Job controller and kubelet`, () => {
  let server: KubeApiServer;
  let batch: k8s.BatchV1Api;
  let core: k8s.CoreV1Api;

  beforeEach(async () => {
    server = await KubeApiServer.start({ namespaces: ['default', NS] });
    const config = kubeConfigFor(server.url, NS);
    batch = config.makeApiClient(k8s.BatchV1Api);
    core = config.makeApiClient(k8s.CoreV1Api);
  });

  afterEach(async () => {
    await server.stop();
  });

  const readJob = (name: string): Promise<k8s.V1Job> =>
    batch.readNamespacedJob({ namespace: NS, name });
  const conditionsOf = (job: k8s.V1Job): Condition[] =>
    (job.status?.conditions ?? []).map(({ type, status, reason, message }) => ({
      type,
      status,
      ...(reason !== undefined ? { reason } : {}),
      ...(message !== undefined ? { message } : {}),
    }));
  const untilCondition = (name: string, type: string, timeoutMs = 5000): Promise<k8s.V1Job> =>
    eventually(async () => {
      const job = await readJob(name);
      return conditionsOf(job).some((c) => c.type === type && c.status === 'True')
        ? job
        : undefined;
    }, timeoutMs);
  const podsOf = async (job: string): Promise<k8s.V1Pod[]> =>
    (await core.listNamespacedPod({ namespace: NS, labelSelector: `job-name=${job}` })).items;

  it('runs a Job whose scripted image prints numbered lines to Complete, with the pod labelled and owned', async () => {
    server.kubelet.script(KANIKO, { lines: 50, linesPerSecond: 5000, printCrc: true });
    const created = await batch.createNamespacedJob({ namespace: NS, body: jobBody('ok') });
    const done = await untilCondition('ok', 'Complete');
    expect(conditionsOf(done)).toEqual([
      {
        type: 'SuccessCriteriaMet',
        status: 'True',
        reason: 'CompletionsReached',
        message: 'Reached expected number of succeeded pods',
      },
      {
        type: 'Complete',
        status: 'True',
        reason: 'CompletionsReached',
        message: 'Reached expected number of succeeded pods',
      },
    ]);
    expect(done.status).toMatchObject({ succeeded: 1, ready: 0, terminating: 0 });
    expect(done.status?.active).toBeUndefined();
    expect(done.status?.startTime).toBeInstanceOf(Date);
    expect(done.status?.completionTime).toBeInstanceOf(Date);

    const [pod, ...others] = await podsOf('ok');
    expect(others).toEqual([]);
    const uid = created.metadata?.uid ?? '';
    expect(pod?.metadata?.name).toMatch(/^ok-[a-z0-9]{5}$/);
    expect(pod?.metadata?.labels).toMatchObject({
      'batch.kubernetes.io/controller-uid': uid,
      'batch.kubernetes.io/job-name': 'ok',
      'controller-uid': uid,
      'job-name': 'ok',
    });
    expect(pod?.metadata?.ownerReferences).toEqual([
      {
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: 'ok',
        uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(pod?.spec?.nodeName).toBe('kiln-double-node');
    expect(pod?.status?.phase).toBe('Succeeded');
    const terminated = pod?.status?.containerStatuses?.[0]?.state?.terminated;
    expect(terminated).toMatchObject({ exitCode: 0, reason: 'Completed' });
    expect(terminated?.finishedAt).toBeInstanceOf(Date);

    const log = await core.readNamespacedPodLog({ namespace: NS, name: pod?.metadata?.name ?? '' });
    const lines = log.trimEnd().split('\n');
    expect(lines).toHaveLength(51);
    expect(lines[0]).toBe('line 000001 of 000050');
    expect(verifyCrc(lines)).toBe(true);
    expect(verifyCrc([...lines.slice(0, 10), ...lines.slice(11)])).toBe(false);
  });

  /** The whole log of the only pod of a finished Job. */
  const logOf = async (job: string): Promise<string> => {
    await untilCondition(job, 'Complete');
    const [pod] = await podsOf(job);
    return core.readNamespacedPodLog({ namespace: NS, name: pod?.metadata?.name ?? '' });
  };

  it('prints at a slow linesPerSecond as slowly as asked: line i at least i/rate after the first', async () => {
    server.kubelet.script(KANIKO, { lines: ['a', 'b', 'c', 'd'], linesPerSecond: 4 });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('slow') });
    await untilCondition('slow', 'Complete');
    const [pod] = await podsOf('slow');
    const log = await core.readNamespacedPodLog({
      namespace: NS,
      name: pod?.metadata?.name ?? '',
      timestamps: true,
    });
    const times = log
      .trim()
      .split('\n')
      .map((line) => Date.parse(line.slice(0, line.indexOf(' '))));
    expect(times).toHaveLength(4);
    // A lower bound only (a loaded machine prints later, never sooner); 5 ms for rounding.
    times.forEach((time, i) =>
      expect({ i, after: time - times[0]! >= i * 250 - 5 }).toEqual({ i, after: true }),
    );
  });

  it('logs a CRLF line end without its CR, as containerd does, and keeps any other CR', async () => {
    server.kubelet.script(KANIKO, {
      lines: ['dos\r', 'crlf\r\nlines', '10%\r20%\r30%', 'twice\r\r'],
    });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('cr') });
    expect(await logOf('cr')).toBe('dos\ncrlf\nlines\n10%\r20%\r30%\ntwice\r\n');
  });

  it('prints the lines a run hook returns one by one, and a printCrc summary over the lines logged', async () => {
    server.kubelet.script(KANIKO, {
      lines: ['fetching\nunpacking', 'done\r'],
      printCrc: true,
      run: () => Promise.resolve({ lines: ['pushed\n', 'digest sha256:1234'] }),
    });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('hooked') });
    const lines = (await logOf('hooked')).trimEnd().split('\n');
    const s = summarize(['fetching', 'unpacking', 'done']);
    expect(lines).toEqual([
      'fetching',
      'unpacking',
      'done',
      crcLine(s.lines, s.bytes, s.crc32),
      'pushed',
      '',
      'digest sha256:1234',
    ]);
    expect(verifyCrc(lines.slice(0, 4))).toBe(true);
  });

  it('fails a backoffLimit 0 Job with BackoffLimitExceeded when its pod exits non-zero', async () => {
    server.kubelet.script(KANIKO, { lines: ['error: boom'], exitCode: 2 });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('bad') });
    const failed = await untilCondition('bad', 'Failed');
    const message = 'Job has reached the specified backoff limit';
    expect(conditionsOf(failed)).toEqual([
      { type: 'FailureTarget', status: 'True', reason: 'BackoffLimitExceeded', message },
      { type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', message },
    ]);
    expect(failed.status).toMatchObject({ failed: 1 });
    expect(failed.status?.completionTime).toBeUndefined();
    const pods = await podsOf('bad');
    expect(pods).toHaveLength(1);
    expect(pods[0]?.status?.phase).toBe('Failed');
    expect(pods[0]?.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 2,
      reason: 'Error',
    });
  });

  it('retries a failed pod while the backoffLimit allows, then succeeds with failed: 1 counted', async () => {
    server.kubelet.script(KANIKO, { exitCode: 1 });
    server.jobController.retryDelayMs = 1_000; // time to switch the script before the retry
    const created = batch.createNamespacedJob({
      namespace: NS,
      body: jobBody('retry', { spec: { backoffLimit: 1 } }),
    });
    await created;
    await eventually(async () =>
      (await readJob('retry')).status?.failed === 1 ? true : undefined,
    );
    server.kubelet.script(KANIKO, {});
    const done = await untilCondition('retry', 'Complete');
    expect(done.status).toMatchObject({ failed: 1, succeeded: 1 });
    expect(await podsOf('retry')).toHaveLength(2);
  });

  it('reports an OOMKilled container with exit code 137', async () => {
    server.kubelet.script(KANIKO, { lines: 3, oomKilled: true });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('oom') });
    await untilCondition('oom', 'Failed');
    const [pod] = await podsOf('oom');
    expect(pod?.status?.phase).toBe('Failed');
    expect(pod?.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({
      exitCode: 137,
      reason: 'OOMKilled',
    });
  });

  it('evicts a pod mid-run: Failed with reason Evicted, its message and a DisruptionTarget condition', async () => {
    server.kubelet.script(KANIKO, {
      lines: 20,
      linesPerSecond: 5000,
      evict: { afterLines: 5, message: 'The node was low on resource: ephemeral-storage.' },
    });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('evicted') });
    await untilCondition('evicted', 'Failed');
    const [pod] = await podsOf('evicted');
    expect(pod?.status).toMatchObject({
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: ephemeral-storage.',
    });
    expect(pod?.status?.conditions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'DisruptionTarget',
          status: 'True',
          reason: 'TerminationByKubelet',
        }),
      ]),
    );
    expect(pod?.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(137);
    const log = await core.readNamespacedPodLog({ namespace: NS, name: pod?.metadata?.name ?? '' });
    expect(log.trimEnd().split('\n')).toHaveLength(5);
  });

  it('kills the pod and fails the Job with DeadlineExceeded after activeDeadlineSeconds', async () => {
    server.kubelet.script(KANIKO, { hang: true });
    const createdAt = Date.now();
    await batch.createNamespacedJob({
      namespace: NS,
      body: jobBody('slow', { spec: { activeDeadlineSeconds: 1 } }),
    });
    await eventually(async () =>
      (await podsOf('slow'))[0]?.status?.phase === 'Running' ? true : undefined,
    );
    const failed = await untilCondition('slow', 'Failed', 4000);
    expect(Date.now() - createdAt).toBeGreaterThanOrEqual(1000);
    expect(conditionsOf(failed)).toContainEqual({
      type: 'Failed',
      status: 'True',
      reason: 'DeadlineExceeded',
      message: 'Job was active longer than specified deadline',
    });
    await eventually(async () => ((await podsOf('slow')).length === 0 ? true : undefined));
    expect(server.kubelet.runningPods).toEqual([]);
  });

  it('creates no pod for a suspended Job until it is resumed', async () => {
    server.kubelet.script(KANIKO, { lines: 2 });
    await batch.createNamespacedJob({
      namespace: NS,
      body: jobBody('later', { spec: { suspend: true } }),
    });
    const suspended = await untilCondition('later', 'Suspended');
    expect(conditionsOf(suspended)).toEqual([
      { type: 'Suspended', status: 'True', reason: 'JobSuspended', message: 'Job suspended' },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await podsOf('later')).toEqual([]);
    expect(suspended.status?.startTime).toBeUndefined();
    await batch.patchNamespacedJob(
      { namespace: NS, name: 'later', body: { spec: { suspend: false } } },
      merge,
    );
    const done = await untilCondition('later', 'Complete');
    expect(conditionsOf(done)).toContainEqual({
      type: 'Suspended',
      status: 'False',
      reason: 'JobResumed',
      message: 'Job resumed',
    });
    expect(await podsOf('later')).toHaveLength(1);
  });

  it('deletes a finished Job, and its pod, ttlSecondsAfterFinished later', async () => {
    const createdAt = Date.now();
    await batch.createNamespacedJob({
      namespace: NS,
      body: jobBody('ttl', { image: 'unknown/image:1', spec: { ttlSecondsAfterFinished: 1 } }),
    });
    await untilCondition('ttl', 'Complete');
    expect(await podsOf('ttl')).toHaveLength(1);
    await eventually(() => (server.object('batch/v1', 'jobs', NS, 'ttl') ? undefined : true), 4000);
    expect(Date.now() - createdAt).toBeGreaterThanOrEqual(1000);
    await eventually(async () => ((await podsOf('ttl')).length === 0 ? true : undefined));
  });

  it('runs init containers in order, each to termination, before the main container starts', async () => {
    server.kubelet.script(GIT, { lines: ['cloned'], runMs: 100 });
    server.kubelet.script(KANIKO, { lines: ['built'] });
    // Every state the pod passes through, from a real watch (no sampling that load could skip).
    const phases: string[] = [];
    const state = (s: k8s.V1ContainerStatus | undefined): string =>
      s?.state?.running ? 'running' : s?.state?.terminated ? 'terminated' : 'waiting';
    const watching = await new k8s.Watch(kubeConfigFor(server.url, NS)).watch(
      `/api/v1/namespaces/${NS}/pods`,
      { labelSelector: 'job-name=inits' },
      (_type: string, pod: k8s.V1Pod) => {
        const status = pod.status ?? {};
        const entry = [
          status.phase ?? '-',
          ...(status.initContainerStatuses ?? []).map(state),
          ...(status.containerStatuses ?? []).map(state),
        ].join(' ');
        if (phases.at(-1) !== entry) phases.push(entry);
      },
      () => undefined,
    );
    await batch.createNamespacedJob({
      namespace: NS,
      body: jobBody('inits', { init: [GIT, GIT] }),
    });
    await untilCondition('inits', 'Complete');
    await eventually(
      () => phases.includes('Succeeded terminated terminated terminated') || undefined,
    );
    watching.abort();
    const order = phases.filter((p) => p.split(' ').length === 4);
    expect(order).toEqual(
      expect.arrayContaining([
        'Pending running waiting waiting',
        'Pending terminated running waiting',
        'Succeeded terminated terminated terminated',
      ]),
    );
    expect(order.indexOf('Pending running waiting waiting')).toBeLessThan(
      order.indexOf('Pending terminated running waiting'),
    );
    expect(order.some((p) => /running.*running/.test(p))).toBe(false);
    const [pod] = await podsOf('inits');
    const init0 = pod?.status?.initContainerStatuses?.[0]?.state?.terminated;
    const init1 = pod?.status?.initContainerStatuses?.[1]?.state?.terminated;
    const main = pod?.status?.containerStatuses?.[0]?.state?.terminated;
    expect(init0?.finishedAt?.getTime() ?? 0).toBeLessThanOrEqual(init1?.startedAt?.getTime() ?? 0);
    expect(init1?.finishedAt?.getTime() ?? 0).toBeLessThanOrEqual(main?.startedAt?.getTime() ?? 0);
    const initLog = await core.readNamespacedPodLog({
      namespace: NS,
      name: pod?.metadata?.name ?? '',
      container: 'init-0',
    });
    expect(initLog).toBe('cloned\n');
  });

  it('stops a pod whose deletion a test asks for mid-run, and the Job counts it as failed', async () => {
    server.kubelet.script(KANIKO, { lines: 100_000, linesPerSecond: 1000 });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('gone') });
    const name = await eventually(async () => {
      const pod = (await podsOf('gone'))[0];
      return pod?.status?.phase === 'Running' ? pod.metadata?.name : undefined;
    });
    const deleted = await core.deleteNamespacedPod({ namespace: NS, name });
    expect(deleted.metadata?.deletionTimestamp).toBeInstanceOf(Date);
    await eventually(() => (server.object('v1', 'pods', NS, name) ? undefined : true));
    expect(server.kubelet.runningPods).toEqual([]);
    const failed = await untilCondition('gone', 'Failed');
    expect(failed.status?.failed).toBe(1);
    const status = await expectStatus(core.readNamespacedPodLog({ namespace: NS, name }));
    expect(status).toMatchObject({ code: 404, reason: 'NotFound' });
  });

  it('deletes the pods of a Job deleted with propagationPolicy Background', async () => {
    server.kubelet.script(KANIKO, { hang: true });
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('cascade') });
    await eventually(async () => ((await podsOf('cascade')).length === 1 ? true : undefined));
    await batch.deleteNamespacedJob({
      namespace: NS,
      name: 'cascade',
      propagationPolicy: 'Background',
    });
    await eventually(async () => ((await podsOf('cascade')).length === 0 ? true : undefined));
    expect(server.kubelet.runningPods).toEqual([]);
  });

  it('leaves Jobs alone when the controller is turned off', async () => {
    server.jobController.enabled = false;
    await batch.createNamespacedJob({ namespace: NS, body: jobBody('manual') });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await podsOf('manual')).toEqual([]);
    expect((await readJob('manual')).status).toEqual({});
  });
});
