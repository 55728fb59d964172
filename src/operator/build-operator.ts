import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { CoreV1Event, V1Job, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { DEFAULT_JOB_SETTINGS, type JobSettings } from '../build-methods/job.js';
import { buildNamespacesOf } from '../build-methods/namespaces.js';
import { BuildArtifacts } from '../artifacts/build-artifacts.js';
import { ProvenanceService } from '../provenance/provenance.service.js';
import { SBOM_TOOLS, SCAN_TOOLS } from '../manifest/types.js';
import { LOGGER } from '../common/logger.js';
import { BuildAccess } from '../integrations/build-access.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import { KilnConfig } from '../config/config.js';
import { CustomResources } from '../kubernetes/custom-resources.js';
import { KubeClient } from '../kubernetes/kube-client.js';
import { KubeLeaseStore } from '../kubernetes/leases.js';
import { KubeListWatch } from '../kubernetes/list-watch.js';
import { PodLogs } from '../kubernetes/pod-logs.js';
import { KubeWorkloads } from '../kubernetes/workloads.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { BuildLogsRepository } from '../logs/build-logs.repository.js';
import { LogSink } from '../logs/log-sink.js';
import { Metrics } from '../metrics/metrics.js';
import {
  BUILD_GROUP,
  BUILD_PLURAL,
  BUILD_VERSION,
  type BuildResource,
  KILN_LABELS,
  MANAGED_BY_KILN,
} from './api/build-resource.js';
import { Admission } from '../admission/admission.js';
import { BuildReconciler, DEFAULT_RECONCILER_SETTINGS } from './builds/build-reconciler.js';
import type { KueueWorkload } from './builds/pod-wait.js';
import { podChanged } from './builds/pod-state.js';
import { CacheIndex } from './runtime/cache-index.js';
import { Informer, trimForCache } from './runtime/informer.js';
import { type Elector, type LeaderCallbacks, LeaderElector } from './runtime/leader-election.js';
import { OperatorRuntime } from './runtime/operator-runtime.js';
import { BOOKKEEPING_FIELDS, changedBeyondMetadata } from './runtime/predicates.js';

/**
 * The reconciler reads no annotation of a Job: a tool's annotation write is not worth a
 * reconcile (a build whose Job and pod a tool writes to every second is not reconciled every
 * second). Pods go by `podChanged`, the facts the reconciler reads.
 */
const jobChanged = changedBeyondMetadata([...BOOKKEEPING_FIELDS, 'annotations']);

/**
 * The operator of KILN_ROLE=operator|all: in each build namespace (one per Pod Security level, or
 * fewer when levels share one), informers on the Builds and on the Jobs and Pods kiln made, one
 * work queue of Build keys, and BuildReconciler, while this process holds the `kiln-operator`
 * Lease. It is composed only where a kubeconfig or service account was found (operatorModules;
 * a laptop's `make run` gets IdleOperator, which says the loop is not running).
 */
@Injectable()
export class BuildOperator implements OnApplicationBootstrap, OnApplicationShutdown {
  private runtime: OperatorRuntime | undefined;
  private reconciler: BuildReconciler | undefined;

  constructor(
    @Inject(KubeClient) private readonly kube: KubeClient | null,
    private readonly config: KilnConfig,
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly logs: BuildLogsRepository,
    private readonly artifacts: BuildArtifacts,
    private readonly provenance: ProvenanceService,
    private readonly sealer: SecretSealer,
    private readonly access: BuildAccess,
    private readonly admission: Admission,
    private readonly metrics: Metrics,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** The runtime, for tests that count reconciles. */
  get operatorRuntime(): OperatorRuntime | undefined {
    return this.runtime;
  }

  onApplicationBootstrap(): void {
    const kube = this.kube;
    if (kube === null) {
      throw new Error(
        'BuildOperator needs a Kubernetes connection: operatorModules() composes IdleOperator without one',
      );
    }
    const namespaces = buildNamespacesOf(this.config.buildNamespaces);
    const logger = this.logger.child({ component: 'operator' });
    const informers = new Map(
      namespaces.map((namespace) => [namespace, this.informers(kube, namespace, logger)]),
    );
    const reconciler = this.reconcilerOf(kube, informers, logger);
    this.reconciler = reconciler;
    this.runtime = this.runtimeOf(kube, informers, reconciler, logger);
    this.runtime.start();
    logger.info({ namespaces }, 'operator started: waiting for the lease');
  }

  /** The informers on one build namespace's Builds, and on the Jobs and Pods kiln made there. */
  private informers(kube: KubeClient, namespace: string, parent: Logger): Informers {
    const settings = this.config.operatorRuntime;
    const logger = parent.child({ namespace });
    const watches = {
      watchLifetimeMs: settings.watchTimeoutMs,
      resyncPeriodMs: settings.resyncPeriodMs,
      // builds/ reads neither managedFields nor kubectl's last-applied annotation: about half of
      // each cached object's size.
      transform: trimForCache,
      logger,
      // Each informer's name is the `resource` label of its watch restarts.
      metrics: this.metrics,
    };
    const kilnOnly = `${KILN_LABELS.managedBy}=${MANAGED_BY_KILN}`;
    const builds = new Informer<BuildResource>(
      KubeListWatch.forClient(kube, {
        group: BUILD_GROUP,
        version: BUILD_VERSION,
        plural: BUILD_PLURAL,
        namespace,
      }),
      { name: 'builds', ...watches },
    );
    const jobs = new Informer<CachedJob>(
      KubeListWatch.forClient(kube, {
        group: 'batch',
        version: 'v1',
        plural: 'jobs',
        namespace,
        labelSelector: kilnOnly,
      }),
      { name: 'jobs', ...watches },
    );
    const pods = new Informer<CachedPod>(
      KubeListWatch.forClient(kube, {
        group: '',
        version: 'v1',
        plural: 'pods',
        namespace,
        labelSelector: kilnOnly,
      }),
      { name: 'pods', ...watches },
    );
    // The pods of a Job without a scan of every cached pod (a reconcile reads one each time).
    const podsByJob = new CacheIndex(pods, (pod) => {
      const job = pod.metadata.labels?.['job-name'];
      return job === undefined ? undefined : `${pod.metadata.namespace ?? namespace}/${job}`;
    });
    // What the Job controller says of Jobs (FailedCreate: a quota, Pod Security, a webhook): the
    // one reason a pod does not exist that no pod can tell. Only Events of Jobs, by field.
    const jobEvents = new Informer<CachedEvent>(
      KubeListWatch.forClient(kube, {
        group: '',
        version: 'v1',
        plural: 'events',
        namespace,
        fieldSelector: 'involvedObject.kind=Job',
      }),
      { name: 'job-events', ...watches },
    );
    const eventsByJob = new CacheIndex(jobEvents, (event) =>
      event.involvedObject.name === undefined
        ? undefined
        : `${event.involvedObject.namespace ?? namespace}/${event.involvedObject.name}`,
    );
    // KILN_ADMISSION=kueue: the Workloads Kueue makes for kiln's suspended Jobs say why they wait.
    const workloads =
      this.config.admission.mode === 'kueue'
        ? new Informer<CachedWorkload>(
            KubeListWatch.forClient(kube, {
              group: 'kueue.x-k8s.io',
              version: 'v1beta1',
              plural: 'workloads',
              namespace,
            }),
            { name: 'workloads', ...watches },
          )
        : undefined;
    const workloadsByJob =
      workloads === undefined
        ? undefined
        : new CacheIndex(workloads, (workload) => {
            const job = jobOwnerOf(workload);
            return job === undefined ? undefined : `${namespace}/${job}`;
          });
    return { builds, jobs, pods, podsByJob, jobEvents, eventsByJob, workloads, workloadsByJob };
  }

  private reconcilerOf(
    kube: KubeClient,
    informers: ReadonlyMap<string, Informers>,
    logger: Logger,
  ): BuildReconciler {
    const settings = this.config.operatorRuntime;
    // Keys and names are namespaced: each read goes to that namespace's informers.
    const of = (namespace: string) => informers.get(namespace);
    return new BuildReconciler({
      caches: {
        build: (key) => of(key.slice(0, key.indexOf('/')))?.builds.get(key),
        job: (ns, name) => of(ns)?.jobs.get(`${ns}/${name}`),
        // A pod not being deleted first: a Job's replacement pod over the one going away.
        podOfJob: (ns, job) =>
          (of(ns)?.podsByJob.get(`${ns}/${job}`) ?? []).sort(
            (a, b) =>
              (a.metadata.deletionTimestamp === undefined ? -1 : 0) -
              (b.metadata.deletionTimestamp === undefined ? -1 : 0),
          )[0],
        jobEvents: (ns, job) => of(ns)?.eventsByJob.get(`${ns}/${job}`) ?? [],
        workloadOfJob: (ns, job) => of(ns)?.workloadsByJob?.get(`${ns}/${job}`)[0],
      },
      builds: new CustomResources<BuildResource>(kube, BUILD_GROUP, BUILD_VERSION, BUILD_PLURAL),
      workloads: new KubeWorkloads(kube),
      lifecycle: this.lifecycle,
      admission: this.admission,
      artifacts: this.artifacts,
      provenance: this.provenance,
      sealer: this.sealer,
      access: this.access,
      sink: this.sink,
      logs: new PodLogs(kube),
      cursors: this.logs,
      // A claim lasts a Lease's duration: a successor that waits out the Lease of a leader that
      // died finds its log claim run out too.
      logClaim: {
        store: this.logs,
        holder: `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
        ttlMs: settings.leaseDurationMs,
      },
      logger,
      // A follower that read its pod's log to the end: the Build's end can be recorded now.
      wake: (key) => this.runtime?.enqueue(key),
      metrics: this.metrics,
      settings: {
        ...DEFAULT_RECONCILER_SETTINGS,
        job: jobSettingsOf(this.config),
        namespaces: this.config.buildNamespaces,
        drainDeadlineMs: this.config.operatorDrainDeadlineMs,
        imagePullTimeoutMs: this.config.operatorImagePullTimeoutMs,
        unschedulableTimeoutMs: this.config.operatorUnschedulableMs,
        ...(this.config.admission.mode === 'kueue'
          ? {
              kueue: {
                localQueue: this.config.admission.kueueLocalQueue,
                localQueues: this.config.admission.kueueLocalQueues,
                queueTtlSeconds: Math.ceil(this.config.admission.queueTtlMs / 1000),
              },
            }
          : {}),
        ttlSecondsAfterFinished: this.config.operatorJobTtlSeconds,
      },
    });
  }

  /**
   * The work queue of Build keys under the `kiln-operator` Lease, fed by the informers of every
   * build namespace.
   */
  private runtimeOf(
    kube: KubeClient,
    informers: ReadonlyMap<string, Informers>,
    reconciler: BuildReconciler,
    logger: Logger,
  ): OperatorRuntime {
    const settings = this.config.operatorRuntime;
    const elector = new StoppingElector(
      new LeaderElector({
        store: new KubeLeaseStore(kube),
        namespace: settings.leaseNamespace,
        name: settings.leaseName,
        leaseDurationMs: settings.leaseDurationMs,
        renewDeadlineMs: settings.renewDeadlineMs,
        retryPeriodMs: settings.retryPeriodMs,
        logger,
        metrics: this.metrics,
      }),
      () => reconciler.stopAll(),
    );
    const runtime = new OperatorRuntime({
      reconcile: reconciler.reconcile,
      elector,
      workers: settings.workers,
      name: 'builds',
      logger,
      metrics: this.metrics,
    });
    for (const [namespace, { builds, jobs, pods, jobEvents, workloads }] of informers) {
      // Straight to the followers, ahead of the reconcile each change also queues.
      pods.addHandler({
        onAdd: (pod) => reconciler.podChanged(pod),
        onUpdate: (_before, pod) => reconciler.podChanged(pod),
      });
      // A Build owns its Job in its own namespace (owner references cannot cross namespaces).
      const ownerKey = (job: V1Job): string[] => {
        const owner = job.metadata?.ownerReferences?.find(
          (o) => o.controller === true && o.kind === 'Build',
        );
        return owner === undefined ? [] : [`${job.metadata?.namespace ?? namespace}/${owner.name}`];
      };
      runtime
        .watch(builds, undefined, { changed: changedBeyondMetadata(BOOKKEEPING_FIELDS) })
        .watch(jobs, ownerKey, { changed: jobChanged })
        .watch(
          pods,
          (pod) => {
            const job = jobs.get(
              `${pod.metadata.namespace}/${pod.metadata.labels?.['job-name'] ?? ''}`,
            );
            return job === undefined ? [] : ownerKey(job);
          },
          { changed: podChanged },
        )
        .watch(
          jobEvents,
          (event) => {
            const job = jobs.get(`${namespace}/${event.involvedObject.name ?? ''}`);
            return job === undefined ? [] : ownerKey(job);
          },
          // A repeat only counts up: the reconciler reads what the Event says, not how often.
          { changed: (before, after) => before.message !== after.message },
        );
      if (workloads !== undefined) {
        runtime.watch(
          workloads,
          (workload) => {
            const job = jobs.get(`${namespace}/${jobOwnerOf(workload) ?? ''}`);
            return job === undefined ? [] : ownerKey(job);
          },
          {
            changed: (before, after) =>
              JSON.stringify(before.status?.conditions) !==
              JSON.stringify(after.status?.conditions),
          },
        );
      }
    }
    return runtime;
  }

  async onApplicationShutdown(): Promise<void> {
    await this.runtime?.stop();
    this.reconciler?.close();
    await this.reconciler?.stopAll();
  }
}

type CachedJob = V1Job & { metadata: { name: string } };
type CachedPod = V1Pod & { metadata: { name: string } };
type CachedEvent = CoreV1Event & { metadata: { name: string } };
type CachedWorkload = KueueWorkload & {
  metadata: { name: string; namespace?: string; ownerReferences?: V1OwnerReference[] };
};

/** The Job a Kueue Workload was made for (its controller owner). */
function jobOwnerOf(workload: CachedWorkload): string | undefined {
  return workload.metadata.ownerReferences?.find((o) => o.kind === 'Job' && o.controller === true)
    ?.name;
}

interface Informers {
  readonly builds: Informer<BuildResource>;
  readonly jobs: Informer<CachedJob>;
  readonly pods: Informer<CachedPod>;
  readonly podsByJob: CacheIndex<CachedPod>;
  readonly jobEvents: Informer<CachedEvent>;
  readonly eventsByJob: CacheIndex<CachedEvent>;
  readonly workloads: Informer<CachedWorkload> | undefined;
  readonly workloadsByJob: CacheIndex<CachedWorkload> | undefined;
}

/** Stops the reconciler's long-running work (log followers) whenever the term ends. */
class StoppingElector implements Elector {
  constructor(
    private readonly inner: Elector,
    private readonly onStopped: () => Promise<void>,
  ) {}

  get isLeader(): boolean {
    return this.inner.isLeader;
  }

  start(callbacks: LeaderCallbacks): void {
    this.inner.start({
      ...callbacks,
      onStoppedLeading: async () => {
        await this.onStopped();
        await callbacks.onStoppedLeading();
      },
    });
  }

  stop(): Promise<void> {
    return this.inner.stop();
  }
}

/**
 * kiln's Job defaults with the operator's settings: the steps (KILN_STEP_*, KILN_UPLOAD_URL, …)
 * and user namespaces (KILN_BUILD_USER_NAMESPACES).
 */
export function jobSettingsOf(config: KilnConfig): JobSettings {
  const { toolImages, ...steps } = config.operatorSteps;
  const defaults = DEFAULT_JOB_SETTINGS.steps;
  const pick = <T extends string>(tools: readonly T[], base: Partial<Record<T, string>>) =>
    Object.fromEntries(
      tools.flatMap((tool) => {
        const image = (toolImages as Partial<Record<string, string>>)[tool] ?? base[tool];
        return image === undefined ? [] : [[tool, image]];
      }),
    ) as Partial<Record<T, string>>;
  return {
    ...DEFAULT_JOB_SETTINGS,
    ...(config.buildUserNamespaces ? { userNamespaces: true } : {}),
    steps: {
      ...steps,
      sbomImages: pick(SBOM_TOOLS, defaults.sbomImages),
      scanImages: pick(SCAN_TOOLS, defaults.scanImages),
    },
  };
}
