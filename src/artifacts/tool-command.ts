/**
 * How an SBOM tool or a scanner is run in a build's pod: the shape of the SBOM_COMMANDS and
 * SCAN_COMMANDS tables. The argv holds placeholders, never real values, so a table entry is a
 * constant the step builder fills in (src/build-methods/steps.ts passes the image reference as one
 * argument, never as shell text).
 */

/** Ends the argument that takes the pushed image reference (`registry:@IMAGE@`). */
export const IMAGE_PLACEHOLDER = '@IMAGE@';
/** Where the tool writes its document (a path in the steps' shared directory). */
export const OUTPUT_PLACEHOLDER = '@OUTPUT@';
/** Clair v4's API URL (clairctl's `--host`). */
export const CLAIR_URL_PLACEHOLDER = '@CLAIR_URL@';

/** One tool's command line and what its exit code means. */
export interface ToolCommand {
  /** argv[0] is the program as its docs name it; the rest are its arguments, with placeholders. */
  readonly argv: readonly string[];
  /** True when the document goes to stdout rather than to OUTPUT_PLACEHOLDER. */
  readonly stdout: boolean;
  /** Exit codes after which the document is complete (snyk exits 1 when it found something). */
  readonly okExitCodes: readonly number[];
  /** What the tool's exit codes mean, as its docs say. */
  readonly exitCodes: string;
  /** Where the flags and exit codes are documented. */
  readonly docs: readonly string[];
}
