import type { V1ContainerStatus, V1Job, V1Pod } from '@kubernetes/client-node';
import { BUILDER_CONTAINER } from '../../build-methods/job.js';
import { STEP_CONTAINERS } from '../../build-methods/steps.js';
import { packerFromMessage, type PackerReport } from '../../steps/packer-manifest.js';
import { pushedFromMessage, type ReportingStep } from '../../steps/pushed-image.js';
import { type PushedImages } from '../../manifest/formats.js';
import type { FailureReason } from '../../manifest/failure-reasons.js';
import { containerStatusesOf } from './pod-state.js';
import type { PodWait } from './pod-wait.js';

/**
 * What the step that reports the push (`image-ref`, or `s3-upload` for registry_type s3) said a
 * build pushed; a problem when the build has that step and kiln cannot read it; undefined when it
 * has no such step (nothing to learn).
 */
export type PushedReport = PushedImages | { readonly problem: string } | undefined;

type Ending =
  | {
      readonly kind: 'success';
      readonly pushed: PushedReport;
      /** What the packer-manifest step said packer made; undefined: the build has no such step. */
      readonly packer: PackerReport | undefined;
    }
  | { readonly kind: 'failed'; readonly reason: FailureReason; readonly message: string };

/** How a build's Job ended, read from the Job and its pod (pure). */
export type JobOutcome = Ending & {
  /**
   * When it ended by the cluster's clock, which is when the build ended even if the operator
   * records it much later (it was down); undefined when the Job and pod do not say.
   */
  readonly endedAt: Date | undefined;
};

const PULL_FAILURES = new Set(['ErrImagePull', 'ImagePullBackOff', 'InvalidImageName']);
/** Termination messages are bounded by the kubelet (4 KiB); kiln keeps the tail of that. */
const MESSAGE_MAX = 2_000;

/**
 * The outcome of a build's Job, or undefined while it runs. `pullFailingSinceMs` is since when a
 * container has been waiting for an image that fails to pull (`pullFailingSince`): past
 * `imagePullTimeoutMs` that is ImagePullFailed. `podSeen` says a pod of the Job existed: a failed
 * Job without its pod then means the pod was deleted.
 */
export function outcomeOf(
  job: V1Job,
  pod: V1Pod | undefined,
  facts: Facts,
): JobOutcome | undefined {
  const ending = endingOf(job, pod, facts);
  return ending === undefined ? undefined : { ...ending, endedAt: endedAt(job, pod, ending) };
}

interface Facts {
  readonly nowMs: number;
  readonly pullFailingSinceMs: number | undefined;
  readonly imagePullTimeoutMs: number;
  readonly podSeen: boolean;
  readonly timeoutSeconds: number;
  /** What holds the pod back (podWaitOf): a refusal ends the build, unschedulable in time. */
  readonly podWait?: PodWait | undefined;
  readonly unschedulableTimeoutMs?: number;
}

function endingOf(job: V1Job, pod: V1Pod | undefined, facts: Facts): Ending | undefined {
  const conditions = job.status?.conditions ?? [];
  const holds = (type: string) => conditions.find((c) => c.type === type && c.status === 'True');
  if (holds('Complete') !== undefined) {
    return { kind: 'success', pushed: pushedOf(job, pod), packer: packerOf(job, pod) };
  }
  const failed = holds('Failed');

  const { podWait } = facts;
  if (podWait?.kind === 'refused') {
    return { kind: 'failed', reason: 'PodRefused', message: podWait.message };
  }
  if (
    podWait?.kind === 'waits' &&
    podWait.reason === 'Unschedulable' &&
    podWait.sinceMs !== undefined &&
    facts.unschedulableTimeoutMs !== undefined &&
    facts.nowMs - podWait.sinceMs >= facts.unschedulableTimeoutMs
  ) {
    return {
      kind: 'failed',
      reason: 'Unschedulable',
      message: `no node could run the build's pod for ${Math.round(facts.unschedulableTimeoutMs / 1000)} s (KILN_OPERATOR_UNSCHEDULABLE_SECONDS): ${podWait.message}`,
    };
  }
  if (failed?.reason === 'DeadlineExceeded') {
    return {
      kind: 'failed',
      reason: 'TimedOut',
      message: `the build ran longer than its timeout of ${facts.timeoutSeconds} s and was stopped`,
    };
  }
  if (pod?.status?.reason === 'Evicted') {
    return {
      kind: 'failed',
      reason: 'PodEvicted',
      message: `the build's pod was evicted: ${pod.status.message ?? 'no reason given'}`.trim(),
    };
  }
  const statuses = containerStatusesOf(pod);
  const oom = statuses.find((s) => s.state?.terminated?.reason === 'OOMKilled');
  if (oom !== undefined) {
    return {
      kind: 'failed',
      reason: 'OutOfMemory',
      message: `container ${oom.name} ran out of memory (OOMKilled); give the build more memory`,
    };
  }
  const exited = statuses.find((s) => (s.state?.terminated?.exitCode ?? 0) !== 0);
  if (exited !== undefined) {
    return { kind: 'failed', reason: 'BuildFailed', message: exitMessage(exited) };
  }
  const pulling = statuses.find((s) => PULL_FAILURES.has(s.state?.waiting?.reason ?? ''));
  if (
    pulling !== undefined &&
    facts.pullFailingSinceMs !== undefined &&
    facts.nowMs - facts.pullFailingSinceMs >= facts.imagePullTimeoutMs
  ) {
    return {
      kind: 'failed',
      reason: 'ImagePullFailed',
      message: `image ${pulling.image} of container ${pulling.name} could not be pulled: ${
        pulling.state?.waiting?.message ?? pulling.state?.waiting?.reason ?? ''
      }`.trim(),
    };
  }
  if (failed !== undefined) {
    if (pod === undefined && facts.podSeen) {
      return {
        kind: 'failed',
        reason: 'PodDeleted',
        message: "the build's pod was deleted before it finished",
      };
    }
    return {
      kind: 'failed',
      reason: 'BuildFailed',
      message: failed.message ?? failed.reason ?? 'the Job failed',
    };
  }
  return undefined;
}

/**
 * A success ended at the Job's completionTime; a failure when the builder container terminated,
 * or (it never ran, or the pod is gone) when the Job's Failed condition turned true. Neither may
 * be there yet for a failure kiln decides itself (an image that cannot be pulled): undefined.
 */
function endedAt(job: V1Job, pod: V1Pod | undefined, ending: Ending): Date | undefined {
  if (ending.kind === 'success') return timeOf(job.status?.completionTime);
  const builder = containerStatusesOf(pod).find((s) => s.name === BUILDER_CONTAINER);
  const failed = job.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
  return timeOf(builder?.state?.terminated?.finishedAt) ?? timeOf(failed?.lastTransitionTime);
}

/**
 * An object's timestamp: client-node types it a Date, but the informers' objects are the raw
 * JSON, where it is an RFC 3339 string. Anything that is not a time is no time.
 */
function timeOf(value: Date | string | null | undefined): Date | undefined {
  if (value === undefined || value === null) return undefined;
  const time = new Date(value);
  return Number.isNaN(time.getTime()) ? undefined : time;
}

/** The steps whose termination message says what a build pushed (src/steps/run-step.ts). */
const REPORTING_STEPS: readonly ReportingStep[] = [
  STEP_CONTAINERS.imageRef,
  STEP_CONTAINERS.s3Upload,
];

/**
 * The termination message of the step that reports the push, read when the Job's pod template
 * has one (an init container, or the pod's container for s3-upload): from the pod's status,
 * which the kubelet keeps after the container ends.
 */
function pushedOf(job: V1Job, pod: V1Pod | undefined): PushedReport {
  const template = job.spec?.template?.spec;
  const reporter = [...(template?.initContainers ?? []), ...(template?.containers ?? [])]
    .map((c) => c.name)
    .find((name): name is ReportingStep => REPORTING_STEPS.includes(name as ReportingStep));
  if (reporter === undefined) return undefined;
  if (pod === undefined) return { problem: 'the pod was gone before its status was read' };
  const step = containerStatusesOf(pod).find((s) => s.name === reporter);
  return pushedFromMessage(step?.state?.terminated?.message ?? '', reporter);
}

/**
 * The termination message of the packer-manifest step (the pod's container after packer), read
 * when the Job's pod template has that step.
 */
function packerOf(job: V1Job, pod: V1Pod | undefined): PackerReport | undefined {
  const name = STEP_CONTAINERS.packerManifest;
  if (!(job.spec?.template?.spec?.containers ?? []).some((c) => c.name === name)) return undefined;
  if (pod === undefined) {
    return { kind: 'problem', problem: 'the pod was gone before its status was read' };
  }
  const step = containerStatusesOf(pod).find((s) => s.name === name);
  return packerFromMessage(step?.state?.terminated?.message ?? '');
}

/** Whether a container of the pod is failing to pull its image right now. */
export function pullFailing(pod: V1Pod | undefined): boolean {
  return containerStatusesOf(pod).some((s) => PULL_FAILURES.has(s.state?.waiting?.reason ?? ''));
}

/**
 * Since when (ms) a container of the pod has been waiting for an image that fails to pull, as
 * the pod tells it, so that any operator process reads the same time: the latest of the pod's
 * start and the end of a container that ran before (a container waits for its image from when it
 * was due to start); the pod's creation when it has no start yet. Undefined when no image fails
 * to pull.
 */
export function pullFailingSince(pod: V1Pod | undefined): number | undefined {
  if (!pullFailing(pod)) return undefined;
  const times = [
    timeOf(pod?.status?.startTime ?? pod?.metadata?.creationTimestamp),
    ...containerStatusesOf(pod).map((s) => timeOf(s.state?.terminated?.finishedAt)),
  ].flatMap((time) => (time === undefined ? [] : [time.getTime()]));
  return times.length === 0 ? undefined : Math.max(...times);
}

function exitMessage(status: V1ContainerStatus): string {
  const terminated = status.state?.terminated;
  const code = terminated?.exitCode ?? 1;
  const detail = (terminated?.message ?? '').trim();
  const head = `container ${status.name} exited with code ${code}`;
  if (detail === '') return head;
  const tail = detail.length > MESSAGE_MAX ? detail.slice(-MESSAGE_MAX) : detail;
  return `${head}: ${tail}`;
}
