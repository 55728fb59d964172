import { KubeApiServer } from '../support/kube/api-server.js';
import { eventually, expectStatus, k8s, kubeConfigFor, merge } from '../support/kube/client.js';
import { PROMISED_FIELD_SELECTORS } from '../support/kube/conformance.js';
import {
  DEFAULT_EVICTION_MESSAGE,
  DEFAULT_UNSCHEDULABLE_MESSAGE,
} from '../support/kube/kubelet.js';

// Why a build's pod does not run, as the double tells it: the Job controller's FailedCreate
// (quota, Pod Security, admission webhooks), the scheduler's FailedScheduling, the kubelet's
// image, configuration and eviction Events, aggregated as client-go's recorder does, and found
// with the field selectors the real server supports, in list and watch.

const NS = 'events';
const BUILD = 'registry.example/kaniko@sha256:1111';
const HANG = 'registry.example/hang@sha256:2222';
const BROKEN = 'registry.example/missing@sha256:3333';
const WAITING = 'registry.example/waiting@sha256:4444';
const EVICTED = 'registry.example/evicted@sha256:5555';
const NODE = 'kiln-double-node';

/** The restricted profile's first four refusals, for a container `build` that sets nothing. */
const RESTRICTED_REFUSAL =
  'allowPrivilegeEscalation != false (container "build" must set securityContext.allowPrivilegeEscalation=false), ' +
  'unrestricted capabilities (container "build" must set securityContext.capabilities.drop=["ALL"]), ' +
  'runAsNonRoot != true (pod or container "build" must set securityContext.runAsNonRoot=true), ' +
  'seccompProfile (pod or container "build" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")';

/** What the restricted profile asks of a container. */
const RESTRICTED_CONTEXT: k8s.V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' },
};

type Container = Partial<k8s.V1Container>;

const jobBody = (
  name: string,
  container: Container = {},
  pod: Partial<k8s.V1PodSpec> = {},
): k8s.V1Job => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name },
  spec: {
    backoffLimit: 0,
    template: {
      spec: {
        restartPolicy: 'Never',
        ...pod,
        containers: [{ name: 'build', image: BUILD, ...container }],
      },
    },
  },
});

/** An Event as JSON (fetched raw: client-node turns its timestamps into Dates). */
type EventJson = {
  metadata: { name: string; namespace: string; resourceVersion: string };
  involvedObject: Record<string, string>;
  reason: string;
  message: string;
  type: string;
  count: number;
  source: { component?: string; host?: string };
  firstTimestamp: string;
  lastTimestamp: string;
  reportingComponent: string;
  reportingInstance: string;
};

describe(`${KubeApiServer.name} Events and pod conditions`, () => {
  let server: KubeApiServer;
  let config: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let batch: k8s.BatchV1Api;

  beforeEach(async () => {
    server = await KubeApiServer.start({
      namespaces: ['default', NS],
      resourceQuotaController: true,
      jobController: { createRetryMs: 20, createRetryMaxMs: 100 },
      kubelet: { backOffMs: 20, maxBackOffMs: 80, unresolvedReferences: 'wait' },
    });
    config = kubeConfigFor(server.url, NS);
    core = config.makeApiClient(k8s.CoreV1Api);
    batch = config.makeApiClient(k8s.BatchV1Api);
    server.kubelet.script(BUILD, { lines: ['built'] });
    server.kubelet.script(HANG, { hang: true });
  });

  afterEach(async () => {
    await server.stop();
  });

  /** The namespace's Events that match a field selector, over HTTP. */
  const events = async (fieldSelector = '', namespace = NS): Promise<EventJson[]> => {
    const query = fieldSelector === '' ? '' : `?fieldSelector=${encodeURIComponent(fieldSelector)}`;
    const response = await fetch(`${server.url}/api/v1/namespaces/${namespace}/events${query}`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { items: EventJson[] }).items;
  };
  /** Waits until the Events matching a selector pass `done` (default: there is one). */
  const untilEvents = (
    fieldSelector: string,
    done: (items: EventJson[]) => boolean = (items) => items.length > 0,
    timeoutMs = 5000,
  ): Promise<EventJson[]> =>
    eventually(async () => {
      const items = await events(fieldSelector);
      return done(items) ? items : undefined;
    }, timeoutMs);
  const createJob = (body: k8s.V1Job, namespace = NS): Promise<k8s.V1Job> =>
    batch.createNamespacedJob({ namespace, body });
  const podsOf = async (job: string, namespace = NS): Promise<k8s.V1Pod[]> =>
    (await core.listNamespacedPod({ namespace, labelSelector: `job-name=${job}` })).items;
  const onlyPod = (job: string, namespace = NS): Promise<k8s.V1Pod> =>
    eventually(async () => (await podsOf(job, namespace))[0]);
  const untilComplete = (job: string, namespace = NS): Promise<k8s.V1Job> =>
    eventually(async () => {
      const read = await batch.readNamespacedJob({ namespace, name: job });
      return read.status?.conditions?.some((c) => c.type === 'Complete' && c.status === 'True')
        ? read
        : undefined;
    });
  const quotaStatus = async (name: string): Promise<k8s.V1ResourceQuotaStatus | undefined> =>
    (await core.readNamespacedResourceQuota({ namespace: NS, name })).status;
  const pod = (name: string, container: Container = {}): k8s.V1Pod => ({
    metadata: { name },
    spec: { restartPolicy: 'Never', containers: [{ name: 'build', image: BUILD, ...container }] },
  });

  describe('FailedCreate from the Job controller', () => {
    it('refuses a pod over a ResourceQuota, keeps the quota status, and creates the pod once the quota frees', async () => {
      await core.createNamespacedResourceQuota({
        namespace: NS,
        body: {
          metadata: { name: 'build-quota' },
          spec: { hard: { pods: '1', 'requests.cpu': '2' } },
        },
      });
      // The quota controller writes the status; until then the quota would limit nothing.
      expect(
        await eventually(async () => {
          const status = await quotaStatus('build-quota');
          return status?.used ? status : undefined;
        }),
      ).toEqual({
        hard: { pods: '1', 'requests.cpu': '2' },
        used: { pods: '0', 'requests.cpu': '0' },
      });

      await createJob(jobBody('first', { image: HANG, resources: { requests: { cpu: '500m' } } }));
      const first = await onlyPod('first');
      await eventually(async () =>
        (await quotaStatus('build-quota'))?.used?.pods === '1' ? true : undefined,
      );
      expect((await quotaStatus('build-quota'))?.used).toEqual({
        pods: '1',
        'requests.cpu': '500m',
      });

      const second = await createJob(jobBody('second'));
      const refusals = await untilEvents('involvedObject.name=second,reason=FailedCreate');
      // Each try names another generated pod, so each refusal so far is an Event of its own.
      for (const e of refusals)
        expect(e.message).toMatch(
          /^Error creating: pods "second-[a-z0-9]{5}" is forbidden: exceeded quota: build-quota, requested: pods=1, used: pods=1, limited: pods=1$/,
        );
      const refusal = refusals[0];
      expect(refusal).toMatchObject({
        type: 'Warning',
        reason: 'FailedCreate',
        count: 1,
        source: { component: 'job-controller' },
        reportingComponent: 'job-controller',
        involvedObject: {
          kind: 'Job',
          apiVersion: 'batch/v1',
          namespace: NS,
          name: 'second',
          uid: second.metadata?.uid,
        },
      });
      expect(refusal?.metadata.name).toMatch(/^second\.[0-9a-f]+$/);
      expect(refusal?.firstTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(await podsOf('second')).toEqual([]);

      // The first build's pod goes: its quota is freed, and the retry creates the second's pod.
      await core.deleteNamespacedPod({ namespace: NS, name: first.metadata?.name ?? '' });
      const created = await onlyPod('second');
      const [success] = await untilEvents('involvedObject.name=second,reason=SuccessfulCreate');
      expect(success).toMatchObject({
        type: 'Normal',
        message: `Created pod: ${created.metadata?.name}`,
        source: { component: 'job-controller' },
      });
      await untilComplete('second');
      await eventually(async () =>
        (await quotaStatus('build-quota'))?.used?.pods === '0' ? true : undefined,
      );
    });

    it('aggregates refusals that differ only in the pod name into one "(combined from similar events)" Event, and creates the pod when the quota grows', async () => {
      await core.createNamespacedResourceQuota({
        namespace: NS,
        body: { metadata: { name: 'none' }, spec: { hard: { 'count/pods': '0' } } },
      });
      await eventually(async () => ((await quotaStatus('none'))?.used ? true : undefined));
      await createJob(jobBody('blocked'));
      const combined = await untilEvents(
        'involvedObject.name=blocked,reason=FailedCreate',
        (items) => items.some((e) => e.message.startsWith('(combined') && e.count >= 2),
      );
      const [aggregate, ...others] = [...combined].sort((a, b) =>
        a.message.startsWith('(combined') ? -1 : b.message.startsWith('(combined') ? 1 : 0,
      );
      // Nine Events of their own, then one that each further refusal bumps.
      expect(others).toHaveLength(9);
      for (const e of others)
        expect(e.message).toMatch(
          /^Error creating: pods "blocked-[a-z0-9]{5}" is forbidden: exceeded quota: none, requested: count\/pods=1, used: count\/pods=0, limited: count\/pods=0$/,
        );
      expect(aggregate?.message).toMatch(
        /^\(combined from similar events\): Error creating: pods "blocked-[a-z0-9]{5}" is forbidden: exceeded quota: none, /,
      );
      expect(await podsOf('blocked')).toEqual([]);

      await core.patchNamespacedResourceQuota(
        { namespace: NS, name: 'none', body: { spec: { hard: { 'count/pods': '1' } } } },
        merge,
      );
      await onlyPod('blocked');
      await untilComplete('blocked');
    });

    it('refuses a pod of a direct create over a quota with the real 403, memory quantities in canonical form', async () => {
      await core.createNamespacedResourceQuota({
        namespace: NS,
        body: {
          metadata: { name: 'memory' },
          spec: { hard: { 'requests.memory': '1Gi', 'limits.memory': '2Gi' } },
        },
      });
      await eventually(async () => ((await quotaStatus('memory'))?.used ? true : undefined));
      // Bare pods of an image without a script stay Pending: they hold their quota.
      const bare = (name: string, memory: string): k8s.V1Pod => ({
        metadata: { name },
        spec: {
          restartPolicy: 'Always',
          containers: [{ name: 'c', image: 'unscripted', resources: { limits: { memory } } }],
        },
      });
      await core.createNamespacedPod({ namespace: NS, body: bare('one', '768Mi') });
      await eventually(async () =>
        (await quotaStatus('memory'))?.used?.['requests.memory'] === '768Mi' ? true : undefined,
      );
      const refused = await expectStatus(
        core.createNamespacedPod({ namespace: NS, body: bare('two', '512Mi') }),
      );
      expect(refused).toMatchObject({
        code: 403,
        reason: 'Forbidden',
        message:
          'pods "two" is forbidden: exceeded quota: memory, requested: requests.memory=512Mi, used: requests.memory=768Mi, limited: requests.memory=1Gi',
        details: { name: 'two', kind: 'pods' },
      });
      expect((await quotaStatus('memory'))?.used).toEqual({
        'limits.memory': '768Mi',
        'requests.memory': '768Mi',
      });
    });

    it('refuses pods the namespace Pod Security level forbids, on a direct create and for a Job, retrying', async () => {
      await core.createNamespace({
        body: {
          metadata: {
            name: 'locked',
            labels: { 'pod-security.kubernetes.io/enforce': 'restricted' },
          },
        },
      });
      const refused = await expectStatus(
        core.createNamespacedPod({ namespace: 'locked', body: pod('bare') }),
      );
      expect(refused).toMatchObject({
        code: 403,
        reason: 'Forbidden',
        message: `pods "bare" is forbidden: violates PodSecurity "restricted:latest": ${RESTRICTED_REFUSAL}`,
      });
      // A compliant pod is admitted.
      await core.createNamespacedPod({
        namespace: 'locked',
        body: pod('compliant', { securityContext: RESTRICTED_CONTEXT }),
      });

      // The Job is created, with the warning PodSecurity gives for workloads; its pods are not.
      const response = await fetch(`${server.url}/apis/batch/v1/namespaces/locked/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(jobBody('insecure')),
      });
      expect(response.status).toBe(201);
      expect(response.headers.get('warning')).toBe(
        `299 - ${JSON.stringify(`would violate PodSecurity "restricted:latest": ${RESTRICTED_REFUSAL}`)}`,
      );
      const refusals = await eventually(async () => {
        const items = (
          await core.listNamespacedEvent({
            namespace: 'locked',
            fieldSelector: 'involvedObject.name=insecure,reason=FailedCreate',
          })
        ).items;
        return items.length >= 2 ? items : undefined;
      });
      for (const e of refusals) {
        expect(e.type).toBe('Warning');
        expect(e.message).toMatch(
          /^Error creating: pods "insecure-[a-z0-9]{5}" is forbidden: violates PodSecurity "restricted:latest": /,
        );
        expect(e.message?.endsWith(RESTRICTED_REFUSAL)).toBe(true);
      }
      expect(await podsOf('insecure', 'locked')).toEqual([]);
    });

    it('names the enforced version, and words baseline refusals in check order', async () => {
      await core.createNamespace({
        body: {
          metadata: {
            name: 'pinned',
            labels: {
              'pod-security.kubernetes.io/enforce': 'baseline',
              'pod-security.kubernetes.io/enforce-version': 'v1.30',
            },
          },
        },
      });
      const body = pod('host', {
        securityContext: { privileged: true, capabilities: { add: ['SYS_ADMIN', 'NET_ADMIN'] } },
      });
      body.spec!.hostNetwork = true;
      body.spec!.volumes = [{ name: 'root', hostPath: { path: '/' } }];
      expect(
        (await expectStatus(core.createNamespacedPod({ namespace: 'pinned', body }))).message,
      ).toBe(
        'pods "host" is forbidden: violates PodSecurity "baseline:v1.30": ' +
          'non-default capabilities (container "build" must not include "NET_ADMIN", "SYS_ADMIN" in securityContext.capabilities.add), ' +
          'host namespaces (hostNetwork=true), ' +
          'hostPath volumes (volume "root"), ' +
          'privileged (container "build" must not set securityContext.privileged=true)',
      );
    });

    it('fails creates an admission webhook denies, directly and for a Job, whose identical refusals make one Event', async () => {
      const lift = server.admissionWebhooks.deny({
        name: 'policy.example.com',
        message: 'images must come from registry.example.com',
      });
      const elsewhere = server.admissionWebhooks.deny({
        namespace: 'default',
        name: 'other.example.com',
        message: 'no',
      });
      const refused = await expectStatus(
        core.createNamespacedPod({ namespace: NS, body: pod('direct') }),
      );
      expect(refused).toEqual({
        code: 400,
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message:
          'admission webhook "policy.example.com" denied the request: images must come from registry.example.com',
      });
      elsewhere();

      await createJob(jobBody('denied'));
      const [event, ...others] = await untilEvents(
        'involvedObject.name=denied,reason=FailedCreate',
        (items) => (items[0]?.count ?? 0) >= 3,
      );
      expect(others).toEqual([]);
      expect(event).toMatchObject({
        type: 'Warning',
        message:
          'Error creating: admission webhook "policy.example.com" denied the request: images must come from registry.example.com',
      });
      expect(Date.parse(event!.lastTimestamp)).toBeGreaterThanOrEqual(
        Date.parse(event!.firstTimestamp),
      );
      expect(await podsOf('denied')).toEqual([]);

      lift();
      await onlyPod('denied');
      await untilComplete('denied');
    });
  });

  describe('scheduling', () => {
    it('keeps an unschedulable pod Pending with PodScheduled False and FailedScheduling, then runs it once it is scheduled', async () => {
      server.kubelet.script(WAITING, { lines: ['built'], unschedulable: { forMs: 800 } });
      await createJob(jobBody('later', { image: WAITING }));
      const pending = await onlyPod('later');
      const name = pending.metadata?.name ?? '';
      const [failed] = await untilEvents(`involvedObject.name=${name},reason=FailedScheduling`);
      expect(failed).toMatchObject({
        type: 'Warning',
        message: DEFAULT_UNSCHEDULABLE_MESSAGE,
        source: { component: 'default-scheduler' },
        involvedObject: { kind: 'Pod', apiVersion: 'v1', name, uid: pending.metadata?.uid },
      });
      const unscheduled = await core.readNamespacedPod({ namespace: NS, name });
      expect(unscheduled.status?.phase).toBe('Pending');
      expect(unscheduled.spec?.nodeName).toBeUndefined();
      expect(unscheduled.status?.conditions).toEqual([
        expect.objectContaining({
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: DEFAULT_UNSCHEDULABLE_MESSAGE,
        }),
      ]);

      const [scheduled] = await untilEvents(`involvedObject.name=${name},reason=Scheduled`);
      expect(scheduled).toMatchObject({
        type: 'Normal',
        message: `Successfully assigned ${NS}/${name} to ${NODE}`,
        source: { component: 'default-scheduler' },
      });
      await untilComplete('later');
      const ran = await core.readNamespacedPod({ namespace: NS, name });
      expect(ran.spec?.nodeName).toBe(NODE);
      expect(ran.status?.conditions?.find((c) => c.type === 'PodScheduled')?.status).toBe('True');
    });

    it('keeps a pod with its own unschedulable message Pending until it is deleted, which is at once', async () => {
      const message =
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.";
      server.kubelet.script(WAITING, { unschedulable: message });
      await createJob(jobBody('never', { image: WAITING }));
      const name = (await onlyPod('never')).metadata?.name ?? '';
      const [failed] = await untilEvents(`involvedObject.name=${name},reason=FailedScheduling`);
      expect(failed?.message).toBe(message);
      await core.deleteNamespacedPod({ namespace: NS, name });
      expect((await expectStatus(core.readNamespacedPod({ namespace: NS, name }))).code).toBe(404);
    });
  });

  describe('kubelet Events', () => {
    const containerEvents = async (pod: string, done: (items: EventJson[]) => boolean) =>
      untilEvents(`involvedObject.kind=Pod,involvedObject.name=${pod},source=kubelet`, done);

    it('tells an image pull failure step by step, and bumps the back-off Events', async () => {
      server.kubelet.script(BROKEN, { pullError: 'manifest unknown' });
      await createJob(jobBody('pull', { image: BROKEN }));
      const name = (await onlyPod('pull')).metadata?.name ?? '';
      const seen = await containerEvents(name, (items) =>
        items.some((e) => e.reason === 'BackOff' && e.count >= 2),
      );
      const by = (message: string) => seen.find((e) => e.message === message);
      for (const [type, reason, message] of [
        ['Normal', 'Pulling', `Pulling image "${BROKEN}"`],
        ['Warning', 'Failed', `Failed to pull image "${BROKEN}": manifest unknown`],
        ['Warning', 'Failed', 'Error: ErrImagePull'],
        ['Normal', 'BackOff', `Back-off pulling image "${BROKEN}"`],
        ['Warning', 'Failed', 'Error: ImagePullBackOff'],
      ] as const)
        expect({ message, event: by(message) }).toMatchObject({
          message,
          event: {
            type,
            reason,
            source: { component: 'kubelet', host: NODE },
            reportingComponent: 'kubelet',
            reportingInstance: NODE,
            involvedObject: { kind: 'Pod', name, fieldPath: 'spec.containers{build}' },
          },
        });
      expect(seen.filter((e) => e.reason === 'BackOff')).toHaveLength(1);
      const waiting = (await core.readNamespacedPod({ namespace: NS, name })).status
        ?.containerStatuses?.[0]?.state?.waiting;
      expect(waiting).toEqual({
        reason: 'ImagePullBackOff',
        message: `Back-off pulling image "${BROKEN}": manifest unknown`,
      });
    });

    it('keeps a container with a missing Secret or key waiting in CreateContainerConfigError, and starts it once both are there', async () => {
      let seenToken: string | undefined;
      server.kubelet.script(BUILD, {
        run: ({ env }) => {
          seenToken = env.TOKEN;
          return Promise.resolve({});
        },
      });
      await createJob(
        jobBody('config', {
          env: [
            { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'build-secrets', key: 'token' } } },
          ],
        }),
      );
      const name = (await onlyPod('config')).metadata?.name ?? '';
      const waitingFor = (message: string) =>
        eventually(async () => {
          const waiting = (await core.readNamespacedPod({ namespace: NS, name })).status
            ?.containerStatuses?.[0]?.state?.waiting;
          return waiting?.message === message ? waiting : undefined;
        });
      expect(await waitingFor('secret "build-secrets" not found')).toEqual({
        reason: 'CreateContainerConfigError',
        message: 'secret "build-secrets" not found',
      });
      const [failed] = await containerEvents(name, (items) =>
        items.some((e) => e.message === 'Error: secret "build-secrets" not found'),
      ).then((items) => items.filter((e) => e.reason === 'Failed'));
      expect(failed).toMatchObject({
        type: 'Warning',
        involvedObject: { fieldPath: 'spec.containers{build}' },
      });

      await core.createNamespacedSecret({
        namespace: NS,
        body: { metadata: { name: 'build-secrets' }, stringData: { other: 'x' } },
      });
      await waitingFor(`couldn't find key token in Secret ${NS}/build-secrets`);
      await core.patchNamespacedSecret(
        { namespace: NS, name: 'build-secrets', body: { stringData: { token: 's3cret' } } },
        merge,
      );
      await untilComplete('config');
      expect(seenToken).toBe('s3cret');
    });

    it('does not start a pod whose ConfigMap volume is missing, with FailedMount, until it appears', async () => {
      await createJob(
        jobBody(
          'mount',
          { volumeMounts: [{ name: 'files', mountPath: '/files' }] },
          { volumes: [{ name: 'files', configMap: { name: 'build-files' } }] },
        ),
      );
      const name = (await onlyPod('mount')).metadata?.name ?? '';
      const [mount] = await containerEvents(name, (items) =>
        items.some((e) => e.reason === 'FailedMount'),
      );
      expect(mount).toMatchObject({
        type: 'Warning',
        reason: 'FailedMount',
        message: 'MountVolume.SetUp failed for volume "files" : configmap "build-files" not found',
      });
      expect(
        (await core.readNamespacedPod({ namespace: NS, name })).status?.containerStatuses?.[0]
          ?.state?.waiting?.reason,
      ).toBe('ContainerCreating');
      await core.createNamespacedConfigMap({
        namespace: NS,
        body: { metadata: { name: 'build-files' }, data: { Dockerfile: 'FROM scratch' } },
      });
      await untilComplete('mount');
    });

    it('says Evicted on the pod an eviction kills', async () => {
      server.kubelet.script(EVICTED, { lines: 3, evict: true });
      await createJob(jobBody('evicted', { image: EVICTED }));
      const name = (await onlyPod('evicted')).metadata?.name ?? '';
      const [evicted] = await untilEvents(`involvedObject.name=${name},reason=Evicted`);
      expect(evicted).toMatchObject({
        type: 'Warning',
        message: DEFAULT_EVICTION_MESSAGE,
        source: { component: 'kubelet', host: NODE },
      });
      // The Job controller says why the Job failed, as it writes in the Failed condition.
      const [failed] = await untilEvents('involvedObject.name=evicted,reason=BackoffLimitExceeded');
      expect(failed).toMatchObject({
        type: 'Warning',
        message: 'Job has reached the specified backoff limit',
        source: { component: 'job-controller' },
      });
    });
  });

  describe('field selectors', () => {
    /** A finished Job (Normal Events on it and its pod) and a denied one (a Warning). */
    async function someEvents(): Promise<EventJson[]> {
      await createJob(jobBody('done'));
      await untilComplete('done');
      server.admissionWebhooks.deny({ name: 'policy.example.com', message: 'no', count: 1 });
      await createJob(jobBody('denied-once'));
      await untilComplete('denied-once');
      return untilEvents('', (items) => items.some((e) => e.reason === 'FailedCreate'));
    }

    /** A selectable field's value, read as the real registry reads it. */
    const valueOf = (e: EventJson, field: string): string =>
      field === 'source'
        ? e.source.component || e.reportingComponent
        : field.startsWith('involvedObject.')
          ? (e.involvedObject[field.slice('involvedObject.'.length)] ?? '')
          : ((e as unknown as Record<string, string | undefined>)[field] ?? '');

    it('lists by every field the conformance list promises, with = and !=', async () => {
      const all = await someEvents();
      const fields = PROMISED_FIELD_SELECTORS['core/events'] ?? [];
      expect(fields.length).toBeGreaterThan(0);
      for (const field of fields) {
        const sample = all.find((e) => valueOf(e, field) !== '') ?? all[0]!;
        const value = valueOf(sample, field);
        const names = (items: EventJson[]) => items.map((e) => e.metadata.name).sort();
        expect({ field, names: names(await events(`${field}=${value}`)) }).toEqual({
          field,
          names: names(all.filter((e) => valueOf(e, field) === value)),
        });
        expect({ field, names: names(await events(`${field}!=${value}`)) }).toEqual({
          field,
          names: names(all.filter((e) => valueOf(e, field) !== value)),
        });
      }
      // Conjunctions, as `kubectl events --for job/done` and describe ask.
      const job = await batch.readNamespacedJob({ namespace: NS, name: 'done' });
      const forJob = await events(
        `involvedObject.kind=Job,involvedObject.name=done,involvedObject.uid=${job.metadata?.uid},involvedObject.namespace=${NS}`,
      );
      expect(forJob.map((e) => e.reason).sort()).toEqual(['Completed', 'SuccessfulCreate']);
      expect((await events('type=Warning')).map((e) => e.reason)).toEqual(['FailedCreate']);
      expect((await events('source=default-scheduler')).map((e) => e.reason)).toEqual([
        'Scheduled',
        'Scheduled',
      ]);
      const unknown = await fetch(
        `${server.url}/api/v1/namespaces/${NS}/events?fieldSelector=involvedObject.color%3Dred`,
      );
      expect(unknown.status).toBe(400);
      expect(((await unknown.json()) as { message: string }).message).toBe(
        'field label not supported: involvedObject.color',
      );
    });

    it('watches by field selector: a matching Event as ADDED, each aggregation as MODIFIED, nothing else', async () => {
      const seen: Array<{ type: string; reason?: string; name?: string; count?: number }> = [];
      const controller = await new k8s.Watch(config).watch(
        `/api/v1/namespaces/${NS}/events`,
        { fieldSelector: 'involvedObject.kind=Job,type=Warning' },
        (type, object: k8s.CoreV1Event) =>
          seen.push({
            type,
            reason: object.reason,
            name: object.involvedObject?.name,
            count: object.count,
          }),
        () => undefined,
      );
      try {
        await createJob(jobBody('ok'));
        await untilComplete('ok');
        const lift = server.admissionWebhooks.deny({ name: 'policy.example.com', message: 'no' });
        await createJob(jobBody('watched'));
        await eventually(() => (seen.length >= 3 ? true : undefined));
        lift();
        await untilComplete('watched');
        expect(seen.slice(0, 3)).toEqual([
          { type: 'ADDED', reason: 'FailedCreate', name: 'watched', count: 1 },
          { type: 'MODIFIED', reason: 'FailedCreate', name: 'watched', count: 2 },
          { type: 'MODIFIED', reason: 'FailedCreate', name: 'watched', count: 3 },
        ]);
        expect(seen.every((s) => s.name === 'watched' && s.reason === 'FailedCreate')).toBe(true);
      } finally {
        controller.abort();
      }
    });
  });
});
