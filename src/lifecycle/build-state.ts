/** Build states and the transitions between them (spec section 3). Pure: no I/O. */
export const BUILD_STATUSES = ['queued', 'in_progress', 'success', 'failed', 'cancelled'] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

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

/** Failures caused by the platform rather than by what the user asked to build. */
export function isInfrastructureFailure(reason: FailureReason): boolean {
  switch (reason) {
    case 'PodEvicted':
    case 'PodDeleted':
    case 'InternalError':
    case 'ImagePullFailed':
      return true;
    case 'BuildFailed':
    case 'TimedOut':
    case 'OutOfMemory':
    case 'InvalidSpec':
    case 'PolicyViolation':
    case 'SecretUnavailable':
    case 'RegistryUnauthorized':
      return false;
  }
}

/**
 * `unstart` takes back a start the runner refused before anything ran (its backend could not be
 * reached): the API answers 503 and the build is queued again, as if start was never called.
 */
export type BuildEvent = 'start' | 'unstart' | 'succeed' | 'fail' | 'cancel';

/** The one transition table. Anything not listed is refused; terminal states are absorbing. */
export const TRANSITIONS: Readonly<Record<BuildEvent, { from: BuildStatus; to: BuildStatus }>> = {
  start: { from: 'queued', to: 'in_progress' },
  unstart: { from: 'in_progress', to: 'queued' },
  succeed: { from: 'in_progress', to: 'success' },
  fail: { from: 'in_progress', to: 'failed' },
  cancel: { from: 'in_progress', to: 'cancelled' },
};

export function nextStatus(current: BuildStatus, event: BuildEvent): BuildStatus | undefined {
  const rule = TRANSITIONS[event];
  return rule.from === current ? rule.to : undefined;
}

export function isTerminal(status: BuildStatus): boolean {
  return status === 'success' || status === 'failed' || status === 'cancelled';
}

/** Only a failed build can be retried (spec section 3, rule 3). */
export function canRetry(status: BuildStatus): boolean {
  return status === 'failed';
}
