import type {
  CoreV1Event,
  V1Job,
  V1OwnerReference,
  V1Pod,
  V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  BUILD_SECRET_PREFIX,
  buildObjectName,
  ENV_SECRET_PREFIX,
  GIT_CREDENTIAL_KEYS,
  type JobSettings,
  REGISTRY_CONFIG_KEY,
  S3_CREDENTIAL_KEYS,
  type S3UploadTarget,
} from '../../build-methods/job.js';
import { specDigest } from '../../manifest/build-spec.js';
import { UPLOAD_TOKEN_PREFIX } from '../../build-methods/steps.js';
import { BUILD_METHODS } from '../../build-methods/methods.js';
import { ConflictError, NotFoundError } from '../../common/errors.js';
import { carriesCredentials, credentialsInUrlProblem } from '../../common/url-credentials.js';
import type { CustomResources } from '../../kubernetes/custom-resources.js';
import { KubeApiError } from '../../kubernetes/errors.js';
import type { BuildAccess, BuildAccessGrant } from '../../integrations/build-access.js';
import type { KubeWorkloads } from '../../kubernetes/workloads.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import type { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import type { LogSink } from '../../logs/log-sink.js';
import type { SecretSealer } from '../../secrets/secret-sealer.js';
import {
  BUILD_API_VERSION,
  BUILD_KIND,
  type BuildCondition,
  type BuildResource,
  type BuildResourceStatus,
  KILN_LABELS,
} from '../api/build-resource.js';
import { buildSpecOf } from '../api/projection.js';
import type { ReconcileResult } from '../runtime/controller.js';
import {
  BuildLogFollower,
  DEFAULT_LOG_FOLLOWER_OPTIONS,
  type LogFollowerDeps,
  type LogFollowerOptions,
} from './log-follower.js';
import { type JobOutcome, outcomeOf, type PushedReport, pullFailing } from './outcome.js';
import { containerStates, containersInOrder } from './pod-state.js';

/** Holds a Build until every log stream of its pod is stored. */
export const LOGS_FINALIZER = 'kiln.dev/logs';
const FIELD_MANAGER = 'kiln-operator';

/** The cached objects the reconciler reads (informers: never mutated, cloned before a write). */
export interface ReconcilerCaches {
  build(key: string): BuildResource | undefined;
  job(namespace: string, name: string): V1Job | undefined;
  podOfJob(namespace: string, job: string): V1Pod | undefined;
}

export interface ReconcilerSettings {
  readonly job: JobSettings;
  /** How long a finished build waits for its log streams before a marker says what is missing. */
  readonly drainDeadlineMs: number;
  /** How long a builder image may fail to pull before the build fails with ImagePullFailed. */
  readonly imagePullTimeoutMs: number;
  /** Set on a build's Job once its logs are stored, so Kubernetes removes it. */
  readonly ttlSecondsAfterFinished: number;
  /** How long a cancelled build's log is read on before its Job is deleted. */
  readonly cancelSettleMs: number;
  readonly follower: LogFollowerOptions;
}

export const DEFAULT_RECONCILER_SETTINGS: Omit<ReconcilerSettings, 'job'> = {
  drainDeadlineMs: 120_000,
  imagePullTimeoutMs: 300_000,
  ttlSecondsAfterFinished: 3_600,
  cancelSettleMs: 1_000,
  follower: DEFAULT_LOG_FOLLOWER_OPTIONS,
};

/** What the reconciler needs of the steps after the image (BuildArtifacts implements it). */
export interface ReconcilerArtifacts {
  /** Upload tokens for a build's pod, valid `ttlSeconds`; undefined: the build is gone. */
  mintUploadTokens(
    buildId: string,
    ttlSeconds: number,
  ): Promise<Record<'sbom' | 'scan', string> | undefined>;
  /** The scan policy's verdict on a build whose Job succeeded. */
  gate(build: BuildEntity): Promise<{ pass: true } | { pass: false; message: string }>;
}

export interface ReconcilerDeps {
  readonly caches: ReconcilerCaches;
  readonly artifacts: ReconcilerArtifacts;
  /** Unseals build secrets for the build's Secret and the log masker; seals a Build's own. */
  readonly sealer: SecretSealer;
  /**
   * Resolves a starting build's secret references and checks its registry (BuildAccess):
   * the values go into the build's Secret and the masker, never into kiln's database.
   */
  readonly access: Pick<BuildAccess, 'prepare'>;
  readonly builds: CustomResources<BuildResource>;
  readonly workloads: KubeWorkloads;
  readonly lifecycle: BuildLifecycle;
  readonly sink: LogSink;
  readonly logs: LogFollowerDeps['logs'];
  readonly cursors: LogFollowerDeps['cursors'];
  /** One log follower per build across operator processes (see LogFollowerDeps.claim). */
  readonly logClaim?: LogFollowerDeps['claim'];
  readonly logger: Logger;
  readonly settings: ReconcilerSettings;
  readonly now?: () => number;
}

interface Following {
  readonly follower: BuildLogFollower;
  readonly pod: string;
  readonly containers: readonly string[];
  finished: boolean;
}

/**
 * Level-based reconcile of one Build resource (docs/adr/0016-build-reconciler.md): reads the
 * Build, its record in kiln's database, its Job and pod, and acts on that state, never on the
 * event that woke it. kiln's database is the record of a build's state (written only through
 * BuildLifecycle, with conditional transitions); the Build's status mirrors it.
 *
 * - A Build applied with kubectl is registered (a record, a build number) under an idempotency
 *   key made of its uid, so a crash between the insert and the status write registers it once.
 * - Unsuspended and queued → started; in_progress → its Job exists (created from the method's
 *   pure jobSpec, owned by the Build; AlreadyExists adopts it), its pod's log is followed, and
 *   the Job's end is recorded once every log stream is stored (bounded by a drain deadline).
 * - cancelRequested, a cancelled record or a deleted Build → the log read on briefly, then the
 *   Job deleted; the finalizer goes once nothing is left to read.
 */
export class BuildReconciler {
  private readonly following = new Map<string, Following>();
  private readonly drainingSince = new Map<string, number>();
  private readonly cancellingSince = new Map<string, number>();
  private readonly pullFailingSince = new Map<string, number>();
  private readonly podsSeen = new Set<string>();
  /** Builds whose secret values this process registered with the LogSink for masking. */
  private readonly secretsRegistered = new Set<string>();
  /** Builds whose ConfigMap and Secret this process saw its Job control (ownChildren). */
  private readonly childrenOwned = new Set<string>();
  private readonly now: () => number;

  constructor(private readonly deps: ReconcilerDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** Stops every log follower without a marker (lost lease, shutdown): the next leader resumes. */
  async stopAll(): Promise<void> {
    const all = [...this.following.values()];
    this.following.clear();
    await Promise.all(all.map((f) => f.follower.stop()));
  }

  readonly reconcile = async (
    key: string,
    signal: AbortSignal,
  ): Promise<ReconcileResult | void> => {
    try {
      return await this.reconcileOnce(key, signal);
    } catch (error) {
      // A write against a version the cache had not caught up with (often our own last write):
      // look again once the cache has the new version. Not an error, no growing backoff.
      if (error instanceof KubeApiError && error.status === 409) return { requeueAfterMs: 100 };
      throw error;
    }
  };

  private async reconcileOnce(key: string, signal: AbortSignal): Promise<ReconcileResult | void> {
    const cached = this.deps.caches.build(key);
    if (cached === undefined) return;
    const resource = structuredClone(cached);
    let record = await this.recordOf(resource);
    if (signal.aborted) return;
    if (record === undefined) return this.unrecorded(resource);

    const deleting = resource.metadata.deletionTimestamp !== undefined;
    const cancelWanted =
      resource.spec.cancelRequested === true || record.status === 'cancelled' || deleting;

    if (record.status === 'queued') {
      if (deleting) return this.release(resource);
      if (resource.spec.suspend === true || cancelWanted) return this.mirror(resource, record);
      record = await this.transition(record, () =>
        this.deps.lifecycle.start(record!.tenantId, record!.id),
      );
    }
    if (record.status === 'in_progress' && cancelWanted) {
      const reason =
        resource.spec.cancelReason ?? (deleting ? 'the Build resource was deleted' : null);
      record = await this.transition(record, () =>
        this.deps.lifecycle.cancel(record!.tenantId, record!.id, reason),
      );
    }
    if (signal.aborted) return;
    switch (record.status) {
      case 'queued':
        return this.mirror(resource, record);
      case 'in_progress':
        return this.run(resource, record);
      case 'cancelled':
        return this.cancelled(resource, record);
      case 'success':
      case 'failed':
        return this.ended(resource, record);
    }
  }

  // ---- registration -----------------------------------------------------------------------

  private async recordOf(resource: BuildResource): Promise<BuildEntity | undefined> {
    const id = resource.status?.buildId ?? this.apiBuildId(resource);
    return id === undefined ? undefined : this.deps.lifecycle.find(id);
  }

  /** A Build the API wrote is named after its build id and labelled with it. */
  private apiBuildId(resource: BuildResource): string | undefined {
    const label = resource.metadata.labels?.[KILN_LABELS.buildId];
    return label !== undefined && label === resource.metadata.name ? label : undefined;
  }

  private async unrecorded(resource: BuildResource): Promise<ReconcileResult | void> {
    if (resource.metadata.deletionTimestamp !== undefined) return this.release(resource);
    if (this.apiBuildId(resource) !== undefined || resource.status?.buildId !== undefined) {
      // Its build was deleted through the API (which deletes the resource too; that failed).
      await this.deps.builds.delete(this.namespaceOf(resource), resource.metadata.name);
      return;
    }
    if (resource.status?.failureReason === 'InvalidSpec') return; // refused before: permanent
    return this.register(resource);
  }

  private async register(resource: BuildResource): Promise<ReconcileResult | void> {
    const read = buildSpecOf(resource);
    // Secret values a Build resource carries are stored sealed, as the API stores them.
    const spec =
      read.config.secrets === undefined
        ? read
        : {
            ...read,
            config: { ...read.config, secrets: this.deps.sealer.sealAll(read.config.secrets) },
          };
    const repository = read.source.repository;
    if (repository !== null && carriesCredentials(repository)) {
      return this.refuseRegistration(
        resource,
        `spec.source.repository ${credentialsInUrlProblem('the project’s git credentials (kiln project git-credentials)')}`,
      );
    }
    const uid = resource.metadata.uid ?? resource.metadata.name;
    await this.endReplaced(resource, uid);
    let created: BuildEntity;
    try {
      ({ build: created } = await this.deps.lifecycle.create({
        tenantId: resource.spec.tenantId,
        projectId: resource.spec.projectId,
        gitBranch: spec.source.branch,
        gitCommit: spec.source.commit,
        method: spec.form === 'reference' ? null : spec.method,
        config: {
          form: 'resource',
          namespace: this.namespaceOf(resource),
          name: resource.metadata.name,
          uid,
        },
        spec,
        specDigest: specDigest(spec, (value) => this.deps.sealer.fingerprint(value)),
        idempotencyKey: `kubernetes:${uid}`,
        requestHash: `kubernetes:${uid}`,
      }));
    } catch (error) {
      if (!(error instanceof NotFoundError || error instanceof ConflictError)) throw error;
      return this.refuseRegistration(
        resource,
        error instanceof NotFoundError
          ? `tenant ${resource.spec.tenantId} has no project ${resource.spec.projectId}`
          : error.message,
      );
    }
    await this.event(
      resource,
      'Normal',
      'Registered',
      `registered as build ${created.buildNumber} (${created.id})`,
    );
    return this.mirror(resource, created);
  }

  /** A Build kiln will not register: failed with InvalidSpec, for good (it is not retried). */
  private async refuseRegistration(resource: BuildResource, message: string): Promise<void> {
    await this.writeStatus(resource, {
      state: 'failed',
      failureReason: 'InvalidSpec',
      message,
      conditions: [this.condition(resource, 'False', 'InvalidSpec', message)],
    });
    await this.event(resource, 'Warning', 'InvalidSpec', message);
  }

  /**
   * A Build deleted and re-created under its name while this operator did not see it (a watch
   * outage, or no operator running): the old object's build is still active, though nothing
   * will run it, and would refuse the new one as its duplicate. The uid tells them apart; the
   * old one is cancelled (its Job, owned by the old uid, goes with Kubernetes' garbage collector).
   */
  private async endReplaced(resource: BuildResource, uid: string): Promise<void> {
    const namespace = this.namespaceOf(resource);
    const name = resource.metadata.name;
    for (const old of await this.deps.lifecycle.activeOfReplacedResource(namespace, name, uid)) {
      const reason = `the Build resource was deleted (${namespace}/${name} now names a new one)`;
      await this.transition(old, () => this.deps.lifecycle.cancel(old.tenantId, old.id, reason));
      await this.event(resource, 'Normal', 'Replaced', `cancelled build ${old.id}: ${reason}`);
    }
  }

  // ---- running ----------------------------------------------------------------------------

  private async run(current: BuildResource, record: BuildEntity): Promise<ReconcileResult | void> {
    const namespace = this.namespaceOf(current);
    const jobName = buildObjectName(record.id);
    // Goes on from the version the finalizer write answered with: the Job is created in the same
    // reconcile, not one the finalizer's watch event brings.
    const resource = await this.withFinalizer(current);
    let job = this.deps.caches.job(namespace, jobName);
    if (job === undefined) {
      const created = await this.createJob(resource, record);
      if (created === 'refused') return;
      if (created === 'exists') return { requeueAfterMs: 500 }; // the cache catches up
      job = created;
    }
    const owner = job.metadata?.ownerReferences?.find((o) => o.controller === true);
    if (owner !== undefined && owner.uid !== resource.metadata.uid) {
      const message = `Job ${jobName} belongs to another Build (uid ${owner.uid}); kiln will not adopt it`;
      await this.event(resource, 'Warning', 'JobConflict', message);
      await this.mirror(resource, record, { message });
      return { requeueAfterMs: 30_000 };
    }
    // Adopted (another operator created it and died, or the patch failed): the ConfigMap and
    // Secret it left without an owner would outlive the build, holding its credentials.
    if (!this.childrenOwned.has(record.id)) await this.ownChildren(namespace, record.id, job);

    const pod = this.deps.caches.podOfJob(namespace, jobName);
    if (pod !== undefined) this.podsSeen.add(record.id);
    await this.registerSecrets(record, namespace);
    const following = this.follow(record, namespace, pod);
    this.trackPull(record.id, pod);

    const outcome = outcomeOf(job, pod, {
      nowMs: this.now(),
      pullFailingSinceMs: this.pullFailingSince.get(record.id),
      imagePullTimeoutMs: this.deps.settings.imagePullTimeoutMs,
      podSeen: this.podsSeen.has(record.id),
      timeoutSeconds: record.spec.timeoutSeconds,
    });
    if (outcome === undefined) {
      await this.mirror(resource, record, { jobName, podName: pod?.metadata?.name });
      return this.pullFailingSince.has(record.id) ? { requeueAfterMs: 5_000 } : undefined;
    }
    // A builder that never started printed nothing: what earlier containers printed is stored.
    if (outcome.kind === 'failed' && outcome.reason === 'ImagePullFailed') {
      await following?.follower.stop();
    } else if (following === undefined && !(await this.podNeverFollowed(record))) {
      return { requeueAfterMs: 250 };
    } else if (!(await this.drained(record, following, pod === undefined))) {
      // Record the end only once every line is stored: a live stream closes at the final status.
      return { requeueAfterMs: 250 };
    }
    const ended = await this.transition(record, () => this.record(record, outcome));
    return this.ended(resource, ended);
  }

  private async createJob(
    resource: BuildResource,
    record: BuildEntity,
  ): Promise<V1Job | 'exists' | 'refused'> {
    const namespace = this.namespaceOf(resource);
    const name = buildObjectName(record.id);
    // Every value is registered for masking before the first call that could echo it, and before
    // any line of the pod is read.
    const access = await this.deps.access.prepare(record, this.deps.sink.masking(record.id));
    if (!access.ok) {
      const failed = await this.transition(record, () =>
        this.deps.lifecycle.fail(record.id, access.reason, access.message),
      );
      await this.event(resource, 'Warning', access.reason, access.message);
      await this.ended(resource, failed);
      return 'refused';
    }
    const credentialsSecret =
      access.dockerConfig !== undefined ? name : resource.spec.output?.credentialsSecret;
    const translation = BUILD_METHODS[record.spec.method].jobSpec(record.spec, {
      buildId: record.id,
      tenantId: record.tenantId,
      projectId: record.projectId,
      buildNumber: record.buildNumber,
      namespace,
      settings: this.deps.settings.job,
      configMapName: name,
      buildSecretName: name,
      ...(credentialsSecret === undefined ? {} : { credentialsSecret }),
      ...(access.git === undefined ? {} : { gitCredentials: true }),
      ...(access.s3 === undefined ? {} : { s3: s3TargetOf(access.s3) }),
    });
    if (translation.kind === 'unsupported') {
      const failed = await this.transition(record, () =>
        this.deps.lifecycle.fail(record.id, 'InvalidSpec', translation.reason),
      );
      await this.event(resource, 'Warning', 'InvalidSpec', translation.reason);
      await this.ended(resource, failed);
      return 'refused';
    }
    if (translation.configMap !== undefined) {
      await ignoreExists(this.deps.workloads.createConfigMap(namespace, translation.configMap));
    }
    const secretKeys = translation.secretKeys ?? [];
    if (secretKeys.length > 0) {
      const secret = await this.buildSecret(record, secretKeys, translation.job, access);
      if (secret === undefined) return 'refused';
      await ignoreExists(this.deps.workloads.createSecret(namespace, secret));
    }
    const job: V1Job = {
      ...translation.job,
      metadata: { ...translation.job.metadata, ownerReferences: [this.ownerOf(resource)] },
    };
    let created: V1Job;
    try {
      created = await this.deps.workloads.createJob(namespace, job);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 409) return 'exists';
      throw error;
    }
    const notes = [...access.notes, ...translation.notes];
    if (notes.length > 0) {
      await this.deps.sink.append(
        record.id,
        notes.map((text) => ({ text: `[kiln] ${text}`, container: 'kiln' })),
      );
    }
    await this.event(resource, 'Normal', 'JobCreated', `created Job ${name}`);
    // After the notes and the Event: a failed patch is retried by adopting the Job, which
    // writes neither again.
    await this.ownChildren(namespace, record.id, created);
    return created;
  }

  /**
   * The build's Secret (named as its Job): the keys its Job reads, no more. Upload tokens are
   * minted now, valid until the Job's deadline (activeDeadlineSeconds counts from about now);
   * buildx secret values come from the build's spec. Made before the Job, owned by it after, so it
   * goes with it. Values are registered for masking before any line of the pod is read.
   * Undefined when the build is gone.
   */
  private async buildSecret(
    record: BuildEntity,
    keys: readonly string[],
    job: V1Job,
    access: BuildAccessGrant,
  ): Promise<V1Secret | undefined> {
    const data: Record<string, string> = {};
    let tokens: Record<'sbom' | 'scan', string> | undefined;
    if (keys.some((key) => key.startsWith(UPLOAD_TOKEN_PREFIX))) {
      tokens = await this.deps.artifacts.mintUploadTokens(record.id, record.spec.timeoutSeconds);
      if (tokens === undefined) return undefined;
    }
    for (const key of keys) {
      const value = secretValueOf(key, access, tokens);
      if (value === undefined)
        throw new Error(`the Job of build ${record.id} reads an unknown Secret key ${key}`);
      data[key] = Buffer.from(value, 'utf8').toString('base64');
    }
    this.secretsRegistered.add(record.id);
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      immutable: true,
      metadata: {
        name: buildObjectName(record.id),
        namespace: job.metadata?.namespace,
        labels: { ...job.metadata?.labels },
      },
      data,
    };
  }

  /**
   * Registers a build's secret values with the LogSink, once per process and build. A build this
   * process did not start (adopted after a restart or a lost lease) has them in its own Secret,
   * read back: what its pod was given is exactly what must be masked. Resolved values exist
   * nowhere else.
   */
  private async registerSecrets(record: BuildEntity, namespace: string): Promise<void> {
    if (this.secretsRegistered.has(record.id)) return;
    const values = Object.values(this.deps.sealer.unsealAll(record.spec.config.secrets ?? {}));
    const secret = await this.deps.workloads.readSecret(namespace, buildObjectName(record.id));
    for (const [key, encoded] of Object.entries(secret?.data ?? {})) {
      const value = Buffer.from(encoded, 'base64').toString('utf8');
      values.push(value, ...(key === REGISTRY_CONFIG_KEY ? dockerConfigSecrets(value) : []));
    }
    const masked = values.filter((value) => value !== '');
    if (masked.length > 0) this.deps.sink.registerSecrets(record.id, masked);
    this.secretsRegistered.add(record.id);
  }

  /**
   * Makes the Job the controller of the build's ConfigMap and Secret, so that Kubernetes deletes
   * them with it (docs/adr/0016-build-reconciler.md). Decided from the cluster, not from what this
   * process did, so that an operator adopting the Job completes what another left undone: the
   * ConfigMap the Job mounts is patched (the patch is idempotent, and the operator may not read
   * ConfigMaps); the Secret, whichever keys it holds, is read and patched unless the Job already
   * controls it. A failure throws: the reconcile is retried with backoff and adopts the Job.
   */
  private async ownChildren(namespace: string, buildId: string, job: V1Job): Promise<void> {
    const name = job.metadata?.name;
    const uid = job.metadata?.uid;
    if (name === undefined || uid === undefined) return;
    const patch = {
      metadata: {
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name,
            uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    };
    if (mountsConfigMap(job, name)) {
      await ignoreMissing(this.deps.workloads.patchConfigMap(namespace, name, patch));
    }
    const secret = await this.deps.workloads.readSecret(namespace, name);
    const controller = secret?.metadata?.ownerReferences?.find((o) => o.controller === true);
    if (secret !== undefined && controller?.uid !== uid) {
      await ignoreMissing(this.deps.workloads.patchSecret(namespace, name, patch));
    }
    this.childrenOwned.add(buildId);
  }

  private follow(
    record: BuildEntity,
    namespace: string,
    pod: V1Pod | undefined,
  ): Following | undefined {
    let following = this.following.get(record.id);
    const podName = pod?.metadata?.name;
    if (following === undefined && pod !== undefined && podName !== undefined) {
      const follower = new BuildLogFollower(
        {
          logs: this.deps.logs,
          sink: this.deps.sink,
          cursors: this.deps.cursors,
          logger: this.deps.logger,
          ...(this.deps.logClaim === undefined ? {} : { claim: this.deps.logClaim }),
        },
        {
          buildId: record.id,
          namespace,
          pod: podName,
          containers: containersInOrder(pod).map((name) => ({
            name,
            ...(name === 'build' ? { format: BUILD_METHODS[record.spec.method].logFormat } : {}),
          })),
        },
        this.deps.settings.follower,
      );
      const entry: Following = {
        follower,
        pod: podName,
        containers: containersInOrder(pod),
        finished: false,
      };
      void follower.done.finally(() => {
        entry.finished = true;
      });
      this.following.set(record.id, entry);
      following = entry;
    }
    // A pod of another name is not the one followed: for the follower, its pod is gone.
    following?.follower.observe(
      containerStates(podName === following.pod ? pod : undefined, following.containers),
    );
    return following;
  }

  /** True once the build's log streams are stored (or the drain deadline wrote its marker). */
  /**
   * The Job ended and no pod of it was ever followed: its pod is not in the cache. After a watch
   * outage the pod informer may catch up later than the Job's, so the end waits for the pod (its
   * log is then read, `follow=false`) up to the drain deadline. A pod seen before and gone now,
   * or one still unseen at the deadline, leaves one marker line: the log is missing, never
   * silently empty.
   */
  private async podNeverFollowed(record: BuildEntity): Promise<boolean> {
    const seen = this.podsSeen.has(record.id);
    const since = this.drainingSince.get(record.id) ?? this.now();
    this.drainingSince.set(record.id, since);
    if (!seen && this.now() - since < this.deps.settings.drainDeadlineMs) return false;
    const why = seen
      ? 'the pod was deleted before its log was read'
      : `no pod of the Job was seen within ${Math.round(this.deps.settings.drainDeadlineMs / 1000)} s of its end`;
    await this.deps.sink.append(record.id, [
      { text: `WARN: [kiln] ${why}: the log of every container is missing`, container: 'kiln' },
    ]);
    return true;
  }

  private async drained(
    record: BuildEntity,
    following: Following | undefined,
    podGone: boolean,
  ): Promise<boolean> {
    if (following === undefined || following.finished) return true;
    const since = this.drainingSince.get(record.id) ?? this.now();
    this.drainingSince.set(record.id, since);
    if (podGone || this.now() - since >= this.deps.settings.drainDeadlineMs) {
      await following.follower.abandon(
        podGone
          ? 'the pod was deleted before its log was read'
          : `the log was not read to its end within ${Math.round(this.deps.settings.drainDeadlineMs / 1000)} s of the build's end`,
      );
      return true;
    }
    return false;
  }

  private record(record: BuildEntity, outcome: JobOutcome): Promise<BuildEntity> {
    // completed_at is when the Job ended in the cluster, not this write (maybe long after).
    if (outcome.kind === 'success') return this.succeed(record, outcome.endedAt, outcome.pushed);
    // A termination message holds the last lines of the log: masked like the log.
    const message = this.deps.sink.maskText(record.id, outcome.message);
    return this.deps.lifecycle.fail(record.id, outcome.reason, message, outcome.endedAt);
  }

  /**
   * A Job that succeeded built and pushed the image and ran its steps: the build succeeds unless
   * the scan policy fails it (PolicyViolation; the image stays pushed, the message says so).
   * What it pushed is recorded with the success or the PolicyViolation; a report kiln cannot
   * read costs only that.
   */
  private async succeed(
    record: BuildEntity,
    endedAt: Date | undefined,
    pushed: PushedReport,
  ): Promise<BuildEntity> {
    const verdict = await this.deps.artifacts.gate(record);
    if (pushed !== undefined && 'problem' in pushed) {
      await this.deps.sink.append(record.id, [
        {
          text: `WARN: [kiln] could not learn the pushed image's digest (${pushed.problem}); the build records none`,
          container: 'kiln',
        },
      ]);
    }
    // Recorded whatever the verdict: a refused image stays pushed, and users must find it.
    const known = pushed !== undefined && 'digest' in pushed ? pushed : undefined;
    if (verdict.pass) return this.deps.lifecycle.succeed(record.id, endedAt, known);
    await this.deps.sink.append(record.id, [
      { text: `ERROR: [kiln] ${verdict.message}`, container: 'kiln' },
    ]);
    return this.deps.lifecycle.fail(record.id, 'PolicyViolation', verdict.message, endedAt, known);
  }

  // ---- ending -----------------------------------------------------------------------------

  private async cancelled(
    resource: BuildResource,
    record: BuildEntity,
  ): Promise<ReconcileResult | void> {
    const namespace = this.namespaceOf(resource);
    const jobName = buildObjectName(record.id);
    const job = this.deps.caches.job(namespace, jobName);
    const following = this.following.get(record.id);
    if (job !== undefined && following !== undefined && !following.finished) {
      // Lines printed up to the cancel are being read: give them a moment, then stop reading.
      const since = this.cancellingSince.get(record.id) ?? this.now();
      this.cancellingSince.set(record.id, since);
      if (this.now() - since < this.deps.settings.cancelSettleMs) return { requeueAfterMs: 200 };
      await following.follower.stop();
    }
    if (job !== undefined) await this.deps.workloads.deleteJob(namespace, jobName);
    this.forget(record.id);
    await this.mirror(resource, record);
    await this.release(resource);
  }

  private async ended(
    resource: BuildResource,
    record: BuildEntity,
  ): Promise<ReconcileResult | void> {
    const namespace = this.namespaceOf(resource);
    const jobName = buildObjectName(record.id);
    const job = this.deps.caches.job(namespace, jobName);
    const pod = this.deps.caches.podOfJob(namespace, jobName);
    // Without the finalizer, its log was stored and its Job handed over before: mirror only.
    if (!(resource.metadata.finalizers ?? []).includes(LOGS_FINALIZER)) {
      this.forget(record.id);
      return this.mirror(resource, record, job === undefined ? {} : { jobName });
    }
    // A build that ended while this operator was away: read what its pod still holds.
    await this.registerSecrets(record, namespace);
    const following = this.follow(record, namespace, pod);
    if (!(await this.drained(record, following, pod === undefined))) return { requeueAfterMs: 250 };
    if (job !== undefined && !this.childrenOwned.has(record.id)) {
      await this.ownChildren(namespace, record.id, job);
    }
    if (job !== undefined && (job.status?.active ?? 0) > 0) {
      // Ended while its pod still runs (an image that cannot be pulled): stop it.
      await this.deps.workloads.deleteJob(namespace, jobName);
    } else if (job !== undefined && job.spec?.ttlSecondsAfterFinished === undefined) {
      await this.deps.workloads.patchJob(namespace, jobName, {
        spec: { ttlSecondsAfterFinished: this.deps.settings.ttlSecondsAfterFinished },
      });
    }
    this.forget(record.id);
    await this.mirror(resource, record, job === undefined ? {} : { jobName });
    await this.release(resource);
  }

  private forget(buildId: string): void {
    this.following.delete(buildId);
    this.drainingSince.delete(buildId);
    this.cancellingSince.delete(buildId);
    this.pullFailingSince.delete(buildId);
    this.podsSeen.delete(buildId);
    this.childrenOwned.delete(buildId);
    this.secretsRegistered.delete(buildId);
  }

  private trackPull(buildId: string, pod: V1Pod | undefined): void {
    if (!pullFailing(pod)) this.pullFailingSince.delete(buildId);
    else if (!this.pullFailingSince.has(buildId)) this.pullFailingSince.set(buildId, this.now());
  }

  /** Runs a lifecycle transition; when another writer won, the record as it is now. */
  private async transition(
    record: BuildEntity,
    change: () => Promise<BuildEntity>,
  ): Promise<BuildEntity> {
    try {
      return await change();
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
      const now = await this.deps.lifecycle.find(record.id);
      if (now === undefined) throw error;
      return now;
    }
  }

  // ---- the Build's metadata and status ---------------------------------------------------

  /** The resource with kiln's finalizer: as it is, or as the server answered the write adding it. */
  private async withFinalizer(resource: BuildResource): Promise<BuildResource> {
    const finalizers = resource.metadata.finalizers ?? [];
    if (finalizers.includes(LOGS_FINALIZER)) return resource;
    return this.deps.builds.mergePatch(this.namespaceOf(resource), resource.metadata.name, {
      metadata: {
        resourceVersion: resource.metadata.resourceVersion,
        finalizers: [...finalizers, LOGS_FINALIZER],
      },
    });
  }

  private async release(resource: BuildResource): Promise<void> {
    const finalizers = resource.metadata.finalizers ?? [];
    if (!finalizers.includes(LOGS_FINALIZER)) return;
    try {
      await this.deps.builds.mergePatch(this.namespaceOf(resource), resource.metadata.name, {
        metadata: {
          resourceVersion: resource.metadata.resourceVersion,
          finalizers: finalizers.filter((f) => f !== LOGS_FINALIZER),
        },
      });
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 404)) throw error;
    }
  }

  /** Writes the status the record says, through /status, only when it changed. */
  private async mirror(
    resource: BuildResource,
    record: BuildEntity,
    extra: { jobName?: string; podName?: string | undefined; message?: string } = {},
  ): Promise<void> {
    const [status, reason] = conditionOf(record);
    const message = extra.message ?? record.errorMessage ?? record.cancelReason ?? '';
    const desired: BuildResourceStatus = {
      state: record.status,
      buildId: record.id,
      buildNumber: record.buildNumber,
      ...(extra.jobName === undefined ? {} : { jobName: extra.jobName }),
      ...(extra.podName === undefined ? {} : { podName: extra.podName }),
      ...(record.startedAt === null ? {} : { startedAt: record.startedAt.toISOString() }),
      ...(record.completedAt === null ? {} : { completedAt: record.completedAt.toISOString() }),
      ...(message === '' ? {} : { message }),
      ...(record.failureReason === null ? {} : { failureReason: record.failureReason }),
      ...(record.progressTotal === null
        ? {}
        : { progress: { current: record.progressCurrent ?? 0, total: record.progressTotal } }),
      conditions: [this.condition(resource, status, reason, message)],
    };
    await this.writeStatus(resource, desired);
  }

  private async writeStatus(resource: BuildResource, desired: BuildResourceStatus): Promise<void> {
    const current = resource.status ?? {};
    const next: BuildResourceStatus = {
      ...current,
      ...desired,
      observedGeneration: resource.metadata.generation ?? 0,
    };
    if (sameStatus(current, next)) return;
    const written = await this.deps.builds.mergePatchStatus(
      this.namespaceOf(resource),
      resource.metadata.name,
      { metadata: { resourceVersion: resource.metadata.resourceVersion }, status: next },
    );
    // A later write of this reconcile (the finalizer's release after the final status) goes
    // against the version just written: with the read one it would always get a 409.
    resource.metadata.resourceVersion = written.metadata.resourceVersion;
    resource.status = written.status;
  }

  private condition(
    resource: BuildResource,
    status: BuildCondition['status'],
    reason: string,
    message: string,
  ): BuildCondition {
    const previous = resource.status?.conditions?.find((c) => c.type === 'Succeeded');
    const unchanged = previous?.status === status && previous.reason === reason;
    return {
      type: 'Succeeded',
      status,
      reason,
      message,
      lastTransitionTime:
        unchanged && previous !== undefined
          ? previous.lastTransitionTime
          : new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      observedGeneration: resource.metadata.generation ?? 0,
    };
  }

  private ownerOf(resource: BuildResource): V1OwnerReference {
    return {
      apiVersion: BUILD_API_VERSION,
      kind: BUILD_KIND,
      name: resource.metadata.name,
      uid: resource.metadata.uid ?? '',
      controller: true,
      blockOwnerDeletion: true,
    };
  }

  private async event(
    resource: BuildResource,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const namespace = this.namespaceOf(resource);
    const now = new Date(this.now());
    const event: CoreV1Event = {
      metadata: { generateName: `${resource.metadata.name}.`, namespace },
      involvedObject: {
        apiVersion: BUILD_API_VERSION,
        kind: BUILD_KIND,
        name: resource.metadata.name,
        namespace,
        ...(resource.metadata.uid === undefined ? {} : { uid: resource.metadata.uid }),
      },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: FIELD_MANAGER },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await this.deps.workloads
      .createEvent(namespace, event)
      .catch((error: unknown) =>
        this.deps.logger.warn(
          { err: error, build: resource.metadata.name },
          'could not write an Event',
        ),
      );
  }

  private namespaceOf(resource: BuildResource): string {
    return resource.metadata.namespace ?? 'default';
  }
}

function conditionOf(record: BuildEntity): [BuildCondition['status'], string] {
  switch (record.status) {
    case 'queued':
      return ['Unknown', 'Queued'];
    case 'in_progress':
      return ['Unknown', 'Running'];
    case 'success':
      return ['True', 'Succeeded'];
    case 'failed':
      return ['False', record.failureReason ?? 'BuildFailed'];
    case 'cancelled':
      return ['False', 'Cancelled'];
  }
}

/** Equal, ignoring a lastTransitionTime that differs only because nothing transitioned. */
function sameStatus(a: BuildResourceStatus, b: BuildResourceStatus): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
        .map(([k, v]) => [k, sorted(v)]),
    );
  }
  return value;
}

async function ignoreExists(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 409)) throw error;
  }
}

/** A write to an object deleted meanwhile (its Job gone, the garbage collector took it): done. */
async function ignoreMissing(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 404)) throw error;
  }
}

/** The value of one key of a build's Secret: a token, a resolved secret or credential. */
function secretValueOf(
  key: string,
  access: BuildAccessGrant,
  tokens: Record<'sbom' | 'scan', string> | undefined,
): string | undefined {
  if (key.startsWith(UPLOAD_TOKEN_PREFIX)) {
    return tokens?.[key.slice(UPLOAD_TOKEN_PREFIX.length) as 'sbom' | 'scan'];
  }
  if (key.startsWith(BUILD_SECRET_PREFIX)) {
    return access.secrets[key.slice(BUILD_SECRET_PREFIX.length)];
  }
  if (key.startsWith(ENV_SECRET_PREFIX)) {
    return access.env[key.slice(ENV_SECRET_PREFIX.length)];
  }
  switch (key) {
    case REGISTRY_CONFIG_KEY:
      return access.dockerConfig;
    case GIT_CREDENTIAL_KEYS.username:
      return access.git?.username;
    case GIT_CREDENTIAL_KEYS.password:
      return access.git?.password;
    case S3_CREDENTIAL_KEYS.accessKeyId:
      return access.s3?.credentials?.accessKeyId;
    case S3_CREDENTIAL_KEYS.secretAccessKey:
      return access.s3?.credentials?.secretAccessKey;
    default:
      return undefined;
  }
}

/** What the Job learns of an s3 build's target: everything but the keys, which stay in its Secret. */
function s3TargetOf(target: NonNullable<BuildAccessGrant['s3']>): S3UploadTarget {
  const { credentials, ...where } = target;
  return { ...where, credentials: credentials !== undefined };
}

/** Whether the Job's pod mounts the ConfigMap `name` (the build's files). */
function mountsConfigMap(job: V1Job, name: string): boolean {
  return (job.spec?.template.spec?.volumes ?? []).some((volume) => volume.configMap?.name === name);
}

/** The credentials inside a Docker config: each `auth` and the password it encodes. */
function dockerConfigSecrets(text: string): string[] {
  try {
    const config = JSON.parse(text) as { auths?: Record<string, { auth?: string }> };
    return Object.values(config.auths ?? {}).flatMap(({ auth }) => {
      if (typeof auth !== 'string') return [];
      const decoded = Buffer.from(auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon < 0 ? [auth] : [auth, decoded.slice(colon + 1)];
    });
  } catch {
    return [];
  }
}
