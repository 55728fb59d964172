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
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];
