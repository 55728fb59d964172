import type { FailureReason } from '../../manifest/failure-reasons.js';

/** A build that failed for a reason the runner can name; its message is shown to the tenant. */
export class BuildFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

/** The failure of a build that outlived its spec's timeout. */
export function timedOut(seconds: number): BuildFailure {
  return new BuildFailure(
    'TimedOut',
    `the build ran longer than its timeout of ${seconds} s (KILN_BUILD_TIMEOUT_SECONDS when it was created) and was stopped`,
  );
}

/** The error lines of a failed command, or its last lines when it printed none. */
export function failureMessage(tail: readonly string[], code: number | null): string {
  const errors = tail.filter((line) => /^(Error|error|ERRO|fatal|FATAL)\b/.test(line.trim()));
  const chosen = errors.length > 0 ? errors.slice(-3) : tail.slice(-5);
  const text = chosen.join('\n').trim();
  return text === '' ? `exited with code ${code}` : text;
}
