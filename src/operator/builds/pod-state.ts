import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { ContainerState } from './log-follower.js';

/** The containers of a pod in the order they run: init containers first, then the others. */
export function containersInOrder(pod: V1Pod): string[] {
  return [
    ...(pod.spec?.initContainers ?? []).map((c) => c.name),
    ...(pod.spec?.containers ?? []).map((c) => c.name),
  ];
}

/** The statuses of a pod's containers, init containers first. */
export function containerStatusesOf(pod: V1Pod | undefined): V1ContainerStatus[] {
  return [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
}

/**
 * What the log follower needs to know of each container, read from the pod (undefined: the pod
 * is gone). A container that never started in a pod that has ended is `skipped`.
 */
export function containerStates(
  pod: V1Pod | undefined,
  names: readonly string[],
): Map<string, ContainerState> {
  const states = new Map<string, ContainerState>();
  if (pod === undefined || pod.metadata?.deletionTimestamp !== undefined) {
    for (const name of names) states.set(name, 'gone');
    return states;
  }
  const ended = pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed';
  const statuses = containerStatusesOf(pod);
  for (const name of names) {
    const state = statuses.find((s) => s.name === name)?.state;
    if (state?.terminated !== undefined) states.set(name, 'terminated');
    else if (state?.running !== undefined) states.set(name, 'running');
    else states.set(name, ended ? 'skipped' : 'waiting');
  }
  return states;
}

/**
 * What the reconciler reads of a pod, as one comparable string: its labels, deletion, phase and
 * reason, whether the scheduler placed it (PodScheduled), and each container's state (kind,
 * exit, waiting reason and message). Readiness, other conditions and annotations are left out: a sidecar's readiness flapping or a probe's annotation changes none of
 * them, and must not cost a reconcile (a pod written to every second is not reconciled every
 * second).
 */
export function podFacts(pod: V1Pod): string {
  return JSON.stringify({
    labels: pod.metadata?.labels,
    deletionTimestamp: pod.metadata?.deletionTimestamp,
    phase: pod.status?.phase,
    reason: pod.status?.reason,
    message: pod.status?.message,
    scheduled: scheduledOf(pod),
    containers: containerStatusesOf(pod).map(({ name, state }) => ({
      name,
      running: state?.running?.startedAt,
      terminated: state?.terminated && {
        exitCode: state.terminated.exitCode,
        reason: state.terminated.reason,
        finishedAt: state.terminated.finishedAt,
      },
      waiting: state?.waiting?.reason,
      waitingMessage: state?.waiting?.message,
    })),
  });
}

/** The pod's PodScheduled condition, as the reconciler reads it (not its probe times). */
function scheduledOf(pod: V1Pod): string | undefined {
  const condition = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  return condition === undefined
    ? undefined
    : `${condition.status}/${condition.reason ?? ''}/${condition.message ?? ''}`;
}

/** An update predicate for the informer of build pods: true when a fact the reconciler reads changed. */
export const podChanged = (before: V1Pod, after: V1Pod): boolean =>
  podFacts(before) !== podFacts(after);
