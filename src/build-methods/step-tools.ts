/**
 * How each SBOM and scan tool runs, in a build's pod (steps.ts) and under the local runner
 * (steps.executor.ts): its command with the placeholders filled in, its shell and binary in its
 * image, and how it reaches a registry over plain HTTP. Pure.
 */
import {
  CLAIR_URL_PLACEHOLDER,
  OUTPUT_PLACEHOLDER,
  SBOM_COMMANDS,
  SCAN_COMMANDS,
  type ToolCommand,
} from '../manifest/tool-commands.js';
import type { SbomTool, ScanTool } from '../manifest/types.js';

/** What the scanners need of the operator's settings (StepSettings). */
export interface ScanSettings {
  /** Clair v4's URL, for clairctl; none: a clair scan is skipped with a note. */
  readonly clairUrl?: string;
  /** The Secret (in the build namespace) and key holding the Snyk token; none: snyk skipped. */
  readonly snykToken?: { readonly secret: string; readonly key: string };
}

/** How one tool is run in its container: its argv (`@IMAGE@` marks the reference) and more. */
export interface StepTool {
  readonly argv: readonly string[];
  /** The tool writes its document to stdout (the script redirects it to the output file). */
  readonly stdout: boolean;
  /** An exit code besides 0 that still means "done" (snyk exits 1 when it found something). */
  readonly okExit?: number;
  /** Extra environment (e.g. to reach plain-HTTP registries). */
  readonly env?: Readonly<Record<string, string>>;
}

export type Tool = SbomTool | ScanTool;

/**
 * Each tool's shell and binary in its image (docs/adr/0019): the distroless `-debug` images of
 * syft and grype keep busybox under /busybox (no /bin/sh) and the binary at /syft or /grype, off
 * PATH; trivy's and snyk's images are alpine/ubuntu with /bin/sh and the binary on PATH; Clair's
 * image is ubi-minimal with clairctl on PATH.
 */
export const STEP_SHELLS: Readonly<Record<Tool, { shell: string; binary: string }>> = {
  syft: { shell: '/busybox/sh', binary: '/syft' },
  grype: { shell: '/busybox/sh', binary: '/grype' },
  trivy: { shell: '/bin/sh', binary: 'trivy' },
  clair: { shell: '/bin/sh', binary: 'clairctl' },
  snyk: { shell: '/bin/sh', binary: 'snyk' },
};

/** A command table entry with its placeholders filled in for a build's pod. */
function fill(
  tool: Tool,
  command: ToolCommand,
  output: string,
  clairUrl: string | undefined,
): StepTool {
  const argv = command.argv.map((arg, index) =>
    index === 0
      ? STEP_SHELLS[tool].binary
      : arg
          .replaceAll(OUTPUT_PLACEHOLDER, output)
          .replaceAll(CLAIR_URL_PLACEHOLDER, clairUrl ?? ''),
  );
  const okExit = command.okExitCodes.find((code) => code !== 0);
  return { argv, stdout: command.stdout, ...(okExit === undefined ? {} : { okExit }) };
}

/**
 * How each tool reaches a registry over plain HTTP or with unverified TLS (the settings'
 * insecureRegistries): syft's and grype's `*_REGISTRY_INSECURE_USE_HTTP` and
 * `*_REGISTRY_INSECURE_SKIP_TLS_VERIFY`, trivy's `--insecure`. clairctl and snyk have none.
 */
function insecure(tool: Tool, step: StepTool): StepTool {
  switch (tool) {
    case 'syft':
    case 'grype': {
      const prefix = tool.toUpperCase();
      return {
        ...step,
        env: {
          [`${prefix}_REGISTRY_INSECURE_USE_HTTP`]: 'true',
          [`${prefix}_REGISTRY_INSECURE_SKIP_TLS_VERIFY`]: 'true',
        },
      };
    }
    case 'trivy':
      return { ...step, argv: [...step.argv.slice(0, -1), '--insecure', ...step.argv.slice(-1)] };
    case 'clair':
    case 'snyk':
      return step;
  }
}

/**
 * The SBOM tool's command (SBOM_COMMANDS). `out` is where the document goes: the pod's shared
 * directory, or a local build's own directory.
 */
export function sbomTool(tool: SbomTool, insecureRegistry: boolean, out: string): StepTool {
  const step = fill(tool, SBOM_COMMANDS[tool], out, undefined);
  return insecureRegistry ? insecure(tool, step) : step;
}

/** The scanner's command (SCAN_COMMANDS), or why it cannot run; `out` as sbomTool's. */
export function scanTool(
  tool: ScanTool,
  insecureRegistry: boolean,
  settings: ScanSettings,
  out: string,
): StepTool | { skip: string } {
  if (tool === 'clair' && settings.clairUrl === undefined) {
    return { skip: 'the clair scan is skipped: the operator has no KILN_CLAIR_URL' };
  }
  if (tool === 'snyk' && settings.snykToken === undefined) {
    return { skip: 'the snyk scan is skipped: the operator has no KILN_SNYK_TOKEN_SECRET' };
  }
  const step = fill(tool, SCAN_COMMANDS[tool], out, settings.clairUrl);
  return insecureRegistry ? insecure(tool, step) : step;
}
