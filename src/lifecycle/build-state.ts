/** Build states and the transitions between them (docs/api.md). Pure: no I/O. */
export const BUILD_STATUSES = ['queued', 'in_progress', 'success', 'failed', 'cancelled'] as const;
export type BuildStatus = (typeof BUILD_STATUSES)[number];

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

export function isTerminal(status: BuildStatus): boolean {
  return status === 'success' || status === 'failed' || status === 'cancelled';
}

/** Only a failed build can be retried. */
export function canRetry(status: BuildStatus): boolean {
  return status === 'failed';
}
