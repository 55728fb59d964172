import { createHash } from 'node:crypto';
import { selectorMatches } from './builtin-rules.js';
import { StatusError } from './errors.js';
import type { EventNote, EventSource } from './events.js';
import { rfc3339 } from './kubelet.js';
import { formatQuantity, parseQuantity, podUsage } from './quota.js';
import type { ObjectStore, StoredEvent } from './store.js';
import { clone, isObject, type Json, type JsonObject, type KubeObject } from './types.js';

/**
 * A fake Kueue (kueue.x-k8s.io/v1beta1) for the API server double: its Job integration and its
 * scheduler, simplified, acting on the objects in the store as Kueue v0.14 acts on a cluster.
 * Where a name, reason or message is Kueue's, the comment names the Kueue source it comes from.
 *
 * - The Job webhook (pkg/controller/jobs/job/job_webhook.go Default): a Job created with the
 *   label `kueue.x-k8s.io/queue-name` is created suspended; a Job without it, in a namespace with
 *   a LocalQueue named `default`, gets that label first (LocalQueueDefaulting).
 * - The Job reconciler (pkg/controller/jobframework/reconciler.go): a suspended, labelled Job gets
 *   a Workload (`job-<name>-<hash>`, owned by the Job, finalizer `kueue.x-k8s.io/resource-in-use`,
 *   one pod set `main` with the Job's pod template); once the Workload is admitted the Job is
 *   unsuspended with the flavor's node labels and the `kueue.x-k8s.io/podset` label; a running Job
 *   whose Workload is not admitted is suspended again; a finished Job marks its Workload Finished;
 *   a deleted Job lets its Workload go (the finalizer is dropped and the garbage collector deletes
 *   it).
 * - The workload controller and the scheduler (pkg/controller/core/workload_controller.go,
 *   pkg/scheduler/scheduler.go, pkg/scheduler/flavorassigner): pending Workloads of each
 *   ClusterQueue are taken in order (priority, then creation) and admitted while the nominal
 *   quota of their flavors allows: `pods` counts one per pod, cpu, memory and any other resource
 *   the pod template requests count what it requests. Under StrictFIFO the first Workload that
 *   does not fit blocks the ones behind it; under BestEffortFIFO (the default) they are tried in
 *   turn. Status conditions, reasons and messages are Kueue's.
 * - The ClusterQueue and LocalQueue controllers: their `Active` condition and status counters.
 * - The visibility API (apis/visibility/v1beta1): pending Workloads with their positions.
 *
 * Not modelled: preemption, cohorts and borrowing, fair sharing, admission checks, partial
 * admission, waitForPodsReady, priority classes (every Workload has priority 0), topology-aware
 * scheduling, taints of flavors, integrations other than batch/v1 Job, and the finalizers Kueue
 * puts on ClusterQueues and ResourceFlavors.
 */

/**
 * The Kueue CRDs the double installs with `KubeApiServer.start({ kueue: true })`, from the
 * repository root as FIXTURES_DIR is (the standalone double runs as ESM, without __dirname).
 */
export const KUEUE_CRDS = 'test/support/kube/fixtures/kueue';
export const KUEUE_API_VERSION = 'kueue.x-k8s.io/v1beta1';
/** The aggregated API Kueue serves for queue positions (pkg/visibility). */
export const VISIBILITY_GROUP = 'visibility.kueue.x-k8s.io';
const VISIBILITY_API_VERSION = `${VISIBILITY_GROUP}/v1beta1`;
/** The label that hands a Job to Kueue (pkg/controller/constants QueueLabel). */
export const QUEUE_NAME_LABEL = 'kueue.x-k8s.io/queue-name';
const JOB_UID_LABEL = 'kueue.x-k8s.io/job-uid';
const PODSET_LABEL = 'kueue.x-k8s.io/podset';
const MAX_EXEC_TIME_LABEL = 'kueue.x-k8s.io/max-exec-time-seconds';
const RESOURCE_IN_USE = 'kueue.x-k8s.io/resource-in-use';
const DEFAULT_POD_SET = 'main';
const DEFAULT_LOCAL_QUEUE = 'default';

const JOBS = 'batch/jobs';
const WORKLOADS = 'kueue.x-k8s.io/workloads';
const LOCAL_QUEUES = 'kueue.x-k8s.io/localqueues';
const CLUSTER_QUEUES = 'kueue.x-k8s.io/clusterqueues';
const FLAVORS = 'kueue.x-k8s.io/resourceflavors';
const NAMESPACES = '/namespaces';
const WATCHED = new Set([JOBS, WORKLOADS, LOCAL_QUEUES, CLUSTER_QUEUES, FLAVORS, NAMESPACES]);

// Field managers: Kueue's user agent starts with `kueue`; its admission and Finished writes are
// server-side applies with these field owners (pkg/constants, pkg/workload UpdateStatus).
const KUEUE = 'kueue';
const ADMISSION = 'kueue-admission';
const FINISHED_OWNER = 'kueue-job-controller-Finished';
// Event recorders: the Job integration's (jobframework/setup.go) and the scheduler's.
const JOB_RECORDER: EventSource = { component: 'batch/job-kueue-controller' };
const SCHEDULER_RECORDER: EventSource = { component: ADMISSION };

/** What the fake Kueue needs from the API server (implemented by KubeApiServer). */
export interface KueueHost {
  readonly store: ObjectStore;
  /** Creates through the same path as a POST, with `manager` as the field manager. */
  createAs(manager: string, apiVersion: string, kind: string, object: KubeObject): KubeObject;
  /** Replaces through the same path as a PUT (of `/status` when asked), `manager` managing. */
  updateAs(
    manager: string,
    apiVersion: string,
    kind: string,
    object: KubeObject,
    subresource?: 'status',
  ): KubeObject;
  recordEvent(involved: KubeObject, source: EventSource, note: EventNote): KubeObject;
}

const obj = (value: unknown): JsonObject => (isObject(value) ? value : {});
const list = (value: unknown): JsonObject[] =>
  Array.isArray(value) ? value.filter((v): v is JsonObject => isObject(v)) : [];
const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : isObject(value)
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, canonical(value[k])]),
        )
      : value;
/** Equal as JSON, whatever the order of keys (a client may have written them in another). */
const same = (a: unknown, b: unknown): boolean =>
  JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
const conditionsOf = (o: KubeObject): JsonObject[] => list(obj(o.status).conditions);
const isTrue = (o: KubeObject, type: string): boolean =>
  conditionsOf(o).some((c) => c.type === type && c.status === 'True');
const controllerOf = (o: KubeObject) =>
  (o.metadata.ownerReferences ?? []).find((r) => r.controller);
const keyOf = (namespace: string | undefined, name: string): string => `${namespace ?? ''}/${name}`;

/** jobframework QueueNameForObject: the label, else the old annotation of the same name. */
function queueNameOf(job: KubeObject): string {
  return (
    job.metadata.labels?.[QUEUE_NAME_LABEL] ?? job.metadata.annotations?.[QUEUE_NAME_LABEL] ?? ''
  );
}

/**
 * jobframework GetWorkloadNameForOwnerWithGVK for a batch/v1 Job: `job-<name>` (cut to 247
 * characters), a dash and the first five hex digits of the SHA-1 of "Job\nbatch\n<name>\n<uid>".
 */
export function workloadNameForJob(jobName: string, jobUid: string): string {
  const hash = createHash('sha1').update(`Job\nbatch\n${jobName}\n${jobUid}`).digest('hex');
  return `${`job-${jobName}`.slice(0, 247)}-${hash.slice(0, 5)}`;
}

// ---- conditions ---------------------------------------------------------------------------------

interface ConditionNote {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
}

/**
 * apimeta.SetStatusCondition on a metav1.Condition list: lastTransitionTime moves only when the
 * status does; reason, message and observedGeneration always follow. True when it changed.
 */
function setCondition(conditions: JsonObject[], note: ConditionNote, generation: number): boolean {
  const old = conditions.find((c) => c.type === note.type);
  const next: JsonObject = {
    type: note.type,
    status: note.status,
    observedGeneration: generation,
    lastTransitionTime:
      old !== undefined && old.status === note.status
        ? (old.lastTransitionTime ?? rfc3339())
        : rfc3339(),
    reason: note.reason,
    message: note.message,
  };
  if (old === undefined) {
    conditions.push(next);
    return true;
  }
  if (same(old, next)) return false;
  Object.assign(old, next);
  return true;
}

// ---- quantities -----------------------------------------------------------------------------------

/** A Quantity in nano-units, rounded up as Kueue counts it: cpu in millis, the rest in units. */
function countable(resource: string, nanos: bigint): bigint {
  const unit = resource === 'cpu' ? 1_000_000n : 1_000_000_000n;
  return ((nanos + unit - 1n) / unit) * unit;
}

/**
 * pkg/resources ResourceQuantity(…).String(): cpu in DecimalSI; memory, ephemeral-storage and
 * hugepages in BinarySI unless that reads back as a plain number (then DecimalSI, as
 * newCanonicalQuantity's round trip makes it); every other resource in DecimalSI.
 */
function kueueQuantity(resource: string, nanos: bigint): string {
  const decimal = formatQuantity({ nanos, format: 'DecimalSI' });
  if (
    resource !== 'memory' &&
    resource !== 'ephemeral-storage' &&
    !resource.startsWith('hugepages-')
  )
    return decimal;
  const binary = formatQuantity({ nanos, format: 'BinarySI' });
  return /^-?\d+$/.test(binary) ? decimal : binary;
}

const quantityNanos = (value: unknown): bigint => parseQuantity(value)?.nanos ?? 0n;

/** resourcehelpers.PodRequests: what one pod of this spec requests, by resource. */
function podRequests(spec: JsonObject): Map<string, bigint> {
  const names = new Set<string>();
  for (const c of [...list(spec.containers), ...list(spec.initContainers)]) {
    const resources = obj(c.resources);
    for (const name of [
      ...Object.keys(obj(resources.requests)),
      ...Object.keys(obj(resources.limits)),
    ])
      names.add(name);
  }
  const pod: KubeObject = { apiVersion: 'v1', kind: 'Pod', metadata: {}, spec };
  const requests = new Map<string, bigint>();
  for (const name of [...names].sort()) {
    const nanos =
      (podUsage(pod, `requests.${name}`)?.nanos ?? 0n) + quantityNanos(obj(spec.overhead)[name]);
    requests.set(name, countable(name, nanos));
  }
  return requests;
}

// ---- the scheduler's view ---------------------------------------------------------------------

interface FlavorResource {
  flavor: string;
  resource: string;
}
const frKey = ({ flavor, resource }: FlavorResource): string => `${flavor}\u0000${resource}`;

interface ResourceGroup {
  covered: string[];
  flavors: { name: string; quota: Map<string, bigint> }[];
}

/** The usage of reserving (or admitted) Workloads, by flavor and resource. */
type Usage = Map<string, bigint>;

interface QueueView {
  cq: KubeObject;
  groups: ResourceGroup[];
  active: { status: 'True' | 'False'; reason: string; message: string };
  /** Pending Workloads in queue order (the queue's heap and its inadmissible ones together). */
  pending: KubeObject[];
  reserving: KubeObject[];
  reserved: Usage;
  admitted: Usage;
}

interface Snapshot {
  flavors: Map<string, KubeObject>;
  localQueues: Map<string, KubeObject>;
  queues: Map<string, QueueView>;
  /** Pending Workloads of each running LocalQueue (by namespace/name), queued or not. */
  localPending: Map<string, KubeObject[]>;
  namespaceLabels: Map<string, Record<string, string>>;
  /** Pending Workloads no ClusterQueue queues, with why (workload_controller.go). */
  inadmissible: { workload: KubeObject; message: string }[];
}

function resourceGroupsOf(cq: KubeObject): ResourceGroup[] {
  return list(obj(cq.spec).resourceGroups).map((group) => ({
    covered: (Array.isArray(group.coveredResources) ? group.coveredResources : []).map(str),
    flavors: list(group.flavors).map((flavor) => ({
      name: str(flavor.name),
      quota: new Map(
        list(flavor.resources).map((r) => [str(r.name), quantityNanos(r.nominalQuota)] as const),
      ),
    })),
  }));
}

/** pkg/cache/scheduler clusterQueue inactiveReason, for the causes the fake knows. */
function activeCondition(
  cq: KubeObject,
  groups: ResourceGroup[],
  flavors: Map<string, KubeObject>,
): QueueView['active'] {
  const reasons: string[] = [];
  const messages: string[] = [];
  if ((obj(cq.spec).stopPolicy ?? 'None') !== 'None') {
    reasons.push('Stopped');
    messages.push('is stopped');
  }
  const missing = [
    ...new Set(groups.flatMap((g) => g.flavors.map((f) => f.name)).filter((f) => !flavors.has(f))),
  ];
  if (missing.length > 0) {
    reasons.push('FlavorNotFound');
    messages.push(`references missing ResourceFlavor(s): ${missing.join(',')}`);
  }
  if (reasons.length === 0)
    return { status: 'True', reason: 'Ready', message: 'Can admit new workloads' };
  return {
    status: 'False',
    reason: reasons[0] ?? 'Unknown',
    message: `Can't admit new workloads: ${messages.join(', ')}.`,
  };
}

/** What an admission reserves, by flavor and resource (the pod set assignments' resourceUsage). */
function admissionUsage(workload: KubeObject): Usage {
  const usage: Usage = new Map();
  for (const psa of list(obj(obj(workload.status).admission).podSetAssignments)) {
    const flavors = obj(psa.flavors);
    for (const [resource, amount] of Object.entries(obj(psa.resourceUsage))) {
      const flavor = str(flavors[resource]);
      if (flavor === '') continue;
      const key = frKey({ flavor, resource });
      usage.set(key, (usage.get(key) ?? 0n) + quantityNanos(amount));
    }
  }
  return usage;
}

function addUsage(into: Usage, from: Usage): void {
  for (const [key, value] of from) into.set(key, (into.get(key) ?? 0n) + value);
}

const hasReservation = (wl: KubeObject): boolean =>
  isTrue(wl, 'QuotaReserved') && isObject(obj(wl.status).admission);

// ---- flavor assignment ----------------------------------------------------------------------------

interface PodSetRequest {
  name: string;
  count: number;
  requests: Map<string, bigint>;
}

type Assignment =
  { fits: true; podSetAssignments: JsonObject[]; usage: Usage } | { fits: false; message: string };

/** A Workload's pod sets with their total requests (workload.Info TotalRequests, plus `pods`). */
function podSetRequests(wl: KubeObject, coversPods: boolean): PodSetRequest[] {
  return list(obj(wl.spec).podSets).map((ps) => {
    const count = typeof ps.count === 'number' ? ps.count : 1;
    const requests = new Map<string, bigint>();
    for (const [name, nanos] of podRequests(obj(obj(ps.template).spec)))
      requests.set(name, nanos * BigInt(count));
    // The flavor assigner counts pods only where the ClusterQueue covers them.
    if (coversPods) requests.set('pods', BigInt(count) * 1_000_000_000n);
    return { name: str(ps.name) || DEFAULT_POD_SET, count, requests };
  });
}

/** How a resource group's flavors came out for a pod set (findFlavorForPodSets). */
type GroupOutcome =
  | { flavor: string }
  /** No flavor fits now, but one could once quota frees: the reasons add to the pod set's. */
  | { waiting: string[] }
  /** No flavor could ever fit: these reasons replace the pod set's, and it goes no further. */
  | { never: string[] };

function assignGroup(
  group: ResourceGroup,
  wanted: string[],
  requests: Map<string, bigint>,
  nodeSelector: JsonObject,
  flavors: Map<string, KubeObject>,
  used: Usage,
  assumed: Usage,
): GroupOutcome {
  const labelKeys = new Set(
    group.flavors.flatMap((f) => Object.keys(obj(obj(flavors.get(f.name)?.spec).nodeLabels))),
  );
  const reasons: string[] = [];
  let couldFit = false;
  for (const flavor of group.flavors) {
    const rf = flavors.get(flavor.name);
    if (rf === undefined) {
      reasons.push(`flavor ${flavor.name} not found`);
      continue;
    }
    const nodeLabels = obj(obj(rf.spec).nodeLabels);
    if (Object.entries(nodeSelector).some(([k, v]) => labelKeys.has(k) && nodeLabels[k] !== v)) {
      reasons.push(`flavor ${flavor.name} doesn't match node affinity`);
      continue;
    }
    let outcome: 'fit' | 'wait' | 'never' = 'fit';
    for (const resource of wanted) {
      const fr = frKey({ flavor: flavor.name, resource });
      const request = requests.get(resource) ?? 0n;
      const previously = assumed.get(fr) ?? 0n;
      const nominal = flavor.quota.get(resource) ?? 0n;
      const available = nominal - (used.get(fr) ?? 0n);
      const value = previously + request;
      const show = (nanos: bigint): string => kueueQuantity(resource, nanos);
      // fitsResourceQuota, in a ClusterQueue of no cohort: its capacity is its nominal quota.
      if (value > nominal) {
        reasons.push(
          `insufficient quota for ${resource} in flavor ${flavor.name}, previously considered podsets requests (${show(previously)}) + current podset request (${show(request)}) > maximum capacity (${show(nominal)})`,
        );
        outcome = 'never';
        break;
      }
      if (value > available) {
        reasons.push(
          `insufficient unused quota for ${resource} in flavor ${flavor.name}, ${show(value - available)} more needed`,
        );
        outcome = 'wait';
      }
    }
    // A flavor that fits ends the search, and the other flavors' reasons are dropped.
    if (outcome === 'fit') return { flavor: flavor.name };
    if (outcome === 'wait') couldFit = true;
  }
  return couldFit ? { waiting: reasons } : { never: reasons };
}

/**
 * flavorassigner.assignFlavors without preemption, borrowing or taints: for each pod set, each
 * resource group it needs gets the first flavor (in the ClusterQueue's order) that matches the
 * pod set's node selector and has unused nominal quota for all of the group's requested
 * resources. The reasons a flavor does not fit are Kueue's words; the message joins them sorted,
 * as Status.Message does, and the pod sets' messages with "; ", as Assignment.Message does.
 */
function assignFlavors(
  view: QueueView,
  wl: KubeObject,
  flavors: Map<string, KubeObject>,
  used: Usage,
): Assignment {
  const coversPods = view.groups.some((g) => g.covered.includes('pods'));
  const assumed: Usage = new Map();
  const podSetAssignments: JsonObject[] = [];
  const failures: string[] = [];
  const templates = list(obj(wl.spec).podSets);
  for (const [index, ps] of podSetRequests(wl, coversPods).entries()) {
    const nodeSelector = obj(obj(obj(obj(templates[index]).template).spec).nodeSelector);
    const assigned: Record<string, string> = {};
    let reasons: string[] = [];
    let hopeless = false;
    const done = new Set<string>();
    for (const resource of ps.requests.keys()) {
      if (done.has(resource)) continue;
      const group = view.groups.find((g) => g.covered.includes(resource));
      if (group === undefined) {
        reasons = [`resource ${resource} unavailable in ClusterQueue`];
        hopeless = true;
        break;
      }
      const wanted = [...ps.requests.keys()].filter((r) => group.covered.includes(r));
      for (const r of wanted) done.add(r);
      const outcome = assignGroup(group, wanted, ps.requests, nodeSelector, flavors, used, assumed);
      if ('never' in outcome) {
        reasons = outcome.never;
        hopeless = true;
        break;
      }
      if ('waiting' in outcome) reasons.push(...outcome.waiting);
      else for (const r of wanted) assigned[r] = outcome.flavor;
    }
    if (reasons.length > 0 || hopeless) {
      failures.push(`couldn't assign flavors to pod set ${ps.name}: ${reasons.sort().join(', ')}`);
      // A pod set no flavor could ever take ends the assignment (atLeastOnePodsAssignmentFailed).
      if (hopeless) break;
      continue;
    }
    const resourceUsage: JsonObject = {};
    for (const [resource, nanos] of ps.requests) {
      resourceUsage[resource] = kueueQuantity(resource, nanos);
      const fr = frKey({ flavor: assigned[resource] ?? '', resource });
      assumed.set(fr, (assumed.get(fr) ?? 0n) + nanos);
    }
    podSetAssignments.push({
      name: ps.name,
      flavors: assigned,
      resourceUsage,
      count: ps.count,
    });
  }
  if (failures.length > 0) return { fits: false, message: failures.join('; ') };
  return { fits: true, podSetAssignments, usage: assumed };
}

// ---- the fake ------------------------------------------------------------------------------------

/**
 * The fake Kueue (see the top of this file). It acts on every change of Jobs, Kueue objects and
 * Namespaces, in one level-based pass: whatever the history, the same objects give the same
 * result. `enabled = false` pauses it (as the other fake controllers of the double).
 */
export class FakeKueue {
  private on = true;
  private stopped = false;
  private pending = false;
  private readonly unsubscribe: () => void;
  /**
   * The order Jobs and Workloads arrived in (by uid), to break ties of creationTimestamp (whole
   * seconds): Kueue's queue heap keeps equal Workloads in the order they came, and it makes a
   * Workload for each Job as the Job's event comes.
   */
  private readonly arrival = new Map<string, number>();
  private arrivals = 0;
  /** The messages of the API server's refusals of the fake's writes: none, unless it has a bug. */
  readonly refusals: string[] = [];

  constructor(private readonly host: KueueHost) {
    this.unsubscribe = host.store.subscribe((event) => this.onEvent(event));
  }

  get enabled(): boolean {
    return this.on;
  }

  set enabled(value: boolean) {
    this.on = value;
    if (value) this.kick();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
  }

  /**
   * The Job webhook's defaulting (job_webhook.go Default), on create: the LocalQueue `default` of
   * the namespace for a Job that names none (when it exists), and `suspend: true` for a Job that
   * names a queue, so that no pod starts before its Workload is admitted.
   */
  defaultJob(job: KubeObject): void {
    if (!this.on) return;
    const namespace = job.metadata.namespace ?? '';
    if (
      queueNameOf(job) === '' &&
      this.host.store.get(LOCAL_QUEUES, namespace, DEFAULT_LOCAL_QUEUE) !== undefined
    )
      job.metadata.labels = { ...job.metadata.labels, [QUEUE_NAME_LABEL]: DEFAULT_LOCAL_QUEUE };
    if (queueNameOf(job) !== '') job.spec = { ...obj(job.spec), suspend: true };
  }

  private onEvent(event: StoredEvent): void {
    if (event.resource === WORKLOADS || event.resource === JOBS) {
      const uid = event.object.metadata.uid ?? '';
      if (event.type === 'ADDED') this.arrival.set(uid, this.arrivals++);
      if (event.type === 'DELETED') this.arrival.delete(uid);
    }
    if (this.on && WATCHED.has(event.resource)) this.kick();
  }

  /**
   * A write through the API server; a refusal (a conflict, a validation error) is kept in
   * `refusals` and the pass goes on, as a controller logs it and tries again on the next change.
   */
  private write(request: () => KubeObject): KubeObject | undefined {
    try {
      return request();
    } catch (error) {
      if (!(error instanceof StatusError)) throw error;
      this.refusals.push(error.message);
      return undefined;
    }
  }

  private kick(): void {
    if (this.pending || this.stopped) return;
    this.pending = true;
    setImmediate(() => {
      this.pending = false;
      if (this.on && !this.stopped) this.sync();
    });
  }

  private sync(): void {
    this.reconcileJobs();
    this.schedule();
    this.reportQueues();
  }

  // ---- the Job integration ----------------------------------------------------------------------

  private reconcileJobs(): void {
    const store = this.host.store;
    const jobs = new Map(store.list(JOBS).map((j) => [j.metadata.uid ?? '', j]));
    for (const wl of store.list(WORKLOADS)) {
      if (!(wl.metadata.finalizers ?? []).includes(RESOURCE_IN_USE)) continue;
      const owner = controllerOf(wl);
      const job = owner?.kind === 'Job' ? jobs.get(owner.uid) : undefined;
      // The Job reconciler drops the finalizer of a gone or going Job's Workloads; the workload
      // controller does so for a Workload deleted by hand that has no owner.
      const ownerGone =
        owner?.kind === 'Job' && (job === undefined || !!job.metadata.deletionTimestamp);
      const deletedOrphan = owner === undefined && !!wl.metadata.deletionTimestamp;
      if (ownerGone || deletedOrphan) this.removeFinalizer(wl);
    }
    const ordered = [...jobs.values()].sort((a, b) => this.arrived(a) - this.arrived(b));
    for (const job of ordered) if (!job.metadata.deletionTimestamp) this.reconcileJob(job);
  }

  /** ReconcileGenericJob for a top-level batch/v1 Job, the steps the fake models. */
  private reconcileJob(job: KubeObject): void {
    const queue = queueNameOf(job);
    if (queue === '') return;
    const namespace = job.metadata.namespace ?? '';
    const uid = job.metadata.uid ?? '';
    const wl = this.host.store.list(WORKLOADS, namespace).find((w) => controllerOf(w)?.uid === uid);
    const suspended = obj(job.spec).suspend === true;
    if (wl !== undefined && isTrue(wl, 'Finished')) {
      this.removeFinalizer(wl);
      return;
    }
    if (wl?.metadata.deletionTimestamp) {
      if (!suspended) this.stopJob(job, 'Workload is deleted');
      this.removeFinalizer(wl);
      return;
    }
    const finished = conditionsOf(job).find(
      (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
    );
    if (finished !== undefined) {
      if (wl !== undefined) this.finish(job, wl, finished);
      return;
    }
    if (wl === undefined) {
      // ensureOneWorkload stops a running Job that has no Workload; handleJobWithNoWorkload waits
      // for its pods to go before it creates one.
      if (!suspended) this.stopJob(job, 'Missing Workload; unable to restore pod templates');
      else if (Number(obj(job.status).active ?? 0) === 0) this.createWorkload(job, queue);
      return;
    }
    const admitted = isTrue(wl, 'Admitted');
    if (suspended) {
      if (admitted) this.startJob(job, wl);
      else if (str(obj(wl.spec).queueName) !== queue) {
        const next = clone(wl);
        next.spec = { ...obj(wl.spec), queueName: queue };
        this.write(() => this.host.updateAs(KUEUE, KUEUE_API_VERSION, 'Workload', next));
      }
      return;
    }
    if (!admitted) this.stopJob(job, 'Not admitted by cluster queue');
  }

  /** ConstructWorkload + prepareWorkload (jobframework) with the Job's PodSets (job_controller.go). */
  private createWorkload(job: KubeObject, queue: string): void {
    const spec = obj(job.spec);
    const template = clone(obj(spec.template));
    const meta = obj(template.metadata);
    // cleanLabels: the Job controller's labels leave, batch.kubernetes.io/job-name stays
    // (PropagateBatchJobLabelsToWorkload, on by default).
    const labels = { ...obj(meta.labels) };
    for (const managed of ['job-name', 'controller-uid', 'batch.kubernetes.io/controller-uid'])
      delete labels[managed];
    if (Object.keys(labels).length > 0) meta.labels = labels;
    else delete meta.labels;
    delete meta.creationTimestamp;
    template.metadata = meta;
    const parallelism = typeof spec.parallelism === 'number' ? spec.parallelism : 1;
    const count =
      typeof spec.completions === 'number' ? Math.min(parallelism, spec.completions) : parallelism;
    const name = workloadNameForJob(job.metadata.name ?? '', job.metadata.uid ?? '');
    const provReq = Object.entries(job.metadata.annotations ?? {}).filter(([k]) =>
      k.startsWith('provreq.kueue.x-k8s.io/'),
    );
    const maxExec = Number(job.metadata.labels?.[MAX_EXEC_TIME_LABEL] ?? NaN);
    const workload = this.write(() =>
      this.host.createAs(KUEUE, KUEUE_API_VERSION, 'Workload', {
        apiVersion: KUEUE_API_VERSION,
        kind: 'Workload',
        metadata: {
          name,
          namespace: job.metadata.namespace ?? '',
          labels: { [JOB_UID_LABEL]: job.metadata.uid ?? '' },
          ...(provReq.length > 0 ? { annotations: Object.fromEntries(provReq) } : {}),
          finalizers: [RESOURCE_IN_USE],
          ownerReferences: [
            {
              apiVersion: 'batch/v1',
              kind: 'Job',
              name: job.metadata.name ?? '',
              uid: job.metadata.uid ?? '',
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          podSets: [{ name: DEFAULT_POD_SET, count, template }],
          queueName: queue,
          priority: 0,
          priorityClassSource: '',
          ...(Number.isInteger(maxExec) && maxExec > 0
            ? { maximumExecutionTimeSeconds: maxExec }
            : {}),
        },
      }),
    );
    if (workload === undefined) return;
    this.host.recordEvent(job, JOB_RECORDER, {
      type: 'Normal',
      reason: 'CreatedWorkload',
      message: `Created Workload: ${keyOf(workload.metadata.namespace, workload.metadata.name ?? '')}`,
    });
  }

  /**
   * startJob / RunWithPodSetsInfo: unsuspend the Job, its pod template given the assigned
   * flavors' node labels and tolerations and the `kueue.x-k8s.io/podset` label.
   */
  private startJob(job: KubeObject, wl: KubeObject): void {
    const admission = obj(obj(wl.status).admission);
    const psa = list(admission.podSetAssignments)[0] ?? {};
    const next = clone(job);
    const spec = obj(next.spec);
    const template = obj(spec.template);
    const meta = obj(template.metadata);
    const podSpec = obj(template.spec);
    meta.labels = { ...obj(meta.labels), [PODSET_LABEL]: str(psa.name) || DEFAULT_POD_SET };
    const nodeSelector: JsonObject = { ...obj(podSpec.nodeSelector) };
    const tolerations = list(podSpec.tolerations);
    for (const flavor of new Set(Object.values(obj(psa.flavors)).map(str))) {
      const rf = this.host.store.get(FLAVORS, undefined, flavor);
      Object.assign(nodeSelector, obj(obj(rf?.spec).nodeLabels));
      for (const toleration of list(obj(rf?.spec).tolerations))
        if (!tolerations.some((t) => same(t, toleration))) tolerations.push(toleration);
    }
    if (Object.keys(nodeSelector).length > 0) podSpec.nodeSelector = nodeSelector;
    if (tolerations.length > 0) podSpec.tolerations = tolerations;
    template.metadata = meta;
    template.spec = podSpec;
    spec.template = template;
    spec.suspend = false;
    next.spec = spec;
    if (!this.write(() => this.host.updateAs(KUEUE, 'batch/v1', 'Job', next))) return;
    this.host.recordEvent(job, JOB_RECORDER, {
      type: 'Normal',
      reason: 'Started',
      message: `Admitted by clusterQueue ${str(admission.clusterQueue)}`,
    });
  }

  private stopJob(job: KubeObject, message: string): void {
    const next = clone(job);
    next.spec = { ...obj(job.spec), suspend: true };
    if (!this.write(() => this.host.updateAs(KUEUE, 'batch/v1', 'Job', next))) return;
    this.host.recordEvent(job, JOB_RECORDER, { type: 'Normal', reason: 'Stopped', message });
  }

  /** The Job finished: the Workload's Finished condition says how, with the Job's own message. */
  private finish(job: KubeObject, wl: KubeObject, jobCondition: JsonObject): void {
    const next = clone(wl);
    const conditions = conditionsOf(next);
    setCondition(
      conditions,
      {
        type: 'Finished',
        status: 'True',
        reason: jobCondition.type === 'Failed' ? 'Failed' : 'Succeeded',
        message: str(jobCondition.message),
      },
      wl.metadata.generation ?? 1,
    );
    next.status = { ...obj(next.status), conditions };
    const write = () =>
      this.host.updateAs(FINISHED_OWNER, KUEUE_API_VERSION, 'Workload', next, 'status');
    if (!this.write(write)) return;
    this.host.recordEvent(job, JOB_RECORDER, {
      type: 'Normal',
      reason: 'FinishedWorkload',
      message: `Workload '${keyOf(wl.metadata.namespace, wl.metadata.name ?? '')}' is declared finished`,
    });
  }

  private removeFinalizer(wl: KubeObject): void {
    const finalizers = (wl.metadata.finalizers ?? []).filter((f) => f !== RESOURCE_IN_USE);
    if (finalizers.length === (wl.metadata.finalizers ?? []).length) return;
    const next = clone(wl);
    if (finalizers.length > 0) next.metadata.finalizers = finalizers;
    else delete next.metadata.finalizers;
    this.write(() => this.host.updateAs(KUEUE, KUEUE_API_VERSION, 'Workload', next));
  }

  // ---- the scheduler --------------------------------------------------------------------------

  /** The queues as Kueue's queue manager and cache hold them, from the objects in the store. */
  private snapshot(): Snapshot {
    const store = this.host.store;
    const flavors = new Map(store.list(FLAVORS).map((f) => [f.metadata.name ?? '', f]));
    const localQueues = new Map(
      store.list(LOCAL_QUEUES).map((q) => [keyOf(q.metadata.namespace, q.metadata.name ?? ''), q]),
    );
    const namespaceLabels = new Map(
      store.list(NAMESPACES).map((n) => [n.metadata.name ?? '', n.metadata.labels ?? {}]),
    );
    const queues = new Map<string, QueueView>();
    for (const cq of store.list(CLUSTER_QUEUES)) {
      const groups = resourceGroupsOf(cq);
      queues.set(cq.metadata.name ?? '', {
        cq,
        groups,
        active: activeCondition(cq, groups, flavors),
        pending: [],
        reserving: [],
        reserved: new Map(),
        admitted: new Map(),
      });
    }
    const inadmissible: Snapshot['inadmissible'] = [];
    const localPending = new Map<string, KubeObject[]>();
    for (const wl of store.list(WORKLOADS)) {
      if (isTrue(wl, 'Finished')) continue;
      if (hasReservation(wl)) {
        const view = queues.get(str(obj(obj(wl.status).admission).clusterQueue));
        if (view === undefined) continue;
        view.reserving.push(wl);
        const usage = admissionUsage(wl);
        addUsage(view.reserved, usage);
        if (isTrue(wl, 'Admitted')) addUsage(view.admitted, usage);
        continue;
      }
      if (obj(wl.spec).active === false || wl.metadata.deletionTimestamp) continue;
      // The queue manager holds a Workload in its LocalQueue and, when that exists, in its
      // ClusterQueue, active or not; the workload controller says why one cannot be admitted.
      const queueName = str(obj(wl.spec).queueName);
      const lqKey = keyOf(wl.metadata.namespace, queueName);
      const lq = localQueues.get(lqKey);
      if (lq === undefined) {
        inadmissible.push({ workload: wl, message: `LocalQueue ${queueName} doesn't exist` });
        continue;
      }
      if ((obj(lq.spec).stopPolicy ?? 'None') !== 'None') {
        inadmissible.push({ workload: wl, message: `LocalQueue ${queueName} is inactive` });
        continue;
      }
      localPending.set(lqKey, [...(localPending.get(lqKey) ?? []), wl]);
      const cqName = str(obj(lq.spec).clusterQueue);
      const view = queues.get(cqName);
      if (view === undefined) {
        inadmissible.push({ workload: wl, message: `ClusterQueue ${cqName} doesn't exist` });
        continue;
      }
      view.pending.push(wl);
      if (view.active.status !== 'True')
        inadmissible.push({ workload: wl, message: `ClusterQueue ${cqName} is inactive` });
    }
    for (const view of queues.values()) view.pending.sort((a, b) => this.queueOrder(a, b));
    return { flavors, localQueues, queues, localPending, namespaceLabels, inadmissible };
  }

  /** queueOrderingFunc: higher priority first, then the older, then the one that came first. */
  private queueOrder(a: KubeObject, b: KubeObject): number {
    const priority = (w: KubeObject): number => Number(obj(w.spec).priority ?? 0);
    const created = (w: KubeObject): number => Date.parse(w.metadata.creationTimestamp ?? '');
    return (
      priority(b) - priority(a) || created(a) - created(b) || this.arrived(a) - this.arrived(b)
    );
  }

  private arrived(o: KubeObject): number {
    return this.arrival.get(o.metadata.uid ?? '') ?? Number.MAX_SAFE_INTEGER;
  }

  /** One scheduling pass over every ClusterQueue's pending Workloads, with the workload controller's verdicts. */
  private schedule(): void {
    const snapshot = this.snapshot();
    for (const { workload, message } of snapshot.inadmissible)
      this.unreserve(workload, 'Inadmissible', message);
    for (const view of snapshot.queues.values()) {
      // The scheduler takes no heads from an inactive ClusterQueue (queue manager heads()).
      if (view.active.status !== 'True') continue;
      const strict = obj(view.cq.spec).queueingStrategy === 'StrictFIFO';
      const used: Usage = new Map(view.reserved);
      const selector = obj(view.cq.spec).namespaceSelector;
      for (const wl of view.pending) {
        // A ClusterQueue without a namespaceSelector selects no namespace
        // (metav1.LabelSelectorAsSelector(nil) is labels.Nothing()).
        const labels = snapshot.namespaceLabels.get(wl.metadata.namespace ?? '') ?? {};
        if (!isObject(selector) || !selectorMatches(selector, labels)) {
          // Never blocks a StrictFIFO queue (cluster_queue.go RequeueIfNotPresent).
          this.unreserve(wl, 'Pending', "Workload namespace doesn't match ClusterQueue selector");
          continue;
        }
        const assignment = assignFlavors(view, wl, snapshot.flavors, used);
        if (assignment.fits) {
          this.reserve(wl, view, assignment.podSetAssignments);
          addUsage(used, assignment.usage);
          continue;
        }
        const coversPods = view.groups.some((g) => g.covered.includes('pods'));
        this.unreserve(wl, 'Pending', assignment.message, podSetRequests(wl, coversPods));
        if (strict) break;
      }
    }
  }

  /**
   * The scheduler's admit (SetQuotaReservation, SyncAdmittedCondition with no admission checks):
   * the admission, QuotaReserved and Admitted, and their Events.
   */
  private reserve(wl: KubeObject, view: QueueView, podSetAssignments: JsonObject[]): void {
    const cq = view.cq.metadata.name ?? '';
    const next = clone(wl);
    const conditions = conditionsOf(next);
    const generation = wl.metadata.generation ?? 1;
    setCondition(
      conditions,
      {
        type: 'QuotaReserved',
        status: 'True',
        reason: 'QuotaReserved',
        message: `Quota reserved in ClusterQueue ${cq}`,
      },
      generation,
    );
    setCondition(
      conditions,
      {
        type: 'Admitted',
        status: 'True',
        reason: 'Admitted',
        message: 'The workload is admitted',
      },
      generation,
    );
    next.status = {
      ...obj(next.status),
      admission: { clusterQueue: cq, podSetAssignments },
      conditions,
    };
    const write = () =>
      this.host.updateAs(ADMISSION, KUEUE_API_VERSION, 'Workload', next, 'status');
    if (!this.write(write)) return;
    const waited = Math.round(
      (Date.now() - Date.parse(wl.metadata.creationTimestamp ?? '')) / 1000,
    );
    this.host.recordEvent(wl, SCHEDULER_RECORDER, {
      type: 'Normal',
      reason: 'QuotaReserved',
      message: `Quota reserved in ClusterQueue ${cq}, wait time since queued was ${Math.max(0, waited)}s`,
    });
    this.host.recordEvent(wl, SCHEDULER_RECORDER, {
      type: 'Normal',
      reason: 'Admitted',
      message: `Admitted by ClusterQueue ${cq}, wait time since reservation was 0s`,
    });
  }

  /**
   * UnsetQuotaReservationWithCondition: QuotaReserved False with the reason (`Pending` from the
   * scheduler, with a Warning Event and the requests it tried (PropagateResourceRequests);
   * `Inadmissible` from the workload controller), no admission, Admitted False if it was True.
   * Writes only what changed, so the Event comes once per new message (Kueue repeats it each
   * scheduling attempt).
   */
  private unreserve(
    wl: KubeObject,
    reason: 'Pending' | 'Inadmissible',
    message: string,
    requests?: PodSetRequest[],
  ): void {
    const next = clone(wl);
    const status = obj(next.status);
    const conditions = conditionsOf(next);
    const generation = wl.metadata.generation ?? 1;
    setCondition(
      conditions,
      { type: 'QuotaReserved', status: 'False', reason, message },
      generation,
    );
    delete status.admission;
    if (isTrue(wl, 'Admitted'))
      setCondition(
        conditions,
        {
          type: 'Admitted',
          status: 'False',
          reason: 'NoReservation',
          message: 'The workload has no reservation',
        },
        generation,
      );
    status.conditions = conditions;
    if (requests !== undefined)
      status.resourceRequests = requests.map((ps) => ({
        name: ps.name,
        resources: Object.fromEntries(
          [...ps.requests].map(([r, nanos]) => [r, kueueQuantity(r, nanos)]),
        ),
      }));
    next.status = status;
    if (same(next.status, wl.status)) return;
    const write = () =>
      this.host.updateAs(ADMISSION, KUEUE_API_VERSION, 'Workload', next, 'status');
    if (!this.write(write)) return;
    if (reason === 'Pending')
      this.host.recordEvent(wl, SCHEDULER_RECORDER, {
        type: 'Warning',
        reason: 'Pending',
        message,
      });
  }

  // ---- queue status ------------------------------------------------------------------------------

  /** The ClusterQueue and LocalQueue controllers' status: Active, counters and usage. */
  private reportQueues(): void {
    const snapshot = this.snapshot();
    for (const view of snapshot.queues.values()) {
      const usage = (of: Usage, withBorrowed: boolean): JsonObject[] =>
        flavorUsage(view.groups, of, withBorrowed);
      this.writeStatus(
        view.cq,
        {
          pendingWorkloads: view.pending.length,
          reservingWorkloads: view.reserving.length,
          admittedWorkloads: view.reserving.filter((w) => isTrue(w, 'Admitted')).length,
          flavorsReservation: usage(view.reserved, true),
          flavorsUsage: usage(view.admitted, true),
        },
        { type: 'Active', ...view.active },
      );
    }
    for (const lq of snapshot.localQueues.values()) {
      const spec = obj(lq.spec);
      const view = snapshot.queues.get(str(spec.clusterQueue));
      const stopped = (spec.stopPolicy ?? 'None') !== 'None';
      const mine = (w: KubeObject): boolean =>
        w.metadata.namespace === lq.metadata.namespace &&
        str(obj(w.spec).queueName) === lq.metadata.name;
      const reserving = view?.reserving.filter(mine) ?? [];
      const admitted = reserving.filter((w) => isTrue(w, 'Admitted'));
      const sum = (workloads: KubeObject[]): Usage => {
        const total: Usage = new Map();
        for (const w of workloads) addUsage(total, admissionUsage(w));
        return total;
      };
      const counters: JsonObject = {
        pendingWorkloads: stopped
          ? 0
          : (snapshot.localPending.get(keyOf(lq.metadata.namespace, lq.metadata.name ?? ''))
              ?.length ?? 0),
        reservingWorkloads: reserving.length,
        admittedWorkloads: admitted.length,
      };
      if (view !== undefined) {
        counters.flavorsReservation = flavorUsage(view.groups, sum(reserving), false);
        counters.flavorUsage = flavorUsage(view.groups, sum(admitted), false);
        counters.flavors = localQueueFlavors(view.groups, snapshot.flavors);
      }
      // localqueue_controller.go: the LocalQueue is as active as its ClusterQueue.
      const active: ConditionNote = stopped
        ? { type: 'Active', status: 'False', reason: 'Stopped', message: 'LocalQueue is stopped' }
        : view === undefined
          ? {
              type: 'Active',
              status: 'False',
              reason: 'ClusterQueueDoesNotExist',
              message: "Can't submit new workloads to clusterQueue",
            }
          : view.active.status === 'True'
            ? {
                type: 'Active',
                status: 'True',
                reason: 'Ready',
                message: 'Can submit new workloads to localQueue',
              }
            : {
                type: 'Active',
                status: 'False',
                reason: 'ClusterQueueIsInactive',
                message: "Can't submit new workloads to clusterQueue",
              };
      this.writeStatus(lq, counters, active);
    }
  }

  private writeStatus(queue: KubeObject, counters: JsonObject, active: ConditionNote): void {
    const next = clone(queue);
    const conditions = conditionsOf(next);
    setCondition(conditions, active, queue.metadata.generation ?? 1);
    const status: JsonObject = { ...obj(next.status), ...counters, conditions };
    for (const key of ['flavorsReservation', 'flavorUsage', 'flavors'])
      if (!(key in counters) && queue.kind === 'LocalQueue') delete status[key];
    if (same(status, queue.status)) return;
    next.status = status;
    this.write(() => this.host.updateAs(KUEUE, KUEUE_API_VERSION, queue.kind, next, 'status'));
  }

  // ---- the visibility API -------------------------------------------------------------------------

  /**
   * `GET /apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues/{name}/pendingworkloads`
   * and `…/clusterqueues/{name}/pendingworkloads` (pkg/visibility/api/v1beta1): a
   * PendingWorkloadsSummary of the pending Workloads in queue order, `limit` (default 1000) from
   * `offset`. Undefined for any other path under the group-version.
   */
  visibility(path: string[], query: URLSearchParams): Json | undefined {
    const limit = Number(query.get('limit') ?? '') || 1000;
    const offset = Number(query.get('offset') ?? '') || 0;
    const snapshot = this.snapshot();
    const item = (wl: KubeObject, inLq: number, inCq: number): JsonObject => ({
      metadata: {
        name: wl.metadata.name ?? '',
        namespace: wl.metadata.namespace ?? '',
        creationTimestamp: wl.metadata.creationTimestamp ?? null,
        ownerReferences: (wl.metadata.ownerReferences ?? []).map((r) => ({
          apiVersion: r.apiVersion,
          kind: r.kind,
          name: r.name,
          uid: r.uid,
        })),
      },
      priority: Number(obj(wl.spec).priority ?? 0),
      localQueueName: str(obj(wl.spec).queueName),
      positionInClusterQueue: inCq,
      positionInLocalQueue: inLq,
    });
    const summary = (items: JsonObject[]): Json => ({
      kind: 'PendingWorkloadsSummary',
      apiVersion: VISIBILITY_API_VERSION,
      metadata: {},
      items,
    });
    const notFound = (resource: string, name: string): StatusError =>
      new StatusError(404, 'NotFound', `${resource}.${VISIBILITY_GROUP} "${name}" not found`, {
        name,
        group: VISIBILITY_GROUP,
        kind: resource,
      });
    const [first, second, third, fourth, fifth, ...rest] = path;
    if (
      first === 'namespaces' &&
      third === 'localqueues' &&
      fifth === 'pendingworkloads' &&
      rest.length === 0
    ) {
      const namespace = second ?? '';
      const name = fourth ?? '';
      const lq = snapshot.localQueues.get(keyOf(namespace, name));
      if (lq === undefined) throw notFound('localqueue', name);
      const pending = snapshot.queues.get(str(obj(lq.spec).clusterQueue))?.pending ?? [];
      const items: JsonObject[] = [];
      let skipped = 0;
      for (const [index, wl] of pending.entries()) {
        if (items.length >= limit) break;
        if (wl.metadata.namespace !== namespace || str(obj(wl.spec).queueName) !== name) continue;
        if (skipped < offset) skipped++;
        else items.push(item(wl, items.length + offset, index));
      }
      return summary(items);
    }
    if (first === 'clusterqueues' && third === 'pendingworkloads' && fourth === undefined) {
      const name = second ?? '';
      const view = snapshot.queues.get(name);
      if (view === undefined) throw notFound('clusterqueue', name);
      const positions = new Map<string, number>();
      const items: JsonObject[] = [];
      for (const [index, wl] of view.pending.entries()) {
        if (index >= offset + limit) break;
        const lq = keyOf(wl.metadata.namespace, str(obj(wl.spec).queueName));
        const inLq = positions.get(lq) ?? 0;
        positions.set(lq, inLq + 1);
        if (index >= offset) items.push(item(wl, inLq, index));
      }
      return summary(items);
    }
    return undefined;
  }

  /** The visibility group-version's discovery document (an APIResourceList). */
  visibilityResources(): Json {
    const resource = (name: string, namespaced: boolean, kind: string, verbs: string[]) => ({
      name,
      singularName: name.includes('/') ? '' : name.slice(0, -1),
      namespaced,
      kind,
      verbs,
    });
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: VISIBILITY_API_VERSION,
      resources: [
        resource('clusterqueues', false, 'ClusterQueue', []),
        resource('clusterqueues/pendingworkloads', false, 'PendingWorkloadsSummary', ['get']),
        resource('localqueues', true, 'LocalQueue', []),
        resource('localqueues/pendingworkloads', true, 'PendingWorkloadsSummary', ['get']),
      ],
    };
  }
}

/** getUsage / filterLocalQueueUsage: every flavor of every group, its covered resources sorted. */
function flavorUsage(groups: ResourceGroup[], usage: Usage, withBorrowed: boolean): JsonObject[] {
  return groups.flatMap((group) =>
    group.flavors.map((flavor) => ({
      name: flavor.name,
      resources: [...group.covered].sort().map((resource) => ({
        name: resource,
        total: kueueQuantity(resource, usage.get(frKey({ flavor: flavor.name, resource })) ?? 0n),
        // A ClusterQueue in no cohort borrows nothing.
        ...(withBorrowed ? { borrowed: '0' } : {}),
      })),
    })),
  );
}

/** The LocalQueue's `flavors` (ExposeFlavorsInLocalQueue, on by default). */
function localQueueFlavors(
  groups: ResourceGroup[],
  flavors: Map<string, KubeObject>,
): JsonObject[] {
  const covered = new Map<string, string[]>();
  for (const group of groups)
    for (const flavor of group.flavors)
      covered.set(flavor.name, [...(covered.get(flavor.name) ?? []), ...[...group.covered].sort()]);
  return groups.flatMap((group) =>
    group.flavors.map((flavor) => {
      const spec = obj(flavors.get(flavor.name)?.spec);
      return {
        name: flavor.name,
        resources: covered.get(flavor.name) ?? [],
        ...(isObject(spec.nodeLabels) && Object.keys(spec.nodeLabels).length > 0
          ? { nodeLabels: spec.nodeLabels }
          : {}),
        ...(Array.isArray(spec.nodeTaints) && spec.nodeTaints.length > 0
          ? { nodeTaints: spec.nodeTaints }
          : {}),
      };
    }),
  );
}
