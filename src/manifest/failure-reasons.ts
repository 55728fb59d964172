/** Why a build failed: bounded, so user failures and platform failures can be told apart. */
export const FAILURE_REASONS = [
  'BuildFailed',
  'TimedOut',
  'OutOfMemory',
  'PodEvicted',
  'PodDeleted',
  'InvalidSpec',
  'InternalError',
  'ImagePullFailed',
  /** The image was built and pushed; its scan findings exceed the build's scan policy. */
  'PolicyViolation',
  /** A secret reference could not be resolved, or its manager could not be asked, at start. */
  'SecretUnavailable',
  /** The registry refused the build's credentials in the pre-flight check before the Job. */
  'RegistryUnauthorized',
  /** The build waited to be admitted longer than KILN_QUEUE_TTL_SECONDS. */
  'QueueTimeout',
  /**
   * The cluster refused the build's pod for good (Pod Security, an admission webhook): waiting
   * would not change it.
   */
  'PodRefused',
  /** The scheduler found no node for the build's pod for KILN_OPERATOR_UNSCHEDULABLE_SECONDS. */
  'Unschedulable',
  /**
   * The tenant requires provenance (`provenance: required`) and the build's could not be signed,
   * stored or attached to its image; the image stays pushed.
   */
  'ProvenanceFailed',
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/**
 * Failures that are kiln's or the cluster's to fix, not the build author's: what the
 * `class="platform"` label of kiln_builds_finished_total counts and the KilnBuildsFailingPlatform
 * alert watches. Every other reason is the build's own (its Dockerfile, its spec, its credentials).
 */
export const PLATFORM_FAILURE_REASONS: ReadonlySet<FailureReason> = new Set<FailureReason>([
  'PodEvicted',
  'PodDeleted',
  'InternalError',
  'ImagePullFailed',
  'SecretUnavailable',
  'QueueTimeout',
  'PodRefused',
  'Unschedulable',
  'ProvenanceFailed',
]);

/** `platform` when kiln or the cluster is at fault, `user` when the build is. */
export function failureClass(reason: FailureReason): 'platform' | 'user' {
  return PLATFORM_FAILURE_REASONS.has(reason) ? 'platform' : 'user';
}
