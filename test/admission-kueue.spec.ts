import { k8s, kubeConfigFor } from './support/kube/client.js';
import { NS, OperatorGround, until } from './support/operator-ground.js';

/**
 * KILN_ADMISSION=kueue (issue 30, docs/admission.md): kiln leaves cluster admission to Kueue. Its
 * build Jobs are created suspended in the tenant's LocalQueue; Kueue (the double's fake, shaped
 * as Kueue v1beta1 documents it: tested against that fake only) admits them by its ClusterQueue's
 * quota and unsuspends them; what a waiting build shows comes from its Workload's conditions.
 */
jest.setTimeout(120_000);

const KUEUE = { group: 'kueue.x-k8s.io', version: 'v1beta1' };
const API_VERSION = 'kueue.x-k8s.io/v1beta1';

describe('admission by Kueue (the double’s fake Kueue)', () => {
  let ground: OperatorGround;
  let custom: k8s.CustomObjectsApi;

  beforeAll(async () => {
    ground = await OperatorGround.start('kueue', {
      apiEnv: { KILN_ADMISSION: 'kueue', KILN_ADMISSION_POLL_MS: '100' },
      cluster: { kueue: true },
    });
    custom = kubeConfigFor(ground.cluster.url, NS).makeApiClient(k8s.CustomObjectsApi);
    // One flavor; a ClusterQueue that runs one build pod at a time; the LocalQueue kiln uses.
    await custom.createClusterCustomObject({
      ...KUEUE,
      plural: 'resourceflavors',
      body: { apiVersion: API_VERSION, kind: 'ResourceFlavor', metadata: { name: 'default' } },
    });
    const quota = { cpu: '64', memory: '256Gi', 'ephemeral-storage': '1Ti', pods: 1 };
    await custom.createClusterCustomObject({
      ...KUEUE,
      plural: 'clusterqueues',
      body: {
        apiVersion: API_VERSION,
        kind: 'ClusterQueue',
        metadata: { name: 'builds' },
        spec: {
          namespaceSelector: {},
          resourceGroups: [
            {
              coveredResources: Object.keys(quota),
              flavors: [
                {
                  name: 'default',
                  resources: Object.entries(quota).map(([name, nominalQuota]) => ({
                    name,
                    nominalQuota,
                  })),
                },
              ],
            },
          ],
        },
      },
    });
    await custom.createNamespacedCustomObject({
      ...KUEUE,
      namespace: NS,
      plural: 'localqueues',
      body: {
        apiVersion: API_VERSION,
        kind: 'LocalQueue',
        metadata: { name: 'kiln', namespace: NS },
        spec: { clusterQueue: 'builds' },
      },
    });
  });

  afterEach(async () => {
    await ground.reset();
  });

  afterAll(async () => {
    await ground.close();
  });

  it('creates each Job suspended in the LocalQueue; the second waits on its Workload (KueuePending) until Kueue admits it, and both run', async () => {
    await ground.startOperator({
      env: { KILN_ADMISSION: 'kueue', KILN_ADMISSION_POLL_MS: '100' },
    });
    ground.builder({ lines: 3, runMs: 2_000 });
    const first = await ground.startedBuild();
    await until('the first pod', () => ground.podOf(first));
    const second = await ground.startedBuild();

    // kiln made the Job at once (its installation limit is off): Kueue holds it.
    const job = await until('the second Job', () => ground.jobOf(second));
    expect(job.metadata?.labels?.['kueue.x-k8s.io/queue-name']).toBe('kiln');
    expect(job.spec?.suspend).toBe(true);
    const queue = await ground.waitingFor(second, 'KueuePending');
    expect(queue).toEqual({
      position: null,
      reason: 'KueuePending',
      message: expect.stringMatching(
        /^Workload job-kiln-.*: couldn't assign flavors to pod set main: insufficient unused quota for pods in flavor default, 1 more needed$/,
      ),
      estimated_start: null,
    });
    expect(ground.podOf(second)).toBeUndefined();

    const firstEnded = await ground.ended(first);
    expect(firstEnded.status).toBe('success');
    const ended = await ground.ended(second);
    expect(ended.status).toBe('success');
    const resumed = ground.jobOf(second)!;
    expect(resumed.spec?.suspend).toBe(false);
    // Its deadline counts from when Kueue let it run: the Job's start is after the first ended
    // (the API server's clock is whole seconds).
    expect(Date.parse(String(resumed.status?.startTime))).toBeGreaterThanOrEqual(
      Math.floor(Date.parse(firstEnded.completed_at) / 1000) * 1000 - 1000,
    );
    const lines = await ground.kilnLines(second);
    expect(lines.filter((line) => line.includes('(KueuePending)'))).toEqual([
      expect.stringMatching(
        /^\[kiln\] waiting for the cluster \(KueuePending\): Workload job-kiln-/,
      ),
    ]);
    expect(lines).toContain('[kiln] no longer waiting for the cluster');
  });

  it('says KueueInadmissible while its tenant’s LocalQueue does not exist', async () => {
    await ground.startOperator({
      env: {
        KILN_ADMISSION: 'kueue',
        KILN_ADMISSION_POLL_MS: '100',
        KILN_KUEUE_LOCAL_QUEUES: `${ground.seeded.tenantA}=missing`,
      },
    });
    ground.builder({ lines: 3 });
    const id = await ground.startedBuild();
    const queue = await ground.waitingFor(id, 'KueueInadmissible');
    expect(queue.message).toMatch(/^Workload job-kiln-.*: LocalQueue missing doesn't exist$/);
    expect(ground.jobOf(id)?.metadata?.labels?.['kueue.x-k8s.io/queue-name']).toBe('missing');
    await ground.admin.request('POST', `/builds/${id}/cancel`);
    expect((await ground.ended(id)).status).toBe('cancelled');
  });
});
