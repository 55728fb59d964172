import type { V1Job, V1Pod } from '@kubernetes/client-node';
import type { WaitOutcome } from '../../admission/admission.js';
import { buildObjectName } from '../../build-methods/job.js';
import { KubeApiError } from '../../kubernetes/errors.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { type ImageDependency, imageDependency } from '../../provenance/statement.js';
import type { BuildResource } from '../api/build-resource.js';
import type { ReconcileResult } from '../runtime/controller.js';
import { BuildEvents } from './build-events.js';
import { foreignController, JobAssembler } from './job-assembler.js';
import { LogDrains } from './log-drain.js';
import { type JobOutcome, outcomeOf, type PushedReport, pullFailingSince } from './outcome.js';
import { packerNote, type PackerReport } from '../../steps/packer-manifest.js';
import { podWaitOf } from './pod-wait.js';
import { namespaceOf, type ReconcilerDeps } from './reconciler-ports.js';
import { RefusedBuild } from './refused-build.js';
import { Registration } from './registration.js';
import { SecretMasking } from './secret-masking.js';
import { LOGS_FINALIZER, StatusMirror } from './status-mirror.js';
import { transition } from './transition.js';

export {
  DEFAULT_RECONCILER_SETTINGS,
  type ReconcilerArtifacts,
  type ReconcilerCaches,
  type ReconcilerDeps,
  type ReconcilerSettings,
} from './reconciler-ports.js';
export { LOGS_FINALIZER };

/** Failures of a build whose builder never ran: there is no log to wait for. */
const NEVER_RAN = new Set(['ImagePullFailed', 'PodRefused', 'Unschedulable']);

/** A waiting build is looked at again this often even if no admission pass wakes it. */
const WAITING_RECHECK_MS = 300_000;

/**
 * Level-based reconcile of one Build resource (docs/adr/0016-build-reconciler.md, its parts in
 * docs/adr/0037-reconciler-in-parts.md): reads the Build, its record in kiln's database, its Job
 * and pod, and acts on that state, never on the event that woke it. kiln's database is the record
 * of a build's state (written only through BuildLifecycle, with conditional transitions); the
 * Build's status mirrors it.
 *
 * - A Build applied with kubectl is registered (Registration).
 * - Unsuspended and queued → started; in_progress → its Job exists (JobAssembler; AlreadyExists
 *   adopts it), its pod's log is followed (LogDrains), and the Job's end is recorded once every
 *   log stream is stored (bounded by a drain deadline).
 * - cancelRequested, a cancelled record or a deleted Build → the log read on briefly, then the
 *   Job deleted; the finalizer goes once nothing is left to read.
 * - A build kiln will not run (RefusedBuild) is failed with its reason, for good.
 */
export class BuildReconciler {
  private readonly now: () => number;
  private readonly events: BuildEvents;
  private readonly mirror: StatusMirror;
  private readonly registration: Registration;
  private readonly masking: SecretMasking;
  private readonly jobs: JobAssembler;
  private readonly drains: LogDrains;
  /** Builds whose Job waits for admission, by id: an admission pass wakes their keys. */
  private readonly waiting = new Map<string, string>();
  /** Builds with a Job whose slot admission counts (adopted when their Job predates it). */
  private readonly counted = new Set<string>();
  /** What each build's pod was last told to wait for (admission has it; a change is a line). */
  private readonly told = new Map<string, string>();
  /** The pods this process follows, by namespace/name: what changes reaches their follower. */
  private readonly followedPods = new Map<string, { key: string; record: BuildEntity }>();
  private readonly unwatch: () => void;

  constructor(private readonly deps: ReconcilerDeps) {
    this.now = deps.now ?? Date.now;
    this.events = new BuildEvents(deps.workloads, deps.logger, this.now);
    this.mirror = new StatusMirror(deps.builds, this.now);
    this.registration = new Registration(deps, this.events);
    this.masking = new SecretMasking(deps);
    this.jobs = new JobAssembler(deps, this.events, this.masking);
    this.drains = new LogDrains(deps, this.now);
    this.unwatch = deps.admission.watch(() => void this.lookAtWaiting());
  }

  /** Stops every log follower without a marker (lost lease, shutdown): the next leader resumes. */
  stopAll(): Promise<void> {
    this.followedPods.clear();
    return this.drains.stopAll();
  }

  /**
   * A pod changed (the pods' informer says so): when this process follows its log, its follower
   * learns its containers' states now rather than at the reconcile the change queues, which may
   * wait behind one in flight for the Build (writing its status): a container that starts is
   * followed at once. The reconcile still runs and acts on the same pod.
   */
  podChanged(pod: V1Pod): void {
    const namespace = pod.metadata?.namespace ?? '';
    const where = `${namespace}/${pod.metadata?.name ?? ''}`;
    const followed = this.followedPods.get(where);
    if (followed === undefined) return;
    if (!this.drains.isFollowing(followed.record.id)) {
      this.followedPods.delete(where);
      return;
    }
    this.drains.follow(followed.key, followed.record, namespace, pod);
  }

  /** Stops listening to admission (shutdown). */
  close(): void {
    this.unwatch();
  }

  /** After an admission pass: the builds admitted meanwhile get their Job now. */
  private async lookAtWaiting(): Promise<void> {
    const ids = [...this.waiting.keys()];
    if (ids.length === 0) return;
    try {
      const outcomes = await this.deps.admission.outcomes(ids);
      for (const id of ids) {
        if (outcomes.get(id) === 'waiting') continue;
        const key = this.waiting.get(id);
        this.waiting.delete(id);
        if (key !== undefined) this.deps.wake(key);
      }
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'could not read whether waiting builds were admitted');
    }
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
    let record = await this.registration.recordOf(resource);
    if (signal.aborted) return;
    if (record === undefined) return this.unrecorded(resource);

    const deleting = resource.metadata.deletionTimestamp !== undefined;
    const cancelWanted =
      resource.spec.cancelRequested === true || record.status === 'cancelled' || deleting;
    const { lifecycle } = this.deps;

    if (record.status === 'queued') {
      if (deleting) return this.mirror.release(resource);
      if (resource.spec.suspend === true || cancelWanted)
        return this.mirror.mirror(resource, record);
      const queued = record;
      record = await transition(lifecycle, queued, () =>
        lifecycle.start(queued.tenantId, queued.id),
      );
    }
    if (record.status === 'in_progress' && cancelWanted) {
      const running = record;
      const reason =
        resource.spec.cancelReason ?? (deleting ? 'the Build resource was deleted' : null);
      record = await transition(lifecycle, running, () =>
        lifecycle.cancel(running.tenantId, running.id, reason),
      );
    }
    if (signal.aborted) return;
    switch (record.status) {
      case 'queued':
        return this.mirror.mirror(resource, record);
      case 'in_progress':
        return this.run(key, resource, record);
      case 'cancelled':
        return this.cancelled(resource, record);
      case 'success':
      case 'failed':
        return this.ended(key, resource, record);
    }
  }

  private async unrecorded(resource: BuildResource): Promise<ReconcileResult | void> {
    if (resource.metadata.deletionTimestamp !== undefined) return this.mirror.release(resource);
    if (this.registration.hadRecord(resource)) return this.registration.deleteOrphan(resource);
    if (resource.status?.failureReason === 'InvalidSpec') return; // refused before: permanent
    let created: BuildEntity;
    try {
      created = await this.registration.register(resource);
    } catch (error) {
      if (!(error instanceof RefusedBuild)) throw error;
      await this.mirror.refuse(resource, error.message);
      await this.events.emit(resource, 'Warning', error.reason, error.message);
      return;
    }
    return this.mirror.mirror(resource, created);
  }

  private async run(
    key: string,
    current: BuildResource,
    record: BuildEntity,
  ): Promise<ReconcileResult | void> {
    const namespace = namespaceOf(current);
    const jobName = buildObjectName(record.id);
    // Goes on from the version the finalizer write answered with: the Job is created in the same
    // reconcile, not one the finalizer's watch event brings.
    const resource = await this.mirror.withFinalizer(current);
    const job = this.deps.caches.job(namespace, jobName);
    if (job === undefined) {
      const waits = await this.admitted(key, resource, record, await this.admission(record));
      if (waits !== undefined) return waits;
      // The status names the Job as the Job is made: nothing else of a Job just made, without
      // a pod yet, is left to do here, and the reconcile ends with its writes. The Job's ADDED
      // brings the key back, for its pod.
      const assembled = await this.assemble(key, resource, record, () =>
        this.mirror.mirror(resource, record, { jobName }),
      );
      if (assembled === 'refused' || assembled === 'gone') return;
      if (assembled === 'exists') return { requeueAfterMs: 500 }; // the cache catches up
      return;
    }
    const foreign = foreignController(job, resource);
    if (foreign !== undefined) {
      const message = `Job ${jobName} belongs to another Build (uid ${foreign}); kiln will not adopt it`;
      await this.events.emit(resource, 'Warning', 'JobConflict', message);
      await this.mirror.mirror(resource, record, { message });
      return { requeueAfterMs: 30_000 };
    }
    // Adopted (another operator created it and died, or the patch failed): the ConfigMap and
    // Secret it left without an owner would outlive the build, holding its credentials.
    await this.jobs.own(namespace, record.id, job);
    if (!this.counted.has(record.id)) {
      await this.deps.admission.adopt(record.id);
      this.counted.add(record.id);
    }

    const pod = this.deps.caches.podOfJob(namespace, jobName);
    await this.masking.register(record, namespace);
    this.drains.follow(key, record, namespace, pod);
    const podName = pod?.metadata?.name;
    if (podName !== undefined && this.drains.isFollowing(record.id))
      this.followedPods.set(`${namespace}/${podName}`, { key, record });
    // What earlier reconciles learnt is read back from the cluster, not from this process's
    // memory: a pod of the Job was seen when the Build's status names it (or this process follows
    // it, its status write maybe not in the cache yet), and the pod says since when an image
    // fails to pull.
    const podSeen =
      pod !== undefined ||
      resource.status?.podName !== undefined ||
      this.drains.isFollowing(record.id);
    const pullSince = pullFailingSince(pod);
    const podWait = podWaitOf(
      job,
      pod,
      this.deps.caches.jobEvents(namespace, jobName),
      this.deps.caches.workloadOfJob?.(namespace, jobName),
    );
    const { settings } = this.deps;
    const outcome = outcomeOf(job, pod, {
      nowMs: this.now(),
      pullFailingSinceMs: pullSince,
      imagePullTimeoutMs: settings.imagePullTimeoutMs,
      podSeen,
      timeoutSeconds: record.spec.timeoutSeconds,
      podWait,
      unschedulableTimeoutMs: settings.unschedulableTimeoutMs,
    });
    if (outcome === undefined) {
      const waits = podWait?.kind === 'waits' ? podWait : undefined;
      await this.tell(record.id, waits);
      await this.mirror.mirror(resource, record, {
        jobName,
        podName: pod?.metadata?.name,
        ...(waits === undefined
          ? {}
          : { message: `waiting for the cluster (${waits.reason}): ${waits.message}` }),
      });
      // No event marks the pull or scheduling timeout: look again when it runs out.
      const due = [
        pullSince === undefined ? undefined : pullSince + settings.imagePullTimeoutMs,
        waits?.reason === 'Unschedulable' && waits.sinceMs !== undefined
          ? waits.sinceMs + settings.unschedulableTimeoutMs
          : undefined,
      ].filter((at): at is number => at !== undefined);
      if (due.length === 0) return;
      return { requeueAfterMs: Math.max(0, Math.min(...due) - this.now()) };
    }
    const wait = await this.drain(record, outcome, { pod, podSeen });
    if (wait !== undefined) return { requeueAfterMs: wait };
    const ended = await transition(this.deps.lifecycle, record, () =>
      this.record(record, outcome, { namespace, job }),
    );
    return this.ended(key, resource, ended);
  }

  /**
   * Tells admission what the build's pod waits for in the cluster (undefined: nothing), when that
   * changed since this process last told it: admission writes it to the build's `queue` and one
   * `[kiln]` line to its log per change, never one per Event.
   */
  private async tell(
    buildId: string,
    wait: { readonly reason: string; readonly message: string } | undefined,
  ): Promise<void> {
    const said = wait === undefined ? '' : `${wait.reason}\n${wait.message}`;
    if ((this.told.get(buildId) ?? '') === said) return;
    await this.deps.admission.clusterWait(
      buildId,
      wait === undefined ? undefined : { reason: wait.reason, message: wait.message },
    );
    this.told.set(buildId, said);
  }

  /**
   * Where the build stands in admission: enqueued now or before; admitted at once where nothing
   * is limited, else by the pass that followed, by another process, or still waiting.
   */
  private async admission(record: BuildEntity): Promise<WaitOutcome | undefined> {
    const { admission } = this.deps;
    if ((await admission.enqueue(record.id)) === 'admitted') return 'admitted';
    return (await admission.outcomes([record.id])).get(record.id);
  }

  /**
   * Undefined once the build is admitted (its Job is made now); while it waits, its Build says so
   * and the reconcile ends: an admission pass wakes it (lookAtWaiting), a slow recheck is the
   * backstop. The build's deadline starts with its Job: waiting never eats it.
   */
  private async admitted(
    key: string,
    resource: BuildResource,
    record: BuildEntity,
    outcome: WaitOutcome | undefined,
  ): Promise<ReconcileResult | undefined> {
    if (outcome === 'admitted') {
      this.waiting.delete(record.id);
      this.counted.add(record.id);
      return undefined;
    }
    // Not in_progress any more (cancelled, expired) as the record read before says: look again.
    if (outcome !== 'waiting') return { requeueAfterMs: 1_000 };
    this.waiting.set(record.id, key);
    await this.mirror.mirror(resource, record, {
      message: 'waiting to be admitted to run (GET /builds/{id}/status says where it stands)',
    });
    return { requeueAfterMs: WAITING_RECHECK_MS };
  }

  /**
   * How long the end of the build waits for its log; undefined when it need not wait. The end is
   * recorded only once every line is stored: a live stream closes at the final status. A
   * follower that finishes wakes the key; the answer is the time to the wait's deadline.
   */
  private async drain(
    record: BuildEntity,
    outcome: JobOutcome,
    { pod, podSeen }: { pod: V1Pod | undefined; podSeen: boolean },
  ): Promise<number | undefined> {
    // A builder that never started printed nothing: what earlier containers printed is stored.
    if (outcome.kind === 'failed' && NEVER_RAN.has(outcome.reason)) {
      await this.drains.stop(record.id);
      return undefined;
    }
    if (this.drains.isFollowing(record.id)) {
      return this.drains.drained(record.id, pod === undefined);
    }
    // A Job that does not say when it ended is taken to have ended now, while this process runs.
    const endedAtMs = outcome.endedAt?.getTime() ?? this.now();
    return this.drains.podNeverFollowed(record, podSeen, endedAtMs);
  }

  /** The Job made for the build; a build kiln will not run is failed and ended here. */
  private async assemble(
    key: string,
    resource: BuildResource,
    record: BuildEntity,
    alongside: () => Promise<void>,
  ): Promise<Awaited<ReturnType<JobAssembler['assemble']>> | 'refused'> {
    try {
      return await this.jobs.assemble(resource, record, alongside);
    } catch (error) {
      if (!(error instanceof RefusedBuild)) throw error;
      const { lifecycle } = this.deps;
      const failed = await transition(lifecycle, record, () =>
        lifecycle.fail(record.id, error.reason, error.message),
      );
      await this.events.emit(resource, 'Warning', error.reason, error.message);
      await this.ended(key, resource, failed);
      return 'refused';
    }
  }

  private record(record: BuildEntity, outcome: JobOutcome, ran: RanJob): Promise<BuildEntity> {
    // completed_at is when the Job ended in the cluster, not this write (maybe long after).
    if (outcome.kind === 'success') {
      return this.succeed(record, outcome.endedAt, outcome.pushed, outcome.packer, ran);
    }
    // A termination message holds the last lines of the log: masked like the log.
    const message = this.deps.sink.maskText(record.id, outcome.message);
    return this.deps.lifecycle.fail(record.id, outcome.reason, message, outcome.endedAt);
  }

  /**
   * A Job that succeeded built and pushed the image and ran its steps: the build succeeds unless
   * the scan policy fails it (PolicyViolation; the image stays pushed, the message says so).
   * What it pushed is recorded with the success or the PolicyViolation; a report kiln cannot
   * read costs only that. A packer build's manifest, when the template asks for none or kiln
   * cannot read it, is said at the end of the log, as the local runner says it.
   */
  private async succeed(
    record: BuildEntity,
    endedAt: Date | undefined,
    pushed: PushedReport,
    packer: PackerReport | undefined,
    ran: RanJob,
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
    // `packer` of kind 'artifacts' is what a packer build made: its provenance names them.
    const note = packer === undefined ? undefined : packerNote(packer);
    if (note !== undefined) {
      const text = `${note.level === 'WARN' ? 'WARN: ' : ''}[kiln] ${note.text}`;
      await this.deps.sink.append(record.id, [{ text, container: 'kiln' }]);
    }
    // Recorded whatever the verdict: a refused image stays pushed, and users must find it.
    const known = pushed !== undefined && 'digest' in pushed ? pushed : undefined;
    if (verdict.pass) {
      // Signed, stored and attached before the success is written: a tenant that requires
      // provenance gets no successful build without it.
      // As the record will say: never before the build started (a Job's end has whole seconds,
      // its start in kiln has milliseconds), so the statement's finishedOn is its completed_at.
      const endedMs = endedAt?.getTime() ?? this.now();
      const finishedAt = new Date(Math.max(endedMs, record.startedAt?.getTime() ?? endedMs));
      const provenance = await this.deps.provenance.produce({
        build: record,
        finishedAt,
        ...(known === undefined ? {} : { pushed: known }),
        ...(packer?.kind === 'artifacts' ? { packer: packer.artifacts } : {}),
        runner: 'kubernetes',
        namespace: ran.namespace,
        images: imagesOf(ran.job),
        insecureRegistries: this.deps.settings.job.insecureRegistries,
      });
      if (provenance.fails !== undefined) {
        return this.deps.lifecycle.fail(
          record.id,
          'ProvenanceFailed',
          provenance.fails,
          finishedAt,
          known,
        );
      }
      return this.deps.lifecycle.succeed(record.id, finishedAt, known, provenance.state);
    }
    await this.deps.sink.append(record.id, [
      { text: `ERROR: [kiln] ${verdict.message}`, container: 'kiln' },
    ]);
    return this.deps.lifecycle.fail(record.id, 'PolicyViolation', verdict.message, endedAt, known);
  }

  private async cancelled(
    resource: BuildResource,
    record: BuildEntity,
  ): Promise<ReconcileResult | void> {
    const namespace = namespaceOf(resource);
    const jobName = buildObjectName(record.id);
    const job = this.deps.caches.job(namespace, jobName);
    // Lines printed up to the cancel are being read: they get a moment, then reading stops.
    const settling = job === undefined ? undefined : await this.drains.cancelSettled(record.id);
    if (settling !== undefined) return { requeueAfterMs: settling };
    if (job !== undefined) await this.deps.workloads.deleteJob(namespace, jobName);
    // Its slot (or its place in the queue) goes to the next build.
    await this.deps.admission.release(record.id);
    this.forget(record.id);
    await this.mirror.mirror(resource, record);
    await this.mirror.release(resource);
  }

  private async ended(
    key: string,
    resource: BuildResource,
    record: BuildEntity,
  ): Promise<ReconcileResult | void> {
    const namespace = namespaceOf(resource);
    const jobName = buildObjectName(record.id);
    const job = this.deps.caches.job(namespace, jobName);
    const pod = this.deps.caches.podOfJob(namespace, jobName);
    // Without the finalizer, its log was stored and its Job handed over before: mirror only.
    if (!(resource.metadata.finalizers ?? []).includes(LOGS_FINALIZER)) {
      this.forget(record.id);
      return this.mirror.mirror(resource, record, job === undefined ? {} : { jobName });
    }
    // A build that ended while this operator was away: read what its pod still holds.
    await this.masking.register(record, namespace);
    this.drains.follow(key, record, namespace, pod);
    const wait = await this.drains.drained(record.id, pod === undefined);
    if (wait !== undefined) return { requeueAfterMs: wait };
    if (job !== undefined) await this.jobs.own(namespace, record.id, job);
    if (job !== undefined && !jobFinished(job)) {
      // Ended while its Job still runs, or still tries to make its pod (an image that cannot be
      // pulled, a pod the cluster refuses or cannot place): stop it.
      await this.deps.workloads.deleteJob(namespace, jobName);
    } else if (job !== undefined && job.spec?.ttlSecondsAfterFinished === undefined) {
      await this.deps.workloads.patchJob(namespace, jobName, {
        spec: { ttlSecondsAfterFinished: this.deps.settings.ttlSecondsAfterFinished },
      });
    }
    await this.deps.admission.release(record.id);
    this.forget(record.id);
    await this.mirror.mirror(resource, record, job === undefined ? {} : { jobName });
    await this.mirror.release(resource);
  }

  private forget(buildId: string): void {
    this.waiting.delete(buildId);
    this.counted.delete(buildId);
    this.told.delete(buildId);
    this.drains.forget(buildId);
    for (const [where, { record }] of this.followedPods)
      if (record.id === buildId) this.followedPods.delete(where);
    this.jobs.forget(buildId);
    this.masking.forget(buildId);
  }
}

/** Whether the Job reached its end (Complete or Failed): it makes no more pods. */
function jobFinished(job: V1Job): boolean {
  return (job.status?.conditions ?? []).some(
    (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
  );
}

/** Where a build's Job ran, for its provenance. */
interface RanJob {
  readonly namespace: string;
  readonly job: V1Job | undefined;
}

/**
 * The images a build's Job ran, init containers first, each once: the builder and step images
 * kiln pins by digest (`name@sha256:…`), so its provenance names exactly what built the image.
 */
function imagesOf(job: V1Job | undefined): ImageDependency[] {
  const spec = job?.spec?.template.spec;
  const images = new Map<string, ImageDependency>();
  for (const container of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
    const image = container.image;
    if (image === undefined || images.has(image)) continue;
    images.set(image, imageDependency(container.name, image));
  }
  return [...images.values()];
}
