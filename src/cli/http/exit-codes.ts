/** What `kiln` exits with (docs/cli.md). */
export const EXIT = {
  ok: 0,
  /** `build run`: the build failed. */
  buildFailed: 1,
  /** `build run`: the build was cancelled (or deleted) before it ended. */
  buildCancelled: 2,
  /** kiln refused the request: any 4xx or 5xx answer. */
  refused: 3,
  /** `verify`: the image has no provenance attestation (some may be of other kinds). */
  noAttestation: 4,
  /** `verify`: no provenance signature holds against the tenant's keys (changed, or another key). */
  signatureInvalid: 5,
  /** `verify`: a provenance verifies, but its statement is about another image. */
  subjectMismatch: 6,
  /** `verify`: the registry could not be reached, refused, or has no such image. */
  registry: 7,
  /** Bad flags, an unknown command, a missing argument or setting (sysexits EX_USAGE). */
  usage: 64,
  /** kiln could not be reached at all (EX_UNAVAILABLE). */
  unavailable: 69,
  /** Anything else: a fault of the CLI itself (EX_SOFTWARE). */
  software: 70,
  /** Ctrl-C left a build running (128 + SIGINT). */
  interrupted: 130,
} as const;

/** A mistake in how kiln was called: printed without a stack, exit 64. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** Ends the command with this exit code, the message (if any) already printed. */
export class ExitWith extends Error {
  override readonly name = 'ExitWith';
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}
