/**
 * How an SBOM tool or a scanner is run in a build's pod: the SBOM_COMMANDS and SCAN_COMMANDS
 * tables and their shape. The argv holds placeholders, never real values, so a table entry is a
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

/** The scanners kiln can run; each has a command below. */
export type Scanner = 'trivy' | 'grype' | 'clair' | 'snyk';

/**
 * The scan step per scanner. None is given a threshold flag: kiln's policy gate decides from the
 * findings, so a scanner's exit code only says whether its report is complete.
 */
export const SCAN_COMMANDS = {
  trivy: {
    argv: ['trivy', 'image', '--format', 'json', '--output', OUTPUT_PLACEHOLDER, IMAGE_PLACEHOLDER],
    stdout: false,
    okExitCodes: [0],
    exitCodes: '0 even when vulnerabilities are found (non-zero on findings only with --exit-code)',
    docs: [
      'https://trivy.dev/latest/docs/configuration/reporting/',
      'https://trivy.dev/latest/docs/configuration/others/',
    ],
  },
  grype: {
    argv: ['grype', `registry:${IMAGE_PLACEHOLDER}`, '-o', 'json', '--file', OUTPUT_PLACEHOLDER],
    stdout: false,
    okExitCodes: [0],
    exitCodes:
      '0 even when vulnerabilities are found; with --fail-on 1 (2 in newer releases), and 1 on ' +
      'errors too in v0.78 (grype#1922)',
    docs: [
      'https://github.com/anchore/grype/blob/main/cmd/grype/cli/options/grype.go',
      'https://github.com/anchore/grype/issues/1922',
    ],
  },
  // `--host` and `--out` belong to the `report` subcommand, not to clairctl itself; the JSON is
  // Clair v4's VulnerabilityReport, written to stdout.
  clair: {
    argv: [
      'clairctl',
      'report',
      '--host',
      CLAIR_URL_PLACEHOLDER,
      '--out',
      'json',
      IMAGE_PLACEHOLDER,
    ],
    stdout: true,
    okExitCodes: [0],
    exitCodes: '0 when the report was printed; 1 on any error (clairctl has no severity threshold)',
    docs: [
      'https://github.com/quay/clair/blob/main/cmd/clairctl/report.go',
      'https://github.com/quay/clair/blob/main/cmd/clairctl/main.go',
    ],
  },
  // `--json-file-output` writes the JSON whether or not `--json` is given.
  snyk: {
    argv: [
      'snyk',
      'container',
      'test',
      IMAGE_PLACEHOLDER,
      `--json-file-output=${OUTPUT_PLACEHOLDER}`,
    ],
    stdout: false,
    okExitCodes: [0, 1],
    exitCodes:
      '0 no vulnerabilities; 1 vulnerabilities found (the report is complete); 2 failure, ' +
      're-run; 3 no supported projects detected',
    docs: [
      'https://github.com/snyk/cli/blob/main/help/cli-commands/container-test.md',
      'https://app.unpkg.com/snyk@1.1303.1/files/help/cli-commands/container-test.md',
    ],
  },
} as const satisfies Record<Scanner, ToolCommand>;

/** The SBOM formats kiln stores. */
export const SBOM_FORMATS = ['spdx-json', 'cyclonedx-json'] as const;
export type SbomFormat = (typeof SBOM_FORMATS)[number];

export interface SbomCommand extends ToolCommand {
  /** The format the command writes; readSbom reports the same one for its output. */
  readonly format: SbomFormat;
}

/**
 * The SBOM step per tool. Each writes to OUTPUT_PLACEHOLDER and exits 0 once it did, non-zero
 * when it could not (no threshold flags apply to SBOM generation).
 */
export const SBOM_COMMANDS = {
  // `syft scan <src> -o <format>=<file>`; `registry:` reads the pushed image without a daemon.
  // spdx-json is SPDX 2.3 JSON.
  syft: {
    format: 'spdx-json',
    argv: [
      'syft',
      'scan',
      `registry:${IMAGE_PLACEHOLDER}`,
      '-o',
      `spdx-json=${OUTPUT_PLACEHOLDER}`,
    ],
    stdout: false,
    okExitCodes: [0],
    exitCodes: '0 when the SBOM was written; non-zero on any error',
    docs: [
      'https://oss.anchore.com/docs/reference/syft/cli/',
      'https://github.com/anchore/syft/wiki/Output-Formats',
      'https://github.com/anchore/syft/wiki/Multiple-Outputs',
    ],
  },
  // `--format cyclonedx` is CycloneDX JSON (trivy has no CycloneDX XML); it scans nothing unless
  // scanners are asked for, so the SBOM step stays an SBOM step.
  trivy: {
    format: 'cyclonedx-json',
    argv: [
      'trivy',
      'image',
      '--format',
      'cyclonedx',
      '--output',
      OUTPUT_PLACEHOLDER,
      IMAGE_PLACEHOLDER,
    ],
    stdout: false,
    okExitCodes: [0],
    exitCodes:
      '0 when the SBOM was written (trivy exits non-zero on findings only with --exit-code)',
    docs: [
      'https://trivy.dev/latest/docs/supply-chain/sbom/',
      'https://trivy.dev/v0.28.1/docs/sbom/cyclonedx',
    ],
  },
  // grype's SBOM mode: CycloneDX JSON of the image's components, with the vulnerabilities found.
  grype: {
    format: 'cyclonedx-json',
    argv: [
      'grype',
      `registry:${IMAGE_PLACEHOLDER}`,
      '-o',
      'cyclonedx-json',
      '--file',
      OUTPUT_PLACEHOLDER,
    ],
    stdout: false,
    okExitCodes: [0],
    exitCodes: '0 when the report was written; 1 (2 in newer releases) only with --fail-on',
    docs: [
      'https://github.com/anchore/grype/pull/1252',
      'https://github.com/anchore/grype/blob/main/cmd/grype/cli/options/grype.go',
    ],
  },
} as const satisfies Record<'syft' | 'trivy' | 'grype', SbomCommand>;
