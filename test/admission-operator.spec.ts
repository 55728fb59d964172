import { tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { k8s, kubeConfigFor } from './support/kube/client.js';
import { NS, OperatorGround, sleep, until } from './support/operator-ground.js';
import { startTestApp } from './support/test-app.js';

/**
 * Admission through the operator (issue 30, docs/admission.md), end to end against the API server
 * double, whose Job controller, quota controller, Pod Security admission and kubelet tell why a
 * pod does not run as real ones do (docs/adr/0041). An API-only kiln and an operator-only kiln
 * on one Postgres, both with KILN_MAX_RUNNING=2: a build's Job is made once it is admitted; what
 * the cluster holds a pod back for is the build's `queue` and one `[kiln]` line per reason; a
 * refusal that waiting cannot cure fails the build at once.
 */
jest.setTimeout(120_000);

const LIMITS = {
  KILN_MAX_RUNNING: '2',
  KILN_ADMISSION_POLL_MS: '100',
};

describe('admission through the operator (API server double)', () => {
  let ground: OperatorGround;

  beforeAll(async () => {
    ground = await OperatorGround.start('admission', {
      apiEnv: LIMITS,
      cluster: { resourceQuotaController: true },
    });
  });

  afterEach(async () => {
    await ground.reset();
  });

  afterAll(async () => {
    await ground.close();
  });

  const operatorEnv = {
    ...LIMITS,
    KILN_OPERATOR_UNSCHEDULABLE_SECONDS: '3',
    KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS: '60',
  };

  const activeJobs = () =>
    ground.cluster
      .objects('batch/v1', 'jobs', NS)
      .filter((job: any) => !(job.status?.conditions ?? []).some((c: any) => c.status === 'True'))
      .length;

  it('makes the Job of a third build only once one of the two running ends, its deadline counted from then', async () => {
    await ground.startOperator({ env: operatorEnv });
    ground.builder({ lines: 3, runMs: 2_500 });
    const first = await ground.startedBuild();
    const second = await ground.startedBuild();
    await until('two Jobs', () => (ground.jobOf(first) && ground.jobOf(second) ? true : undefined));
    const third = await ground.startedBuild();

    // The operator enqueues the build when it reconciles the Build, after the start's answer.
    expect(await ground.waitingFor(third, 'InstallationLimit')).toMatchObject({
      position: 1,
      reason: 'InstallationLimit',
      message: 'all 2 build slots of this installation are in use',
    });
    expect(await ground.status(third)).toMatchObject({ status: 'in_progress', progress: null });
    await until('the Build to say it waits', () =>
      ground.resource(third)?.status?.message?.startsWith('waiting to be admitted')
        ? true
        : undefined,
    );
    // Never more than two: the third's Job waits for a slot, however often it is reconciled.
    const seen: number[] = [];
    while (ground.jobOf(third) === undefined) {
      seen.push(activeJobs());
      await sleep(50);
    }
    expect(Math.max(...seen)).toBeLessThanOrEqual(2);
    const firstEnded = await ground.ended(first);
    const job = ground.jobOf(third)!;
    // Made after the first ended (the API server's clock is whole seconds).
    expect(Date.parse(String(job.metadata!.creationTimestamp))).toBeGreaterThanOrEqual(
      Math.floor(Date.parse(firstEnded.completed_at) / 1000) * 1000 - 1000,
    );
    expect(job.spec!.activeDeadlineSeconds).toBe(3600);
    expect((await ground.ended(third)).status).toBe('success');
    expect(await ground.kilnLines(third)).toEqual(
      expect.arrayContaining([
        '[kiln] waiting to run: all 2 build slots of this installation are in use (1st in line)',
        expect.stringMatching(/^\[kiln\] admitted to run after waiting \d+ s$/),
      ]),
    );
    expect((await ground.ended(second)).status).toBe('success');
  });

  it('waits while the namespace quota is full, says ClusterQuota once however often the Job controller retries, and runs once the quota frees', async () => {
    await ground.startOperator({ env: operatorEnv });
    const core = kubeConfigFor(ground.cluster.url, NS).makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedResourceQuota({
      namespace: NS,
      body: { metadata: { name: 'build-pods' }, spec: { hard: { pods: '1' } } },
    });
    try {
      ground.builder({ lines: 3, runMs: 2_000 });
      const first = await ground.startedBuild();
      await until('the first pod', () => ground.podOf(first));
      const second = await ground.startedBuild();

      const queue = await ground.waitingFor(second, 'ClusterQuota');
      expect(queue).toEqual({
        position: null,
        reason: 'ClusterQuota',
        message: expect.stringMatching(
          /exceeded quota: build-pods, requested: pods=1, used: pods=1, limited: pods=1$/,
        ),
        estimated_start: null,
      });
      await sleep(1_000); // the Job controller retries meanwhile
      expect(ground.podOf(second)).toBeUndefined();
      expect((await ground.ended(first)).status).toBe('success');
      expect((await ground.ended(second)).status).toBe('success');
      const lines = await ground.kilnLines(second);
      expect(lines.filter((line) => line.includes('ClusterQuota'))).toEqual([
        expect.stringMatching(
          /^\[kiln\] waiting for the cluster \(ClusterQuota\): pods "kiln-.*" is forbidden: exceeded quota: build-pods/,
        ),
      ]);
      expect(lines).toContain('[kiln] no longer waiting for the cluster');
    } finally {
      await core.deleteNamespacedResourceQuota({ namespace: NS, name: 'build-pods' });
    }
  });

  it('fails a build at once with PodRefused when an admission webhook denies its pod; the Job is deleted', async () => {
    await ground.startOperator({ env: operatorEnv });
    ground.builder({ lines: 3 });
    const undeny = ground.cluster.admissionWebhooks.deny({
      name: 'policy.example.com',
      namespace: NS,
      message: 'images must come from registry.example.com',
    });
    try {
      const denied = await ground.startedBuild();
      const build = await ground.failedWith(denied, 'PodRefused');
      expect(build.error_message).toBe(
        `the cluster refused the build's pod: admission webhook "policy.example.com" denied the request: images must come from registry.example.com`,
      );
      await until('its Job to go', () => (ground.jobOf(denied) === undefined ? true : undefined));
    } finally {
      undeny();
    }
  });

  it('fails with Unschedulable when no node fits the pod for KILN_OPERATOR_UNSCHEDULABLE_SECONDS, saying why meanwhile', async () => {
    await ground.startOperator({ env: operatorEnv });
    ground.builder({ unschedulable: '0/1 nodes are available: 1 Insufficient cpu.' });
    const id = await ground.startedBuild();
    const queue = await ground.waitingFor(id, 'Unschedulable');
    expect(queue).toMatchObject({
      position: null,
      message: '0/1 nodes are available: 1 Insufficient cpu.',
    });
    const build = await ground.failedWith(id, 'Unschedulable');
    expect(build.error_message).toBe(
      "no node could run the build's pod for 3 s (KILN_OPERATOR_UNSCHEDULABLE_SECONDS): 0/1 nodes are available: 1 Insufficient cpu.",
    );
    expect(await ground.kilnLines(id)).toContain(
      '[kiln] waiting for the cluster (Unschedulable): 0/1 nodes are available: 1 Insufficient cpu.',
    );
    await until('its Job to go', () => (ground.jobOf(id) === undefined ? true : undefined));
  });

  it('says ImagePull while the builder image fails to pull, and fails ImagePullFailed after the pull timeout', async () => {
    await ground.startOperator({
      env: { ...operatorEnv, KILN_OPERATOR_IMAGE_PULL_TIMEOUT_SECONDS: '2' },
    });
    ground.builder({ pullError: 'manifest unknown' });
    const id = await ground.startedBuild();
    const queue = await ground.waitingFor(id, 'ImagePull');
    expect(queue.message).toMatch(/^image .* of container build: /);
    await ground.failedWith(id, 'ImagePullFailed');
    expect((await ground.kilnLines(id)).filter((line) => line.includes('ImagePull)'))).toHaveLength(
      1,
    );
  });

  it('fails with PodRefused when the namespace enforces a Pod Security level the method cannot meet', async () => {
    await ground.startOperator({ env: operatorEnv });
    ground.builder({ lines: 3 });
    const namespace = ground.cluster
      .objects('v1', 'namespaces')
      .find((n) => n.metadata.name === NS)!;
    const labels = { ...namespace.metadata.labels };
    ground.cluster.seed({
      ...namespace,
      metadata: {
        ...namespace.metadata,
        labels: { ...labels, 'pod-security.kubernetes.io/enforce': 'restricted' },
      },
    });
    try {
      const id = await ground.startedBuild();
      const build = await ground.failedWith(id, 'PodRefused');
      expect(build.error_message).toMatch(
        /^the cluster refused the build's pod: pods "kiln-.*" is forbidden: violates PodSecurity "restricted:latest": /,
      );
    } finally {
      ground.cluster.seed({ ...namespace, metadata: { ...namespace.metadata, labels } });
    }
  });

  it('fails a build that waited past KILN_QUEUE_TTL_SECONDS with QueueTimeout, in its record and its Build', async () => {
    await ground.startOperator({
      env: { ...operatorEnv, KILN_MAX_RUNNING: '0', KILN_QUEUE_TTL_SECONDS: '2' },
    });
    const id = await ground.startedBuild();
    const build = await ground.failedWith(id, 'QueueTimeout');
    expect(build.error_message).toMatch(
      /^The build waited \d+ s to be admitted, longer than the queue's time to live \(KILN_QUEUE_TTL_SECONDS: 2 s\)/,
    );
    expect(ground.jobOf(id)).toBeUndefined();
    await until('the Build to say so', () =>
      ground.resource(id)?.status?.failureReason === 'QueueTimeout' ? true : undefined,
    );
  });

  it('never runs more builds than the limit with two API replicas and two operators on one Postgres, across a change of leader', async () => {
    const operators = [
      await ground.startOperator({ env: operatorEnv }),
      await ground.startOperator({ env: operatorEnv }),
    ];
    const api2 = await startTestApp({
      database: ground.database,
      env: {
        ...LIMITS,
        KILN_ROLE: 'api',
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: ground.kubeconfig,
      },
    });
    ground.onReset(() => api2.close());
    const { seeded } = ground;
    const replicas = [
      ground.admin,
      new ApiClient(api2, await tokenFor(api2.baseUrl, seeded.users.admin.email), seeded.tenantA),
    ];
    ground.builder({ lines: 3, runMs: 1_000 });

    // Admitted and not yet released, and Jobs not yet finished, sampled all along.
    let sampling = true;
    const samples: Array<{ admitted: number; jobs: number }> = [];
    const sampler = (async () => {
      while (sampling) {
        const [{ n }] = await ground.api.dataSource.query<[{ n: number }]>(
          `SELECT count(*)::int AS n FROM build_admissions
            WHERE admitted_at IS NOT NULL AND released_at IS NULL`,
        );
        samples.push({ admitted: n, jobs: activeJobs() });
        await sleep(25);
      }
    })();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const client = replicas[i % 2]!;
      const manifest = wizardManifest('kaniko');
      manifest['tags'] = `replicas-${i}`;
      const created = await client.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });
      const id = (await jsonOf(created)).data.id as string;
      expect((await client.request('POST', `/builds/${id}/start`)).status).toBe(200);
      ids.push(id);
    }
    await ground.ended(ids[0]!);
    // The leader goes; the other operator takes over the Jobs and the admissions.
    const leader = operators.find((operator) => ground.runtimeOf(operator).isLeader);
    if (leader !== undefined) await ground.stopOperator(leader);
    const ended = [];
    for (const id of ids) ended.push((await ground.ended(id, 60_000)).status);
    sampling = false;
    await sampler;

    expect(ended).toEqual(Array(6).fill('success'));
    expect(Math.max(...samples.map((sample) => sample.admitted))).toBe(2);
    expect(Math.max(...samples.map((sample) => sample.jobs))).toBeLessThanOrEqual(2);
  });
});
