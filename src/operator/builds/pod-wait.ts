import type { CoreV1Event, V1Job, V1Pod } from '@kubernetes/client-node';
import { containerStatusesOf } from './pod-state.js';

/**
 * Why an admitted build's pod does not run yet, read from the cluster (pure): its Job's Events
 * (the Job controller's FailedCreate: a quota, Pod Security, an admission webhook), the pod's
 * PodScheduled condition and its containers' waiting states. What waiting cannot cure is a
 * refusal: the build fails at once with PodRefused.
 */
export type PodWait =
  | {
      readonly kind: 'waits';
      readonly reason: string;
      readonly message: string;
      readonly sinceMs?: number;
    }
  | { readonly kind: 'refused'; readonly message: string };

const PULL_WAITS = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName']);

/** What kiln reads of a Kueue Workload (kueue.x-k8s.io/v1beta1): its conditions. */
export interface KueueWorkload {
  readonly metadata?: { readonly name?: string };
  readonly status?: {
    readonly conditions?: ReadonlyArray<{
      readonly type: string;
      readonly status: string;
      readonly reason?: string;
      readonly message?: string;
    }>;
  };
}

/**
 * What holds the build's pod back now; undefined when nothing does (it runs, or is on its way).
 * `events` are the Events of the Job (any order; those of an earlier Job of the same name are
 * ignored by uid).
 */
export function podWaitOf(
  job: V1Job,
  pod: V1Pod | undefined,
  events: readonly CoreV1Event[],
  workload?: KueueWorkload,
): PodWait | undefined {
  // Created suspended for Kueue (KILN_ADMISSION=kueue): its Workload says why it waits.
  if (job.spec?.suspend === true) return kueueWait(workload);
  if (pod === undefined || pod.metadata?.deletionTimestamp !== undefined) {
    return pod === undefined ? createFailure(job, events) : undefined;
  }
  if (pod.status?.phase !== 'Pending') return undefined;
  const scheduled = pod.status.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable') {
    return {
      kind: 'waits',
      reason: 'Unschedulable',
      message: scheduled.message ?? 'no node can run the pod',
      sinceMs: timeMs(scheduled.lastTransitionTime) ?? timeMs(pod.metadata?.creationTimestamp),
    };
  }
  for (const status of containerStatusesOf(pod)) {
    const waiting = status.state?.waiting;
    if (waiting?.reason === undefined) continue;
    if (PULL_WAITS.has(waiting.reason)) {
      return {
        kind: 'waits',
        reason: 'ImagePull',
        message: `image ${status.image} of container ${status.name}: ${waiting.message ?? waiting.reason}`,
      };
    }
    if (waiting.reason === 'CreateContainerConfigError') {
      return {
        kind: 'waits',
        reason: 'CreateContainerConfigError',
        message: `container ${status.name}: ${waiting.message ?? waiting.reason}`,
      };
    }
  }
  return undefined;
}

/**
 * The Job controller could not create the pod: the latest FailedCreate of this Job, unless a pod
 * was created after it. A quota is a wait for capacity; Pod Security and an admission webhook
 * refuse it for good.
 */
function createFailure(job: V1Job, events: readonly CoreV1Event[]): PodWait | undefined {
  const uid = job.metadata?.uid;
  const ofJob = events.filter((event) => uid === undefined || event.involvedObject.uid === uid);
  const latest = (reason: string) =>
    ofJob
      .filter((event) => event.reason === reason)
      .sort((a, b) => (lastSeenMs(b) ?? 0) - (lastSeenMs(a) ?? 0))[0];
  const failed = latest('FailedCreate');
  if (failed === undefined) return undefined;
  const created = latest('SuccessfulCreate');
  if (created !== undefined && (lastSeenMs(created) ?? 0) > (lastSeenMs(failed) ?? 0))
    return undefined;
  const message = (failed.message ?? 'the Job controller could not create the pod').replace(
    /^Error creating: /,
    '',
  );
  if (
    /\bviolates PodSecurity\b/.test(message) ||
    /\badmission webhook\b.*\bdenied the request\b/.test(message)
  ) {
    return { kind: 'refused', message: `the cluster refused the build's pod: ${message}` };
  }
  if (/\bexceeded quota\b/.test(message)) {
    return { kind: 'waits', reason: 'ClusterQuota', message };
  }
  return { kind: 'waits', reason: 'PodNotCreated', message };
}

/**
 * A suspended Job Kueue has not admitted: no Workload yet, or its QuotaReserved condition False
 * (Pending: no quota now; Inadmissible: its LocalQueue or ClusterQueue is missing or stopped),
 * as KueuePending or KueueInadmissible with Kueue's own message.
 */
function kueueWait(workload: KueueWorkload | undefined): PodWait | undefined {
  if (workload === undefined) {
    return {
      kind: 'waits',
      reason: 'KueueQueued',
      message: "Kueue has not made the Job's Workload yet",
    };
  }
  const reserved = workload.status?.conditions?.find((c) => c.type === 'QuotaReserved');
  if (reserved?.status === 'False') {
    return {
      kind: 'waits',
      reason: `Kueue${reserved.reason ?? 'Pending'}`,
      message: `Workload ${workload.metadata?.name ?? ''}: ${reserved.message ?? reserved.reason ?? 'not admitted'}`,
    };
  }
  if (reserved === undefined) {
    return {
      kind: 'waits',
      reason: 'KueuePending',
      message: `Workload ${workload.metadata?.name ?? ''} waits for Kueue to reserve quota`,
    };
  }
  return undefined; // admitted: Kueue unsuspends the Job
}

/** When the Event last happened, by whichever of its clocks it has. */
function lastSeenMs(event: CoreV1Event): number | undefined {
  return (
    timeMs(event.lastTimestamp) ??
    timeMs(event.series?.lastObservedTime) ??
    timeMs(event.eventTime) ??
    timeMs(event.firstTimestamp) ??
    timeMs(event.metadata?.creationTimestamp)
  );
}

/** The informers' objects are raw JSON: a timestamp is a string there, a Date in client-node's types. */
function timeMs(value: Date | string | null | undefined): number | undefined {
  if (value === undefined || value === null) return undefined;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}
