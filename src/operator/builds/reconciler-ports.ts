import type { CoreV1Event, V1Job, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { JobSettings } from '../../build-methods/job.js';
import type { NamespacesByLevel } from '../../build-methods/namespaces.js';
import type { Admission } from '../../admission/admission.js';
import type { BuildAccess } from '../../integrations/build-access.js';
import type { CustomResources } from '../../kubernetes/custom-resources.js';
import type { KubeWorkloads } from '../../kubernetes/workloads.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import type { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import type { LogSink } from '../../logs/log-sink.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { KueueWorkload } from './pod-wait.js';
import type { SecretSealer } from '../../secrets/secret-sealer.js';
import type { ProvenanceService } from '../../provenance/provenance.service.js';
import type { BuildResource } from '../api/build-resource.js';
import {
  DEFAULT_LOG_FOLLOWER_OPTIONS,
  type LogFollowerDeps,
  type LogFollowerOptions,
} from './log-follower.js';

/** The cached objects the reconciler reads (informers: never mutated, cloned before a write). */
export interface ReconcilerCaches {
  build(key: string): BuildResource | undefined;
  job(namespace: string, name: string): V1Job | undefined;
  podOfJob(namespace: string, job: string): V1Pod | undefined;
  /** The Events whose involved object is the Job of that name (any order). */
  jobEvents(namespace: string, job: string): readonly CoreV1Event[];
  /** KILN_ADMISSION=kueue: the Workload Kueue made for the Job of that name. */
  workloadOfJob?(namespace: string, job: string): KueueWorkload | undefined;
}

export interface ReconcilerSettings {
  readonly job: JobSettings;
  /**
   * The build namespace of each Pod Security level: a Build whose namespace does not admit its
   * method's pods is refused (InvalidSpec) before its Job is made.
   */
  readonly namespaces: NamespacesByLevel;
  /** How long a finished build waits for its log streams before a marker says what is missing. */
  readonly drainDeadlineMs: number;
  /** How long a builder image may fail to pull before the build fails with ImagePullFailed. */
  readonly imagePullTimeoutMs: number;
  /** How long a build's pod may find no node before the build fails with Unschedulable. */
  readonly unschedulableTimeoutMs: number;
  /**
   * KILN_ADMISSION=kueue: build Jobs are created suspended with the tenant's LocalQueue, for
   * Kueue to admit; undefined: kiln admits, and creates Jobs running.
   */
  readonly kueue?: KueueSettings;
  /** Set on a build's Job once its logs are stored, so Kubernetes removes it. */
  readonly ttlSecondsAfterFinished: number;
  /** How long a cancelled build's log is read on before its Job is deleted. */
  readonly cancelSettleMs: number;
  readonly follower: LogFollowerOptions;
}

export interface KueueSettings {
  /** The LocalQueue of a tenant without one of its own. */
  readonly localQueue: string;
  /** LocalQueues by tenant id. */
  readonly localQueues: Readonly<Record<string, string>>;
  /** A Job may wait this long suspended: its upload tokens must outlive the wait. */
  readonly queueTtlSeconds: number;
}

/** The label Kueue reads a Job's LocalQueue from. */
export const KUEUE_QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';

export const DEFAULT_RECONCILER_SETTINGS: Omit<ReconcilerSettings, 'job' | 'namespaces'> = {
  drainDeadlineMs: 120_000,
  imagePullTimeoutMs: 300_000,
  unschedulableTimeoutMs: 900_000,
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

/** The writes the reconciler makes to Build resources. */
export type BuildWriter = Pick<
  CustomResources<BuildResource>,
  'mergePatch' | 'mergePatchStatus' | 'delete'
>;

/** The writes (and the one read, of a build's Secret) the reconciler makes to workloads. */
export type WorkloadWriter = Pick<
  KubeWorkloads,
  | 'createJob'
  | 'patchJob'
  | 'deleteJob'
  | 'createConfigMap'
  | 'patchConfigMap'
  | 'createSecret'
  | 'readSecret'
  | 'patchSecret'
  | 'createEvent'
>;

/** What the reconciler does with a build's log and its masker (LogSink). */
export type ReconcilerSink = Pick<LogSink, 'append' | 'masking' | 'maskText' | 'registerSecrets'>;

/** The build records the reconciler reads and the transitions it makes (BuildLifecycle). */
export type ReconcilerLifecycle = Pick<
  BuildLifecycle,
  'find' | 'create' | 'activeOfReplacedResource' | 'start' | 'cancel' | 'succeed' | 'fail'
>;

/**
 * Admission (docs/adr/0042-admission-in-postgres.md): a started build's Job is created once it is
 * admitted; the operator says what an admitted build's pod waits for and releases the build's
 * slot when it ends.
 */
export type ReconcilerAdmission = Pick<
  Admission,
  'enqueue' | 'outcomes' | 'release' | 'watch' | 'clusterWait' | 'adopt'
>;

export interface ReconcilerDeps {
  readonly admission: ReconcilerAdmission;
  readonly caches: ReconcilerCaches;
  readonly artifacts: ReconcilerArtifacts;
  /** Signs, stores and attaches a successful build's provenance (ProvenanceService). */
  readonly provenance: Pick<ProvenanceService, 'produce'>;
  /** Unseals build secrets for the build's Secret and the log masker; seals a Build's own. */
  readonly sealer: Pick<SecretSealer, 'sealAll' | 'unsealAll' | 'fingerprint'>;
  /**
   * Resolves a starting build's secret references and checks its registry (BuildAccess):
   * the values go into the build's Secret and the masker, never into kiln's database.
   */
  readonly access: Pick<BuildAccess, 'prepare'>;
  readonly builds: BuildWriter;
  readonly workloads: WorkloadWriter;
  readonly lifecycle: ReconcilerLifecycle;
  readonly sink: ReconcilerSink;
  readonly logs: LogFollowerDeps['logs'];
  readonly cursors: LogFollowerDeps['cursors'];
  /** One log follower per build across operator processes (see LogFollowerDeps.claim). */
  readonly logClaim?: LogFollowerDeps['claim'];
  readonly logger: Logger;
  readonly settings: ReconcilerSettings;
  /**
   * Asks for a reconcile of the Build `key` soon: a wait that no informer ends is over (its log
   * follower read every stream). The operator wires it to its work queue.
   */
  readonly wake: (key: string) => void;
  /** Counts the gaps the drain deadline leaves in a log (kiln_log_lines_dropped_total). */
  readonly metrics: Pick<Metrics, 'inc'>;
  readonly now?: () => number;
}

export function namespaceOf(resource: BuildResource): string {
  return resource.metadata.namespace ?? 'default';
}
