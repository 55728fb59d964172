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
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];
