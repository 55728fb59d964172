import type {
  CoreV1Event,
  V1ContainerStatus,
  V1Job,
  V1JobStatus,
  V1Pod,
  V1Secret,
} from '@kubernetes/client-node';
import { referenceSpec } from '../../../test/support/build-specs.js';
import { type LifecycleGround, lifecycleGround } from '../../../test/support/lifecycle-ground.js';
import { LogCapture } from '../../../test/support/log-capture.js';
import {
  DEFAULT_JOB_SETTINGS,
  type JobSettings,
  REGISTRY_CONFIG_KEY,
} from '../../build-methods/job.js';
import { type NamespacesByLevel, oneNamespace } from '../../build-methods/namespaces.js';
import { UPLOAD_TOKEN_PREFIX } from '../../build-methods/steps.js';
import type { BuildAccessGrant, BuildAccessRefusal } from '../../integrations/build-access.js';
import { KubeApiError } from '../../kubernetes/errors.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import type { BuildSpec } from '../../manifest/build-spec.js';
import { specDigest } from '../../manifest/build-spec.js';
import type { FailureReason } from '../../manifest/failure-reasons.js';
import {
  NO_MANIFEST_POST_PROCESSOR,
  packerMessage,
  type PackerReport,
} from '../../steps/packer-manifest.js';
import { pushedMessage } from '../../steps/pushed-image.js';
import type { BuildResource, BuildResourceStatus } from '../api/build-resource.js';
import { buildResourceFor, buildSpecOf } from '../api/projection.js';
import { BuildReconciler, LOGS_FINALIZER } from './build-reconciler.js';
import { ownerOf } from './job-assembler.js';
import { StatusMirror } from './status-mirror.js';
import { DEFAULT_LOG_FOLLOWER_OPTIONS } from './log-follower.js';
import { Metrics } from '../../metrics/metrics.js';
import { parsePrometheusText, sumOf } from '../../../test/support/prometheus-text.js';
import type {
  BuildWriter,
  ReconcilerDeps,
  ReconcilerSink,
  WorkloadWriter,
} from './reconciler-ports.js';

/*
 * Table tests of BuildReconciler over its ports, as kpack's build_test.go: each row is the world
 * one reconcile meets (the Build, Job and pod in the informers' caches, the build's record in a
 * real database, what the cluster answers) and what that reconcile should leave (objects created,
 * patched and deleted, the Build's status, Events, kiln's own log lines, the record, the requeue).
 * The end-to-end suites in test/operator*.spec.ts prove the parts fit on the API server double;
 * these pin each branch in milliseconds.
 */

const NS = 'kiln-builds';
/** The reconciler's clock. The cluster's times below are relative to it. */
const NOW = Date.parse('2026-03-01T12:00:00Z');
const ago = (seconds: number): string =>
  new Date(NOW - seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const DIGEST = `sha256:${'a'.repeat(64)}`;
const DRAIN_DEADLINE_MS = 120_000;
const PULL_TIMEOUT_MS = 300_000;

// ---- the fakes --------------------------------------------------------------------------------

/** The API server as the reconciler writes to it: every write noted, in order, as text. */
class FakeCluster implements BuildWriter, WorkloadWriter {
  readonly writes: string[] = [];
  /** Reads that are API-server calls of their own (the caches' reads are not). */
  readonly reads: string[] = [];
  readonly events: string[] = [];
  readonly secrets = new Map<string, V1Secret>();
  status: BuildResourceStatus | undefined;
  /** A Job of the build's name exists already (the cache has not seen it). */
  jobTaken = false;
  /** Status writes answer 409 (the cache is behind the server). */
  statusConflict = false;
  private rv = 100;

  constructor(private build: BuildResource | undefined) {}

  mergePatch(_ns: string, name: string, patch: object): Promise<BuildResource> {
    const { metadata } = patch as { metadata: { finalizers?: string[] } };
    this.writes.push(`patch Build ${name} finalizers=[${(metadata.finalizers ?? []).join(',')}]`);
    this.build = this.updated({ ...this.build!.metadata, finalizers: metadata.finalizers ?? [] });
    return Promise.resolve(structuredClone(this.build));
  }

  mergePatchStatus(_ns: string, name: string, patch: object): Promise<BuildResource> {
    if (this.statusConflict) return Promise.reject(new KubeApiError(409, 'Conflict', 'modified'));
    const { status } = patch as { status: BuildResourceStatus };
    this.writes.push(`status Build ${name}`);
    this.status = status;
    this.build = { ...this.updated(this.build!.metadata), status };
    return Promise.resolve(structuredClone(this.build));
  }

  delete(_ns: string, name: string): Promise<boolean> {
    this.writes.push(`delete Build ${name}`);
    return Promise.resolve(true);
  }

  createJob(_ns: string, body: V1Job): Promise<V1Job> {
    const name = body.metadata?.name ?? '';
    if (this.jobTaken) {
      return Promise.reject(new KubeApiError(409, 'AlreadyExists', `jobs "${name}" exists`));
    }
    const owner = body.metadata?.ownerReferences?.[0];
    this.writes.push(`create Job ${name} controller=${owner?.kind}/${owner?.name}`);
    return Promise.resolve({ ...body, metadata: { ...body.metadata, uid: 'job-uid' } });
  }

  patchJob(_ns: string, name: string, patch: object): Promise<V1Job> {
    this.writes.push(`patch Job ${name} ${JSON.stringify(patch)}`);
    return Promise.resolve({ metadata: { name } });
  }

  deleteJob(_ns: string, name: string): Promise<boolean> {
    this.writes.push(`delete Job ${name}`);
    return Promise.resolve(true);
  }

  createConfigMap(_ns: string, body: { metadata?: { name?: string } }): Promise<never> {
    this.writes.push(`create ConfigMap ${body.metadata?.name}`);
    return Promise.resolve(body as never);
  }

  patchConfigMap(_ns: string, name: string, patch: object): Promise<never> {
    this.writes.push(`patch ConfigMap ${name} controller=${controllerIn(patch)}`);
    return Promise.resolve({} as never);
  }

  createSecret(_ns: string, body: V1Secret): Promise<V1Secret> {
    const name = body.metadata?.name ?? '';
    this.writes.push(`create Secret ${name} keys=${Object.keys(body.data ?? {}).join(',')}`);
    this.secrets.set(name, body);
    return Promise.resolve(body);
  }

  readSecret(_ns: string, name: string): Promise<V1Secret | undefined> {
    this.reads.push(`read Secret ${name}`);
    return Promise.resolve(this.secrets.get(name));
  }

  patchSecret(_ns: string, name: string, patch: object): Promise<V1Secret> {
    this.writes.push(`patch Secret ${name} controller=${controllerIn(patch)}`);
    return Promise.resolve({});
  }

  createEvent(_ns: string, body: CoreV1Event): Promise<CoreV1Event> {
    this.events.push(`${body.type} ${body.reason}`);
    return Promise.resolve(body);
  }

  /** Forgets what was written so far (an earlier reconcile's writes are not the row's). */
  forget(): void {
    this.writes.length = 0;
    this.reads.length = 0;
    this.events.length = 0;
    this.status = undefined;
  }

  private updated(metadata: BuildResource['metadata']): BuildResource {
    return { ...this.build!, metadata: { ...metadata, resourceVersion: String(++this.rv) } };
  }
}

function controllerIn(patch: object): string {
  const refs = (patch as { metadata: { ownerReferences: Array<{ kind: string; name: string }> } })
    .metadata.ownerReferences;
  return refs.map((ref) => `${ref.kind}/${ref.name}`).join(',');
}

/** LogSink as the reconciler uses it: lines and masked values noted. */
class FakeSink implements ReconcilerSink {
  readonly lines: Array<{ text: string; container?: string }> = [];
  readonly masked: string[] = [];
  /** kiln's own lines are refused (the database went away as they were written). */
  refuseKilnLines = false;

  append(_buildId: string, lines: ReadonlyArray<{ text: string; container?: string }>) {
    if (this.refuseKilnLines && lines.some((line) => line.container === 'kiln'))
      return Promise.reject(new Error('the database is unavailable'));
    this.lines.push(...lines.map(({ text, container }) => ({ text, container })));
    return Promise.resolve({
      buffered: false as const,
      stored: lines.length,
      dropped: 0,
      lastSeq: this.lines.length - 1,
      truncated: false,
    });
  }

  masking() {
    return { register: (values: readonly string[]) => this.masked.push(...values), mask };
  }

  maskText(_buildId: string, text: string): string {
    return mask(text);
  }

  registerSecrets(_buildId: string, values: readonly string[]) {
    this.masked.push(...values);
    return [];
  }
}

const mask = (text: string): string => text;

/**
 * The pod-log API: a container's stream sends its lines and ends when the container has
 * terminated (`ended`), or stays open until the reader lets go (a live build).
 */
class FakePodLogs {
  live = false;

  stream(
    ref: { container: string },
    _options: unknown,
    onText: (text: string) => void | Promise<void>,
    signal: AbortSignal,
  ): Promise<void> {
    if (this.live) {
      return new Promise((_, reject) =>
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
      );
    }
    void onText(`${ago(60)} ${ref.container} printed this\n`);
    return Promise.resolve();
  }
}

// ---- the world of one row ---------------------------------------------------------------------

type LogState = 'read' | 'reading';

interface Given {
  readonly build: BuildResource;
  readonly job?: V1Job;
  readonly pod?: V1Pod;
  /** The build's Secret as the cluster holds it. */
  readonly secret?: V1Secret;
  readonly access?: BuildAccessGrant | BuildAccessRefusal;
  readonly gate?: { pass: true } | { pass: false; message: string };
  /** What ProvenanceService answers for a success: attached by default. */
  readonly provenance?: { state: string; fails?: string };
  readonly jobTaken?: boolean;
  readonly statusConflict?: boolean;
  /** What the steps after the image need (kiln's image, the upload URL): none by default. */
  readonly steps?: Partial<JobSettings['steps']>;
  /** The build namespace of each level: every level in NS by default. */
  readonly namespaces?: NamespacesByLevel;
  /** A reconcile of this process before this one (its writes are not this row's effects). */
  readonly earlier?: Earlier;
  /** The Events of the build's Job, as the Events informer holds them. */
  readonly jobEvents?: readonly CoreV1Event[];
  /**
   * After the earlier reconcile, the pods' informer says the pod changed to this, and no
   * reconcile runs (BuildReconciler.podChanged): the row's effects are that call's.
   */
  readonly podChangesTo?: V1Pod;
  /** Appends of kiln's own lines fail: the reconcile throws (`threw` says what). */
  readonly kilnLinesFail?: boolean;
}

/**
 * A reconcile `sinceS` seconds ago, which began to follow the pod's log: `read` when its streams
 * are stored by now, `reading` while they are still open. The Job and pod are as the caches held
 * them then (absent keys: as now); `meanwhile` runs after it (the API cancels the build, say).
 */
interface Earlier {
  readonly sinceS: number;
  readonly log: LogState;
  readonly job?: V1Job;
  readonly pod?: V1Pod | undefined;
  readonly meanwhile?: () => Promise<unknown>;
}

/** What one reconcile left. */
interface Effects {
  /** The pod's lines stored (each text once), not kiln's own. */
  readonly podLines: readonly string[];
  /** What the reconcile threw, when a row expects it to (kilnLinesFail). */
  readonly threw?: string;
  /** Creates, patches and deletes of the API server, in order (the build id is `<id>`). */
  readonly writes: readonly string[];
  /** Reads sent to the API server, not answered from the caches. */
  readonly reads: readonly string[];
  /** The Build's status as last written; undefined when none was. */
  readonly status: StatusSummary | undefined;
  readonly events: readonly string[];
  /** Values registered with the build's masker. */
  readonly masked: readonly string[];
  /** kiln's own lines in the build log (notes, markers). */
  readonly kilnLines: readonly string[];
  /** The record afterwards: status and failure reason (undefined: no record). */
  readonly record: string | undefined;
  readonly requeueAfterMs: number | undefined;
  /** Keys the log drain woke (from the earlier reconcile on, until things settled after this one). */
  readonly woken: readonly string[];
  /** kiln_log_lines_dropped_total{cause="drain_deadline"} afterwards: one per gap. */
  readonly droppedAtDeadline: number;
  /**
   * What the recorded success was handed of a packer build's manifest (the packer-manifest
   * step's report), where the build's provenance reads what packer made.
   */
  readonly packer: PackerReport | undefined;
}

interface StatusSummary {
  readonly state?: string;
  readonly condition: string;
  readonly failureReason?: string;
  readonly message?: string;
  readonly jobName?: string;
  readonly podName?: string;
}

interface Row {
  readonly given: (world: World) => Promise<Given>;
  readonly want: Partial<Effects>;
}

/** Records in a real database (BuildLifecycle on Postgres) and the objects of the cluster. */
class World {
  private branch = 0;

  constructor(readonly ground: LifecycleGround) {}

  /** A kaniko build of the project's repository, on a branch of its own (never a duplicate). */
  spec(overrides: Partial<BuildSpec> = {}): BuildSpec {
    return referenceSpec({
      source: {
        repository: 'https://git.example.com/web/app.git',
        branch: `table-${this.branch++}`,
        commit: null,
        context: '.',
      },
      output: { repository: 'registry.example.com/web/app', tags: ['v1'], registryType: null },
      timeoutSeconds: 600,
      ...overrides,
    });
  }

  async queued(spec: BuildSpec = this.spec()): Promise<BuildEntity> {
    const { ground } = this;
    return (await ground.lifecycle.create(ground.newBuild({ spec, gitBranch: spec.source.branch })))
      .build;
  }

  async running(spec?: BuildSpec): Promise<BuildEntity> {
    const queued = await this.queued(spec);
    return this.ground.lifecycle.start(queued.tenantId, queued.id);
  }

  async failed(reason: FailureReason, message: string): Promise<BuildEntity> {
    return this.ground.lifecycle.fail((await this.running()).id, reason, message);
  }

  async succeeded(): Promise<BuildEntity> {
    return this.ground.lifecycle.succeed((await this.running()).id);
  }

  async cancelled(reason: string): Promise<BuildEntity> {
    const running = await this.running();
    return this.ground.lifecycle.cancel(running.tenantId, running.id, reason);
  }

  /**
   * The Build the API wrote for `record` (named after it), as the informer holds it: unsuspended,
   * with kiln's finalizer once a reconcile ran it, its status mirroring the record so far.
   */
  build(
    record: BuildEntity,
    options: {
      finalizer?: boolean;
      suspend?: boolean;
      cancelRequested?: boolean;
      deleting?: boolean;
      status?: BuildResourceStatus;
    } = {},
  ): BuildResource {
    const resource = buildResourceFor(record, NS, { suspend: options.suspend ?? false });
    resource.metadata = {
      ...resource.metadata,
      uid: `uid-${record.id}`,
      resourceVersion: '7',
      generation: 1,
      ...(options.finalizer === true ? { finalizers: [LOGS_FINALIZER] } : {}),
      ...(options.deleting === true ? { deletionTimestamp: ago(1) } : {}),
    };
    if (options.cancelRequested === true) resource.spec.cancelRequested = true;
    if (options.status !== undefined) resource.status = options.status;
    return resource;
  }

  /** A Build applied with kubectl: no build-id label, a name and uid of its own. */
  applied(name: string, spec: Partial<BuildResource['spec']> = {}): BuildResource {
    return {
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: { name, namespace: NS, uid: `uid-${name}`, resourceVersion: '3', generation: 1 },
      spec: {
        tenantId: this.ground.tenantId,
        projectId: this.ground.projectId,
        method: 'kaniko',
        source: { repository: 'https://git.example.com/web/app.git', branch: name },
        config: { dockerfile: 'FROM scratch\n' },
        output: { image: 'registry.example.com/web/app', tags: ['1.0.0'] },
        ...spec,
      },
    };
  }

  /** The build's Job, controlled by `build`, with this status. */
  job(
    record: BuildEntity,
    build: BuildResource,
    status: V1JobStatus,
    options: { reportsPush?: boolean; ttl?: boolean; packerManifest?: boolean } = {},
  ): V1Job {
    return {
      metadata: {
        name: `kiln-${record.id}`,
        namespace: NS,
        uid: 'job-uid',
        ownerReferences: [ownerOf(build)],
      },
      spec: {
        ...(options.ttl === true ? { ttlSecondsAfterFinished: 60 } : {}),
        template: {
          spec: {
            // A packer Job whose packer-manifest step follows the builder, an init container.
            initContainers: [
              { name: 'source' },
              ...(options.reportsPush === true ? [{ name: 'image-ref' }] : []),
              ...(options.packerManifest === true ? [{ name: 'build' }] : []),
            ],
            containers: [{ name: options.packerManifest === true ? 'packer-manifest' : 'build' }],
            restartPolicy: 'Never',
          },
        },
      },
      status,
    };
  }

  pod(
    record: BuildEntity,
    phase: string,
    statuses: { init?: V1ContainerStatus[]; build: V1ContainerStatus },
    options: { reason?: string; message?: string; startedS?: number } = {},
  ): V1Pod {
    const init = statuses.init ?? [terminated('source', 0)];
    return {
      metadata: {
        name: `kiln-${record.id}-x7k2p`,
        namespace: NS,
        labels: { 'job-name': `kiln-${record.id}` },
      },
      spec: {
        initContainers: init.map(({ name }) => ({ name })),
        containers: [{ name: 'build' }],
      },
      status: {
        phase,
        startTime: ago(options.startedS ?? 120) as unknown as Date,
        ...(options.reason === undefined ? {} : { reason: options.reason }),
        ...(options.message === undefined ? {} : { message: options.message }),
        initContainerStatuses: init,
        containerStatuses: [statuses.build],
      },
    };
  }
}

function containerStatus(name: string, state: V1ContainerStatus['state']): V1ContainerStatus {
  return { name, image: `${name}:1`, imageID: '', ready: false, restartCount: 0, state };
}
const running = (name: string) =>
  containerStatus(name, { running: { startedAt: ago(100) as unknown as Date } });
const waiting = (name: string, reason: string) => containerStatus(name, { waiting: { reason } });
function terminated(
  name: string,
  exitCode: number,
  reason = 'Completed',
  message?: string,
  finishedS = 30,
) {
  return containerStatus(name, {
    terminated: {
      exitCode,
      reason,
      ...(message === undefined ? {} : { message }),
      startedAt: ago(finishedS + 70) as unknown as Date,
      finishedAt: ago(finishedS) as unknown as Date,
    },
  });
}
/** A Job that completed `seconds` ago. */
/** A Warning the Job controller recorded on the build's Job `secondsAgo` ago. */
const jobEvent = (
  record: BuildEntity,
  reason: string,
  message: string,
  secondsAgo = 5,
): CoreV1Event => ({
  metadata: { name: `kiln-${record.id}.${reason.toLowerCase()}`, namespace: NS },
  involvedObject: {
    apiVersion: 'batch/v1',
    kind: 'Job',
    name: `kiln-${record.id}`,
    namespace: NS,
    uid: 'job-uid',
  },
  reason,
  message,
  type: reason === 'SuccessfulCreate' ? 'Normal' : 'Warning',
  count: 3,
  lastTimestamp: ago(secondsAgo) as unknown as Date,
});

const QUOTA_REFUSAL =
  'Error creating: pods "kiln-x-7k2p" is forbidden: exceeded quota: build-quota, requested: pods=1, used: pods=1, limited: pods=1';
const PSA_REFUSAL =
  'Error creating: pods "kiln-x-7k2p" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "build" must set securityContext.allowPrivilegeEscalation=false)';
const UNSCHEDULABLE_TIMEOUT_MS = 900_000;

const completedAgo = (seconds: number): V1JobStatus => ({
  succeeded: 1,
  completionTime: ago(seconds) as unknown as Date,
  conditions: [
    { type: 'Complete', status: 'True', lastTransitionTime: ago(seconds) as unknown as Date },
  ],
});
const complete = completedAgo(20);
const failedJob = (reason: string, message = 'the Job failed'): V1JobStatus => ({
  failed: 1,
  conditions: [
    {
      type: 'Failed',
      status: 'True',
      reason,
      message,
      lastTransitionTime: ago(20) as unknown as Date,
    },
  ],
});
const grant = (over: Partial<BuildAccessGrant> = {}): BuildAccessGrant => ({
  ok: true,
  secrets: {},
  env: {},
  notes: [],
  ...over,
});
const ROBOT_CONFIG = JSON.stringify({
  auths: { 'registry.example.com': { auth: Buffer.from('robot:s3cr3t-pw').toString('base64') } },
});

// ---- the harness ------------------------------------------------------------------------------

let ground: LifecycleGround;
let world: World;

beforeAll(async () => {
  ground = await lifecycleGround('reconciler-table');
  world = new World(ground);
});

afterAll(() => ground.close());

async function reconcileOnce(given: Given): Promise<Effects> {
  const cluster = new FakeCluster(given.build);
  cluster.jobTaken = given.jobTaken ?? false;
  cluster.statusConflict = given.statusConflict ?? false;
  if (given.secret?.metadata?.name !== undefined)
    cluster.secrets.set(given.secret.metadata.name, given.secret);
  const sink = new FakeSink();
  const podLogs = new FakePodLogs();
  const earlier = given.earlier;
  // The process started at the earlier reconcile, or at this one.
  let now = NOW - (earlier?.sinceS ?? 0) * 1000;
  const woken: string[] = [];
  const metrics = new Metrics({ tenantLabels: false });
  /** What the informers' caches hold. */
  let cached = { job: given.job, pod: given.pod };
  const key = `${NS}/${given.build.metadata.name}`;
  const deps: ReconcilerDeps = {
    caches: {
      build: (k) => (k === key ? given.build : undefined),
      job: (_ns, name) => (cached.job?.metadata?.name === name ? cached.job : undefined),
      podOfJob: (_ns, job) =>
        cached.pod?.metadata?.labels?.['job-name'] === job ? cached.pod : undefined,
      jobEvents: (_ns, job) =>
        (given.jobEvents ?? []).filter((event) => event.involvedObject.name === job),
    },
    artifacts: {
      mintUploadTokens: () => Promise.resolve({ sbom: 'sbom-token', scan: 'scan-token' }),
      gate: () => Promise.resolve(given.gate ?? { pass: true }),
    },
    provenance: {
      produce: () => Promise.resolve(given.provenance ?? { state: 'attached' }),
    },
    sealer: { sealAll: (v) => ({ ...v }), unsealAll: (v) => ({ ...v }), fingerprint: (v) => v },
    access: {
      prepare: (_build, masking) => {
        const access = given.access ?? grant();
        if (access.ok && access.dockerConfig !== undefined) masking.register([access.dockerConfig]);
        return Promise.resolve(access);
      },
    },
    builds: cluster,
    workloads: cluster,
    lifecycle: ground.lifecycle,
    admission: ground.admission(sink),
    sink,
    logs: podLogs,
    cursors: { containerCursors: () => Promise.resolve(new Map()) },
    logger: new LogCapture().logger,
    settings: {
      ...TABLE_SETTINGS,
      ...(given.namespaces === undefined ? {} : { namespaces: given.namespaces }),
      job: { ...DEFAULT_JOB_SETTINGS, steps: { ...DEFAULT_JOB_SETTINGS.steps, ...given.steps } },
    },
    wake: (k) => woken.push(k),
    metrics,
    now: () => now,
  };
  const reconciler = new BuildReconciler(deps);
  const signal = new AbortController().signal;
  const succeed = jest.spyOn(
    BuildReconciler.prototype as unknown as { succeed: (...args: unknown[]) => unknown },
    'succeed',
  );
  try {
    if (earlier !== undefined) {
      podLogs.live = earlier.log === 'reading';
      cached = {
        job: 'job' in earlier ? earlier.job : given.job,
        pod: 'pod' in earlier ? earlier.pod : given.pod,
      };
      await reconciler.reconcile(key, signal);
      await settle();
      await earlier.meanwhile?.();
      now = NOW;
      cached = { job: given.job, pod: given.pod };
      cluster.forget();
      sink.lines.length = 0;
    }
    succeed.mockClear();
    if (given.podChangesTo !== undefined) {
      reconciler.podChanged(given.podChangesTo);
      await settle();
      return await effectsOf(
        given,
        { cluster, sink, woken, metrics, packer: undefined },
        undefined,
      );
    }
    sink.refuseKilnLines = given.kilnLinesFail === true;
    let threw: string | undefined;
    const result = await reconciler.reconcile(key, signal).catch((error: unknown) => {
      if (given.kilnLinesFail !== true) throw error;
      threw = error instanceof Error ? error.message : String(error);
      return undefined;
    });
    await settle();
    const packer = succeed.mock.calls[0]?.[3] as PackerReport | undefined;
    const effects = await effectsOf(
      given,
      { cluster, sink, woken, metrics, packer },
      result?.requeueAfterMs,
    );
    return threw === undefined ? effects : { ...effects, threw };
  } finally {
    succeed.mockRestore();
    reconciler.close();
    await reconciler.stopAll();
  }
}

const TABLE_SETTINGS = {
  namespaces: oneNamespace(NS),
  drainDeadlineMs: DRAIN_DEADLINE_MS,
  imagePullTimeoutMs: PULL_TIMEOUT_MS,
  unschedulableTimeoutMs: UNSCHEDULABLE_TIMEOUT_MS,
  ttlSecondsAfterFinished: 3_600,
  cancelSettleMs: 1_000,
  follower: { ...DEFAULT_LOG_FOLLOWER_OPTIONS, retryBaseMs: 1, retryMaxMs: 5 },
};

/** Lets the log followers' streams and appends run (a few turns of the event loop). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

async function effectsOf(
  given: Given,
  {
    cluster,
    sink,
    woken,
    metrics,
    packer,
  }: {
    cluster: FakeCluster;
    sink: FakeSink;
    woken: string[];
    metrics: Metrics;
    packer: PackerReport | undefined;
  },
  requeueAfterMs: number | undefined,
): Promise<Effects> {
  const id = given.build.metadata.labels?.['kiln.dev/build-id'] ?? cluster.status?.buildId;
  const anonymous = (text: string) => (id === undefined ? text : text.split(id).join('<id>'));
  const record = id === undefined ? undefined : await ground.lifecycle.find(id);
  const status = cluster.status;
  const condition = status?.conditions?.[0];
  return {
    writes: cluster.writes.map(anonymous),
    reads: cluster.reads.map(anonymous),
    status:
      status === undefined
        ? undefined
        : {
            ...(status.state === undefined ? {} : { state: status.state }),
            condition: `${condition?.status}/${condition?.reason}`,
            ...(status.failureReason === undefined ? {} : { failureReason: status.failureReason }),
            ...(status.message === undefined ? {} : { message: anonymous(status.message) }),
            ...(status.jobName === undefined ? {} : { jobName: anonymous(status.jobName) }),
            ...(status.podName === undefined ? {} : { podName: anonymous(status.podName) }),
          },
    events: cluster.events,
    masked: sink.masked,
    kilnLines: sink.lines.filter((l) => l.container === 'kiln').map((l) => anonymous(l.text)),
    podLines: [
      ...new Set(sink.lines.filter((l) => l.container !== 'kiln').map((l) => anonymous(l.text))),
    ],
    record:
      record === undefined
        ? undefined
        : [record.status, record.failureReason].filter((v) => v !== null).join(' '),
    requeueAfterMs,
    woken: woken.map(anonymous),
    droppedAtDeadline: sumOf(
      parsePrometheusText((await metrics.render()).body),
      'kiln_log_lines_dropped_total',
      { cause: 'drain_deadline' },
    ),
    packer,
  };
}

/** Runs a table: each row reconciled once, its effects compared with what it wants. */
function table(rows: Record<string, Row>): void {
  it.each(Object.entries(rows))('%s', async (_name, row) => {
    const effects = await reconcileOnce(await row.given(world));
    expect(pick(effects, row.want)).toEqual(row.want);
  });
}

/** The effects a row names (a row says nothing about the others). */
function pick(effects: Effects, want: Partial<Effects>): Partial<Effects> {
  return Object.fromEntries(Object.keys(want).map((key) => [key, effects[key as keyof Effects]]));
}

const ALL_QUIET = { writes: [], events: [], kilnLines: [], requeueAfterMs: undefined };

// ---- the tables -------------------------------------------------------------------------------

describe(`${BuildReconciler.name}: registration`, () => {
  table({
    'registers a Build applied with kubectl: a queued record with a number, an Event, its status': {
      given: () => Promise.resolve({ build: world.applied('applied-new') }),
      want: {
        writes: ['status Build applied-new'],
        status: { state: 'queued', condition: 'Unknown/Queued' },
        events: ['Normal Registered'],
        record: 'queued',
        requeueAfterMs: undefined,
      },
    },
    'refuses a Build naming a project its tenant does not have: InvalidSpec, no record': {
      given: () =>
        Promise.resolve({
          build: world.applied('applied-unknown', {
            projectId: '00000000-0000-4000-8000-000000000000',
          }),
        }),
      want: {
        writes: ['status Build applied-unknown'],
        status: {
          state: 'failed',
          condition: 'False/InvalidSpec',
          failureReason: 'InvalidSpec',
          message: expect.stringMatching(
            /^tenant \S+ has no project 00000000-0000-4000-8000-000000000000$/,
          ) as unknown as string,
        },
        events: ['Warning InvalidSpec'],
        record: undefined,
        requeueAfterMs: undefined,
      },
    },
    'refuses a Build whose repository URL carries credentials, quoting none of them': {
      given: () =>
        Promise.resolve({
          build: world.applied('applied-credentials', {
            source: { repository: 'https://ci:hunter2-token@git.example.com/web/app.git' },
          }),
        }),
      want: {
        writes: ['status Build applied-credentials'],
        status: {
          state: 'failed',
          condition: 'False/InvalidSpec',
          failureReason: 'InvalidSpec',
          message: expect.not.stringContaining('hunter2') as unknown as string,
        },
        events: ['Warning InvalidSpec'],
        record: undefined,
      },
    },
    'refuses a Build with the configuration of an active build as its duplicate: InvalidSpec': {
      given: async () => {
        const build = world.applied('applied-duplicate');
        const spec = buildSpecOf(build);
        await ground.lifecycle.create(
          ground.newBuild({ spec, specDigest: specDigest(spec, (v) => v), gitBranch: 'dup' }),
        );
        return { build };
      },
      want: {
        writes: ['status Build applied-duplicate'],
        status: {
          state: 'failed',
          condition: 'False/InvalidSpec',
          failureReason: 'InvalidSpec',
          message: expect.stringContaining('same configuration') as unknown as string,
        },
        events: ['Warning InvalidSpec'],
        record: undefined,
      },
    },
    'cancels the build of a Build replaced under its name (another uid), and registers the new one':
      {
        given: async () => {
          const old = await world.running();
          await ground.dataSource.query(`UPDATE builds SET config = $2 WHERE id = $1`, [
            old.id,
            { form: 'resource', namespace: NS, name: 'applied-replaced', uid: 'old-uid' },
          ]);
          return { build: world.applied('applied-replaced') };
        },
        want: {
          writes: ['status Build applied-replaced'],
          status: { state: 'queued', condition: 'Unknown/Queued' },
          events: ['Normal Replaced', 'Normal Registered'],
          record: 'queued',
        },
      },
    'leaves a Build refused before alone (InvalidSpec is permanent)': {
      given: () =>
        Promise.resolve({
          build: {
            ...world.applied('applied-refused', { projectId: 'gone' }),
            status: { state: 'failed', failureReason: 'InvalidSpec', message: 'no project' },
          },
        }),
      want: ALL_QUIET,
    },
    'deletes a Build the API wrote whose record was deleted through the API': {
      given: async () => {
        const record = await world.queued();
        await ground.dataSource.query('DELETE FROM builds WHERE id = $1', [record.id]);
        return { build: world.build(record) };
      },
      want: { writes: ['delete Build <id>'], record: undefined, requeueAfterMs: undefined },
    },
    'lets go of a deleted Build that has no record': {
      given: () =>
        Promise.resolve({
          build: {
            ...world.applied('applied-deleted'),
            metadata: {
              ...world.applied('applied-deleted').metadata,
              finalizers: [LOGS_FINALIZER],
              deletionTimestamp: ago(1),
            },
          },
        }),
      want: { writes: ['patch Build applied-deleted finalizers=[]'], record: undefined },
    },
  });
});

describe(`${BuildReconciler.name}: queued and suspended`, () => {
  table({
    'mirrors a suspended build as queued and does not start it': {
      given: async () => ({ build: world.build(await world.queued(), { suspend: true }) }),
      want: {
        writes: ['status Build <id>'],
        status: { state: 'queued', condition: 'Unknown/Queued' },
        record: 'queued',
        requeueAfterMs: undefined,
      },
    },
    'writes nothing for a suspended build whose status mirrors it already': {
      given: async () => {
        const record = await world.queued();
        const build = world.build(record, { suspend: true });
        return { build: { ...build, status: await mirroredStatus(build, record) } };
      },
      want: { ...ALL_QUIET, record: 'queued' },
    },
    'does not start a queued build whose cancel was asked for': {
      given: async () => ({ build: world.build(await world.queued(), { cancelRequested: true }) }),
      want: { status: { state: 'queued', condition: 'Unknown/Queued' }, record: 'queued' },
    },
    'lets go of a deleted Build whose build never started': {
      given: async () => ({
        build: world.build(await world.queued(), { finalizer: true, deleting: true }),
      }),
      want: { writes: ['patch Build <id> finalizers=[]'], record: 'queued' },
    },
  });
});

describe(`${BuildReconciler.name}: starting (the Job and what it mounts)`, () => {
  table({
    'starts an unsuspended build: finalizer, Secret, Job owned by the Build, then owns the Secret':
      {
        given: async () => ({
          build: world.build(await world.queued()),
          access: grant({ dockerConfig: ROBOT_CONFIG, notes: ['registry checked'] }),
        }),
        want: {
          writes: [
            'patch Build <id> finalizers=[kiln.dev/logs]',
            `create Secret kiln-<id> keys=${REGISTRY_CONFIG_KEY}`,
            'create Job kiln-<id> controller=Build/<id>',
            'patch Secret kiln-<id> controller=Job/kiln-<id>',
            'status Build <id>',
          ],
          // It made the Secret: it patches it without reading it first.
          reads: [],
          status: { state: 'in_progress', condition: 'Unknown/Running', jobName: 'kiln-<id>' },
          events: ['Normal JobCreated'],
          kilnLines: ['[kiln] registry checked'],
          record: 'in_progress',
          requeueAfterMs: undefined,
        },
      },
    'writes the new Job’s Event, ownership and status even when its notes cannot be written, then throws to retry':
      {
        given: async () => ({
          build: world.build(await world.queued(), { finalizer: true }),
          access: grant({ dockerConfig: ROBOT_CONFIG, notes: ['registry checked'] }),
          kilnLinesFail: true,
        }),
        want: {
          threw: 'the database is unavailable',
          writes: [
            `create Secret kiln-<id> keys=${REGISTRY_CONFIG_KEY}`,
            'create Job kiln-<id> controller=Build/<id>',
            'patch Secret kiln-<id> controller=Job/kiln-<id>',
            'status Build <id>',
          ],
          status: { state: 'in_progress', condition: 'Unknown/Running', jobName: 'kiln-<id>' },
          events: ['Normal JobCreated'],
          record: 'in_progress',
        },
      },
    'starts a build the API started with its finalizer: no write of the finalizer first': {
      given: async () => ({
        build: world.build(await world.queued(), { finalizer: true }),
        access: grant({ dockerConfig: ROBOT_CONFIG }),
      }),
      want: {
        writes: [
          `create Secret kiln-<id> keys=${REGISTRY_CONFIG_KEY}`,
          'create Job kiln-<id> controller=Build/<id>',
          'patch Secret kiln-<id> controller=Job/kiln-<id>',
          'status Build <id>',
        ],
        status: { state: 'in_progress', condition: 'Unknown/Running', jobName: 'kiln-<id>' },
        events: ['Normal JobCreated'],
        record: 'in_progress',
        requeueAfterMs: undefined,
      },
    },
    'starts a build whose Job mounts no Secret: no Secret made, none read': {
      given: async () => ({
        build: world.build(await world.queued(), { finalizer: true }),
        access: grant({}),
      }),
      want: {
        writes: ['create Job kiln-<id> controller=Build/<id>', 'status Build <id>'],
        reads: [],
        record: 'in_progress',
        requeueAfterMs: undefined,
      },
    },
    'starts a build with an SBOM: its upload tokens in its Secret and registered for masking, none read back':
      {
        given: async () => ({
          build: world.build(await world.queued(world.spec({ sbomTool: 'syft' })), {
            finalizer: true,
          }),
          access: grant({}),
          steps: { kilnImage: 'kiln:test', uploadUrl: 'http://kiln.kiln.svc:8080' },
        }),
        want: {
          writes: [
            `create Secret kiln-<id> keys=${UPLOAD_TOKEN_PREFIX}sbom`,
            'create Job kiln-<id> controller=Build/<id>',
            'patch Secret kiln-<id> controller=Job/kiln-<id>',
            'status Build <id>',
          ],
          reads: [],
          masked: ['sbom-token', 'scan-token'],
          record: 'in_progress',
        },
      },
    'fails a build whose secret reference does not resolve, before any Job: SecretUnavailable': {
      given: async () => ({
        build: world.build(await world.running(), { finalizer: true }),
        access: {
          ok: false,
          reason: 'SecretUnavailable',
          message: 'env API_TOKEN: vault:kv/data/app#token does not exist',
        },
      }),
      want: {
        writes: ['status Build <id>', 'patch Build <id> finalizers=[]'],
        status: {
          state: 'failed',
          condition: 'False/SecretUnavailable',
          failureReason: 'SecretUnavailable',
          message: 'env API_TOKEN: vault:kv/data/app#token does not exist',
        },
        events: ['Warning SecretUnavailable'],
        record: 'failed SecretUnavailable',
        requeueAfterMs: undefined,
      },
    },
    'fails a build its method cannot translate, before any Job: InvalidSpec': {
      given: async () => {
        const spec = world.spec();
        const record = await world.running({
          ...spec,
          source: { ...spec.source, repository: null },
        });
        return { build: world.build(record, { finalizer: true }) };
      },
      want: {
        writes: ['status Build <id>', 'patch Build <id> finalizers=[]'],
        status: {
          state: 'failed',
          condition: 'False/InvalidSpec',
          failureReason: 'InvalidSpec',
          message: 'the project has no git repository to build from',
        },
        events: ['Warning InvalidSpec'],
        record: 'failed InvalidSpec',
      },
    },
    'fails a build whose namespace admits only stricter pods, before its access or Job: InvalidSpec naming where it belongs':
      {
        given: async () => ({
          // A kaniko build (baseline) in the namespace of restricted builds.
          build: world.build(await world.running(), { finalizer: true }),
          namespaces: { restricted: NS, baseline: 'kiln-builds-baseline', privileged: undefined },
          // Never asked: a refusal here would be the build's failure.
          access: { ok: false, reason: 'SecretUnavailable', message: 'not to be asked' },
        }),
        want: {
          writes: ['status Build <id>', 'patch Build <id> finalizers=[]'],
          status: {
            state: 'failed',
            condition: 'False/InvalidSpec',
            failureReason: 'InvalidSpec',
            message: `kaniko builds need Pod Security "baseline" pods and belong in namespace kiln-builds-baseline; namespace ${NS} admits Pod Security "restricted" pods at most`,
          },
          events: ['Warning InvalidSpec'],
          masked: [],
          record: 'failed InvalidSpec',
          requeueAfterMs: undefined,
        },
      },
    'runs a build in a namespace more permissive than its method needs': {
      given: async () => ({
        build: world.build(await world.queued(), { finalizer: true }),
        namespaces: {
          restricted: 'kiln-builds-restricted',
          baseline: 'kiln-builds-baseline',
          privileged: NS,
        },
        access: grant({}),
      }),
      want: {
        writes: ['create Job kiln-<id> controller=Build/<id>', 'status Build <id>'],
        record: 'in_progress',
      },
    },
    'looks again soon when a Job of its name exists that the cache has not seen': {
      given: async () => ({
        build: world.build(await world.running(), { finalizer: true }),
        jobTaken: true,
      }),
      want: { events: [], record: 'in_progress', requeueAfterMs: 500 },
    },
    'adopts its Job made by another operator: the Secret it left unowned becomes the Job’s': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          secret: { metadata: { name: `kiln-${record.id}` }, data: {} },
        };
      },
      want: {
        writes: ['patch Secret kiln-<id> controller=Job/kiln-<id>', 'status Build <id>'],
        // Once to register its values for masking, once to see who controls it.
        reads: ['read Secret kiln-<id>', 'read Secret kiln-<id>'],
        status: { state: 'in_progress', condition: 'Unknown/Running', jobName: 'kiln-<id>' },
        events: [],
        requeueAfterMs: undefined,
      },
    },
    'leaves alone a Job of its name that another Build controls, and says so': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        const other = { ...build, metadata: { ...build.metadata, uid: 'uid-other' } };
        return { build, job: world.job(record, other, { active: 1 }) };
      },
      want: {
        writes: ['status Build <id>'],
        status: {
          state: 'in_progress',
          condition: 'Unknown/Running',
          message: 'Job kiln-<id> belongs to another Build (uid uid-other); kiln will not adopt it',
        },
        events: ['Warning JobConflict'],
        requeueAfterMs: 30_000,
      },
    },
  });
});

describe(`${BuildReconciler.name}: a pod the cluster holds back`, () => {
  table({
    'fails with PodRefused at once when Pod Security refuses its pod, and deletes the Job that keeps trying':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          return {
            build,
            job: world.job(record, build, {}),
            jobEvents: [jobEvent(record, 'FailedCreate', PSA_REFUSAL)],
          };
        },
        want: {
          writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
          status: {
            state: 'failed',
            condition: 'False/PodRefused',
            failureReason: 'PodRefused',
            message: `the cluster refused the build's pod: ${PSA_REFUSAL.replace('Error creating: ', '')}`,
            jobName: 'kiln-<id>',
          },
          record: 'failed PodRefused',
          requeueAfterMs: undefined,
        },
      },
    'fails with PodRefused when an admission webhook denies its pod': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, {}),
          jobEvents: [
            jobEvent(
              record,
              'FailedCreate',
              'Error creating: admission webhook "policy.example.com" denied the request: images must come from registry.example.com',
            ),
          ],
        };
      },
      want: { record: 'failed PodRefused' },
    },
    'waits for a full quota: its status and its log say so, once': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, {}),
          jobEvents: [jobEvent(record, 'FailedCreate', QUOTA_REFUSAL)],
        };
      },
      want: {
        writes: ['status Build <id>'],
        status: {
          state: 'in_progress',
          condition: 'Unknown/Running',
          message: `waiting for the cluster (ClusterQuota): ${QUOTA_REFUSAL.replace('Error creating: ', '')}`,
          jobName: 'kiln-<id>',
        },
        kilnLines: [
          `[kiln] waiting for the cluster (ClusterQuota): ${QUOTA_REFUSAL.replace('Error creating: ', '')}`,
        ],
        record: 'in_progress',
        requeueAfterMs: undefined,
      },
    },
    'no longer waits for the quota once the Job made its pod after the refusal': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          jobEvents: [
            jobEvent(record, 'FailedCreate', QUOTA_REFUSAL, 30),
            jobEvent(record, 'SuccessfulCreate', 'Created pod: kiln-x-7k2p', 2),
          ],
        };
      },
      want: { kilnLines: [], record: 'in_progress' },
    },
    'waits while no node fits its pod, and looks again when KILN_OPERATOR_UNSCHEDULABLE_SECONDS runs out':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          const pod = world.pod(record, 'Pending', {
            init: [waiting('source', 'PodInitializing')],
            build: waiting('build', 'PodInitializing'),
          });
          pod.status!.initContainerStatuses = [];
          pod.status!.containerStatuses = [];
          pod.status!.conditions = [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/3 nodes are available: 3 Insufficient cpu.',
              lastTransitionTime: ago(60) as unknown as Date,
            },
          ];
          return { build, job: world.job(record, build, { active: 1 }), pod };
        },
        want: {
          kilnLines: [
            '[kiln] waiting for the cluster (Unschedulable): 0/3 nodes are available: 3 Insufficient cpu.',
          ],
          record: 'in_progress',
          requeueAfterMs: UNSCHEDULABLE_TIMEOUT_MS - 60_000,
        },
      },
    'fails with Unschedulable once no node fitted its pod for KILN_OPERATOR_UNSCHEDULABLE_SECONDS':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          const pod = world.pod(record, 'Pending', {
            init: [waiting('source', 'PodInitializing')],
            build: waiting('build', 'PodInitializing'),
          });
          pod.status!.conditions = [
            {
              type: 'PodScheduled',
              status: 'False',
              reason: 'Unschedulable',
              message: '0/3 nodes are available: 3 Insufficient cpu.',
              lastTransitionTime: ago(UNSCHEDULABLE_TIMEOUT_MS / 1000 + 1) as unknown as Date,
            },
          ];
          return { build, job: world.job(record, build, { active: 1 }), pod };
        },
        want: {
          writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
          status: {
            state: 'failed',
            condition: 'False/Unschedulable',
            failureReason: 'Unschedulable',
            message:
              "no node could run the build's pod for 900 s (KILN_OPERATOR_UNSCHEDULABLE_SECONDS): 0/3 nodes are available: 3 Insufficient cpu.",
            jobName: 'kiln-<id>',
          },
          record: 'failed Unschedulable',
        },
      },
  });
});

describe(`${BuildReconciler.name}: running`, () => {
  table({
    'fails with ImagePullFailed in a process that never saw the build, when its image has failed to pull for longer than the timeout (the pod says since when)':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          return {
            build,
            job: world.job(record, build, { active: 1 }),
            pod: world.pod(
              record,
              'Pending',
              {
                init: [terminated('source', 0, 'Completed', undefined, PULL_TIMEOUT_MS / 1000 + 5)],
                build: waiting('build', 'ImagePullBackOff'),
              },
              { startedS: PULL_TIMEOUT_MS / 1000 + 20 },
            ),
          };
        },
        want: {
          writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
          status: {
            state: 'failed',
            condition: 'False/ImagePullFailed',
            failureReason: 'ImagePullFailed',
            message: 'image build:1 of container build could not be pulled: ImagePullBackOff',
            jobName: 'kiln-<id>',
          },
          record: 'failed ImagePullFailed',
          requeueAfterMs: undefined,
        },
      },
    'mirrors a running build with its Job and pod while its pod is pending': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          pod: world.pod(record, 'Pending', {
            init: [waiting('source', 'PodInitializing')],
            build: waiting('build', 'PodInitializing'),
          }),
        };
      },
      want: {
        writes: ['status Build <id>'],
        status: {
          state: 'in_progress',
          condition: 'Unknown/Running',
          jobName: 'kiln-<id>',
          podName: 'kiln-<id>-x7k2p',
        },
        record: 'in_progress',
        requeueAfterMs: undefined,
      },
    },
    'writes nothing while the build runs and its status mirrors it already': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        const pod = world.pod(record, 'Running', { build: running('build') });
        const status = await mirroredStatus(build, record, {
          jobName: `kiln-${record.id}`,
          podName: pod.metadata!.name!,
        });
        return {
          build: { ...build, status },
          job: world.job(record, build, { active: 1 }),
          pod,
          earlier: { sinceS: 5, log: 'reading' },
        };
      },
      want: { ...ALL_QUIET, status: undefined, record: 'in_progress' },
    },
    'looks again after a while when the builder image fails to pull, short of the timeout': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          pod: world.pod(record, 'Pending', { build: waiting('build', 'ImagePullBackOff') }),
        };
      },
      // The pod says since when: the end of the container before, 30 s ago.
      want: { record: 'in_progress', requeueAfterMs: PULL_TIMEOUT_MS - 30_000 },
    },
  });
});

/** A build whose Job ended (`jobStatus`, the pod's builder `builder`), its log read by now. */
async function endedWith(
  jobStatus: V1JobStatus,
  builder: V1ContainerStatus,
  options: {
    podReason?: string;
    podMessage?: string;
    gate?: Given['gate'];
    provenance?: Given['provenance'];
    reportsPush?: boolean;
    packerManifest?: boolean;
    init?: V1ContainerStatus[];
  } = {},
): Promise<Given> {
  const record = await world.running();
  const build = world.build(record, { finalizer: true });
  const phase = jobStatus.succeeded === 1 ? 'Succeeded' : 'Failed';
  return {
    build,
    job: world.job(record, build, jobStatus, {
      reportsPush: options.reportsPush ?? false,
      packerManifest: options.packerManifest ?? false,
    }),
    pod: world.pod(
      record,
      phase,
      { build: builder, ...(options.init === undefined ? {} : { init: options.init }) },
      { reason: options.podReason, message: options.podMessage },
    ),
    ...(options.gate === undefined ? {} : { gate: options.gate }),
    ...(options.provenance === undefined ? {} : { provenance: options.provenance }),
    earlier: { sinceS: 5, log: 'read' },
  };
}

/** What a recorded end leaves besides its status: the Job handed to its TTL, the Build let go. */
const HANDED_OVER = [
  'patch Job kiln-<id> {"spec":{"ttlSecondsAfterFinished":3600}}',
  'status Build <id>',
  'patch Build <id> finalizers=[]',
];

describe(`${BuildReconciler.name}: the end of a Job`, () => {
  const pushed = pushedMessage({
    digest: DIGEST,
    images: [`registry.example.com/web/app:v1@${DIGEST}`],
  }).message;
  const PACKER_ARTIFACTS = {
    manifestDigest: DIGEST,
    artifacts: [{ name: 'ubuntu', builderType: 'amazon-ebs', artifactId: 'us-east-1:ami-0e2c' }],
  };
  const packerArtifacts = packerMessage({ kind: 'artifacts', artifacts: PACKER_ARTIFACTS }).message;
  const noManifest = packerMessage({ kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR }).message;

  table({
    'records a success with what it pushed, once its log is stored': {
      given: () =>
        endedWith(complete, terminated('build', 0), {
          reportsPush: true,
          init: [terminated('source', 0), terminated('image-ref', 0, 'Completed', pushed)],
        }),
      want: {
        writes: HANDED_OVER,
        status: { state: 'success', condition: 'True/Succeeded', jobName: 'kiln-<id>' },
        kilnLines: [],
        record: 'success',
        requeueAfterMs: undefined,
        // The follower that read the log woke the Build, for this reconcile.
        woken: [`${NS}/<id>`],
      },
    },
    'records a success without a digest when the push report cannot be read, and says so': {
      given: () => endedWith(complete, terminated('build', 0), { reportsPush: true }),
      want: {
        record: 'success',
        kilnLines: [
          "WARN: [kiln] could not learn the pushed image's digest (the image-ref step left no termination message); the build records none",
        ],
      },
    },
    'hands a packer success what packer made, as the packer-manifest step read it': {
      given: () =>
        endedWith(complete, terminated('packer-manifest', 0, 'Completed', packerArtifacts), {
          packerManifest: true,
          init: [terminated('source', 0), terminated('build', 0)],
        }),
      want: {
        writes: HANDED_OVER,
        kilnLines: [],
        record: 'success',
        packer: { kind: 'artifacts', artifacts: PACKER_ARTIFACTS },
      },
    },
    'ends a packer success whose template writes no manifest with a note saying so': {
      given: () =>
        endedWith(complete, terminated('packer-manifest', 0, 'Completed', noManifest), {
          packerManifest: true,
          init: [terminated('source', 0), terminated('build', 0)],
        }),
      want: {
        kilnLines: [
          '[kiln] the template has no manifest post-processor; provenance names no artifacts',
        ],
        record: 'success',
        packer: { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR },
      },
    },
    'ends a packer success whose manifest cannot be read with a WARN line, and succeeds': {
      given: () =>
        endedWith(complete, terminated('packer-manifest', 0, 'Completed'), {
          packerManifest: true,
          init: [terminated('source', 0), terminated('build', 0)],
        }),
      want: {
        kilnLines: [
          "WARN: [kiln] could not read packer's manifest: the packer-manifest step left no termination message; provenance names no artifacts",
        ],
        record: 'success',
        packer: {
          kind: 'problem',
          problem: 'the packer-manifest step left no termination message',
        },
      },
    },
    'hands a success without a packer-manifest step nothing of packer': {
      given: () => endedWith(complete, terminated('build', 0)),
      want: { record: 'success', packer: undefined },
    },
    'fails with PolicyViolation when the scan policy refuses the image': {
      given: () =>
        endedWith(complete, terminated('build', 0), {
          gate: { pass: false, message: '1 HIGH finding; the policy fails on high' },
        }),
      want: {
        writes: HANDED_OVER,
        status: {
          state: 'failed',
          condition: 'False/PolicyViolation',
          failureReason: 'PolicyViolation',
          message: '1 HIGH finding; the policy fails on high',
          jobName: 'kiln-<id>',
        },
        kilnLines: ['ERROR: [kiln] 1 HIGH finding; the policy fails on high'],
        record: 'failed PolicyViolation',
      },
    },
    'fails with ProvenanceFailed when the tenant requires provenance and it could not be made': {
      given: () =>
        endedWith(complete, terminated('build', 0), {
          provenance: {
            state: 'failed: could not be signed: no key',
            fails: 'provenance could not be signed: no key; the tenant requires provenance',
          },
        }),
      want: {
        writes: HANDED_OVER,
        status: {
          state: 'failed',
          condition: 'False/ProvenanceFailed',
          failureReason: 'ProvenanceFailed',
          message: 'provenance could not be signed: no key; the tenant requires provenance',
          jobName: 'kiln-<id>',
        },
        kilnLines: [],
        record: 'failed ProvenanceFailed',
      },
    },
    'fails with BuildFailed and the termination message when the builder exits non-zero': {
      given: () =>
        endedWith(
          failedJob('BackoffLimitExceeded'),
          terminated('build', 1, 'Error', 'error: COPY failed'),
        ),
      want: {
        writes: HANDED_OVER,
        status: {
          state: 'failed',
          condition: 'False/BuildFailed',
          failureReason: 'BuildFailed',
          message: 'container build exited with code 1: error: COPY failed',
          jobName: 'kiln-<id>',
        },
        record: 'failed BuildFailed',
      },
    },
    'fails with TimedOut when the Job outlived its deadline': {
      given: () => endedWith(failedJob('DeadlineExceeded'), terminated('build', 137, 'Error')),
      want: { record: 'failed TimedOut', requeueAfterMs: undefined },
    },
    'fails with OutOfMemory when a container was OOMKilled': {
      given: () =>
        endedWith(failedJob('BackoffLimitExceeded'), terminated('build', 137, 'OOMKilled')),
      want: { record: 'failed OutOfMemory' },
    },
    'fails with PodEvicted when the pod was evicted': {
      given: () =>
        endedWith(failedJob('BackoffLimitExceeded'), terminated('build', 137, 'Error'), {
          podReason: 'Evicted',
          podMessage: 'The node was low on resource: memory.',
        }),
      want: {
        status: {
          state: 'failed',
          condition: 'False/PodEvicted',
          failureReason: 'PodEvicted',
          message: "the build's pod was evicted: The node was low on resource: memory.",
          jobName: 'kiln-<id>',
        },
        record: 'failed PodEvicted',
      },
    },
    'follows the builder as soon as the pods’ informer says it started, before any reconcile': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        const job = world.job(record, build, { active: 1 });
        const pod = world.pod(record, 'Running', { build: running('build') });
        return {
          build,
          job,
          pod,
          earlier: {
            sinceS: 1,
            log: 'read',
            pod: world.pod(record, 'Pending', { build: waiting('build', 'PodInitializing') }),
          },
          podChangesTo: pod,
        };
      },
      want: { podLines: ['build printed this'], writes: [], kilnLines: [] },
    },
    'leaves a pod this process does not follow to the reconcile': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          podChangesTo: world.pod(record, 'Running', { build: running('build') }),
        };
      },
      want: { podLines: [], writes: [], kilnLines: [] },
    },
    'fails with PodDeleted when the pod this process read is gone and the Job failed': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        const pod = world.pod(record, 'Running', { build: running('build') });
        return {
          build,
          job: world.job(record, build, failedJob('BackoffLimitExceeded')),
          earlier: { sinceS: 5, log: 'reading', job: world.job(record, build, { active: 1 }), pod },
        };
      },
      // A deleted pod's gap is not the drain deadline's.
      want: { record: 'failed PodDeleted', droppedAtDeadline: 0 },
    },
    'fails with PodDeleted in a process that never saw the build, when the pod its status names is gone':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, {
            finalizer: true,
            status: { buildId: record.id, podName: `kiln-${record.id}-x7k2p` },
          });
          return { build, job: world.job(record, build, failedJob('BackoffLimitExceeded')) };
        },
        want: {
          kilnLines: [
            'WARN: [kiln] the pod was deleted before its log was read: the log of every container is missing',
          ],
          record: 'failed PodDeleted',
          requeueAfterMs: undefined,
        },
      },
    'gives up at once on the pod of a Job that ended longer than the drain deadline ago, in a process that never saw it':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          return {
            build,
            job: world.job(record, build, completedAgo(DRAIN_DEADLINE_MS / 1000 + 10)),
          };
        },
        want: {
          kilnLines: [
            'WARN: [kiln] no pod of the Job was seen within 120 s of its end: the log of every container is missing',
          ],
          record: 'success',
          requeueAfterMs: undefined,
          // One gap: how many lines it hides is unknown.
          droppedAtDeadline: 1,
        },
      },
    'waits for the log of an ended Job while it is read, and records nothing yet': {
      given: async () => ({
        ...(await endedWith(complete, terminated('build', 0))),
        earlier: { sinceS: 5, log: 'reading' },
      }),
      // No polling: the follower wakes the key when it is done; this is the drain deadline.
      want: {
        ...ALL_QUIET,
        record: 'in_progress',
        requeueAfterMs: DRAIN_DEADLINE_MS - 5_000,
        woken: [],
      },
    },
    'gives up on a log not read by the drain deadline: a marker, then the end': {
      given: async () => ({
        ...(await endedWith(complete, terminated('build', 0))),
        earlier: { sinceS: DRAIN_DEADLINE_MS / 1000 + 1, log: 'reading' },
      }),
      want: {
        kilnLines: ['source', 'build'].map(
          (container) =>
            `WARN: [kiln] the log was not read to its end within 120 s of the build's end: all of its lines from container ${container} are missing`,
        ),
        record: 'success',
        // Given up on by the reconciler, which goes on at once: no wake.
        woken: [],
        // One gap per container.
        droppedAtDeadline: 2,
      },
    },
    'waits for the pod of an ended Job that the cache has not shown yet': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        return { build, job: world.job(record, build, complete) };
      },
      // Until the drain deadline counted from the Job's end (before this process started).
      want: { ...ALL_QUIET, record: 'in_progress', requeueAfterMs: DRAIN_DEADLINE_MS - 20_000 },
    },
    'waits the whole drain deadline for the pod of a Job that ended while this process ran (its pod informer may lag)':
      {
        given: async () => {
          const record = await world.running();
          const build = world.build(record, { finalizer: true });
          return {
            build,
            job: world.job(record, build, complete),
            earlier: { sinceS: 60, log: 'reading', job: world.job(record, build, { active: 1 }) },
          };
        },
        want: { ...ALL_QUIET, record: 'in_progress', requeueAfterMs: DRAIN_DEADLINE_MS },
      },
  });
});

describe(`${BuildReconciler.name}: cancel and deletion`, () => {
  table({
    'cancels a running build asked to: the record cancelled, its Job deleted, the Build let go': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true, cancelRequested: true });
        build.spec.cancelReason = 'superseded by a newer commit';
        return { build, job: world.job(record, build, { active: 1 }) };
      },
      want: {
        writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
        status: {
          state: 'cancelled',
          condition: 'False/Cancelled',
          message: 'superseded by a newer commit',
        },
        record: 'cancelled',
        requeueAfterMs: undefined,
      },
    },
    'gives the log of a cancelled build a moment before deleting its Job': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true });
        const pod = world.pod(record, 'Running', { build: running('build') });
        const cancel = () => ground.lifecycle.cancel(record.tenantId, record.id, 'asked by a user');
        return {
          build,
          job: world.job(record, build, { active: 1 }),
          pod,
          earlier: { sinceS: 0, log: 'reading', meanwhile: cancel },
        };
      },
      want: { ...ALL_QUIET, record: 'cancelled', requeueAfterMs: 1_000 },
    },
    'cancels the build of a deleted Build, deletes its Job and lets the Build go': {
      given: async () => {
        const record = await world.running();
        const build = world.build(record, { finalizer: true, deleting: true });
        return { build, job: world.job(record, build, { active: 1 }) };
      },
      want: {
        writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
        status: {
          state: 'cancelled',
          condition: 'False/Cancelled',
          message: 'the Build resource was deleted',
        },
        record: 'cancelled',
      },
    },
    'hands over the Job of a build that ended while no operator ran, then lets the Build go': {
      given: async () => {
        const record = await world.failed('BuildFailed', 'container build exited with code 2');
        const build = world.build(record, { finalizer: true });
        return { build, job: world.job(record, build, failedJob('BackoffLimitExceeded')) };
      },
      want: {
        writes: HANDED_OVER,
        status: {
          state: 'failed',
          condition: 'False/BuildFailed',
          failureReason: 'BuildFailed',
          message: 'container build exited with code 2',
          jobName: 'kiln-<id>',
        },
        record: 'failed BuildFailed',
      },
    },
    'deletes the Job of a build that ended while its pod still runs': {
      given: async () => {
        const record = await world.failed('ImagePullFailed', 'image build:1 could not be pulled');
        const build = world.build(record, { finalizer: true });
        return { build, job: world.job(record, build, { active: 1 }) };
      },
      want: {
        writes: ['delete Job kiln-<id>', 'status Build <id>', 'patch Build <id> finalizers=[]'],
      },
    },
    'only mirrors an ended build whose log was stored before (no finalizer)': {
      given: async () => {
        const record = await world.succeeded();
        const build = world.build(record);
        return { build, job: world.job(record, build, complete, { ttl: true }) };
      },
      want: {
        writes: ['status Build <id>'],
        status: { state: 'success', condition: 'True/Succeeded', jobName: 'kiln-<id>' },
        record: 'success',
      },
    },
    'writes nothing for an ended build whose status mirrors it already': {
      given: async () => {
        const record = await world.succeeded();
        const build = world.build(record);
        return {
          build: {
            ...build,
            status: await mirroredStatus(build, record, { jobName: `kiln-${record.id}` }),
          },
          job: world.job(record, build, complete, { ttl: true }),
        };
      },
      want: { ...ALL_QUIET, status: undefined, record: 'success' },
    },
    'looks again soon when a status write meets a newer version of the Build (409)': {
      given: async () => ({
        build: world.build(await world.queued(), { suspend: true }),
        statusConflict: true,
      }),
      want: { writes: [], requeueAfterMs: 100 },
    },
  });
});

/** The status a reconcile writes for `record` (read from a reconcile of its own). */
async function mirroredStatus(
  build: BuildResource,
  record: BuildEntity,
  extra: { jobName?: string; podName?: string } = {},
): Promise<BuildResourceStatus> {
  const writer = new FakeCluster(build);
  await new StatusMirror(writer, () => NOW).mirror(structuredClone(build), record, extra);
  return writer.status!;
}
