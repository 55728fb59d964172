/*
 * What kiln accepts as a build's SBOM, and how each SBOM tool is told to write one.
 *
 * kiln stores SPDX 2.x JSON and CycloneDX JSON and refuses anything else, with a problem that
 * names what the upload looks like instead (XML, tag-value, SPDX 3, syft's own JSON), so a
 * misconfigured step is fixed from the build log rather than discovered when someone reads the
 * SBOM.
 */
import { isPlainObject, type Json } from '../build-methods/fields.js';
import { IMAGE_PLACEHOLDER, OUTPUT_PLACEHOLDER, type ToolCommand } from './tool-command.js';

export const SBOM_FORMATS = ['spdx-json', 'cyclonedx-json'] as const;
export type SbomFormat = (typeof SBOM_FORMATS)[number];

/** A readable SBOM: its format, the spec version it declares, how many packages it lists. */
export interface SbomSummary {
  readonly format: SbomFormat;
  /** SPDX: the version after "SPDX-" ("2.3"); CycloneDX: specVersion ("1.6"). */
  readonly specVersion: string;
  /** SPDX: packages[]; CycloneDX: the top-level components[]. Absent lists count 0. */
  readonly packages: number;
}

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

/** Reads an uploaded SBOM: its summary, or why kiln does not accept it. */
export function readSbom(text: string): SbomSummary | { problem: string } {
  const start = text.trimStart();
  if (start === '') return { problem: 'the SBOM is empty' };
  if (start.startsWith('<')) {
    return { problem: 'this is XML; kiln accepts SPDX or CycloneDX JSON (e.g. cyclonedx-json)' };
  }
  if (/^SPDXVersion:/m.test(start)) {
    return { problem: 'this is SPDX tag-value; kiln accepts SPDX JSON (spdx-json)' };
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    return { problem: `not JSON: ${clip((error as Error).message)}` };
  }
  if (!isPlainObject(document)) {
    return { problem: 'must be a JSON object (an SPDX or CycloneDX document)' };
  }
  if ('spdxVersion' in document) return readSpdx(document);
  if ('bomFormat' in document) return readCycloneDx(document);
  return { problem: unrecognised(document) };
}

function readSpdx(document: Json): SbomSummary | { problem: string } {
  const version = document.spdxVersion;
  const match = typeof version === 'string' ? /^SPDX-(2\.\d+)$/.exec(version) : null;
  if (match?.[1] === undefined) {
    return { problem: `spdxVersion ${quote(version)} is not SPDX 2.x ("SPDX-2.3")` };
  }
  const packages = countList(document.packages, 'packages');
  if (typeof packages === 'string') return { problem: packages };
  return { format: 'spdx-json', specVersion: match[1], packages };
}

function readCycloneDx(document: Json): SbomSummary | { problem: string } {
  if (document.bomFormat !== 'CycloneDX') {
    return { problem: `bomFormat ${quote(document.bomFormat)} is not "CycloneDX"` };
  }
  const version = document.specVersion;
  if (typeof version !== 'string' || !/^1\.\d+$/.test(version)) {
    return { problem: `specVersion ${quote(version)} is not a CycloneDX 1.x version` };
  }
  const components = countList(document.components, 'components');
  if (typeof components === 'string') return { problem: components };
  return { format: 'cyclonedx-json', specVersion: version, packages: components };
}

/** The length of an optional list, or the problem when it is not a list. */
function countList(value: unknown, name: string): number | string {
  if (value === undefined || value === null) return 0;
  return Array.isArray(value) ? value.length : `${name} must be an array`;
}

/** Names the JSON SBOM formats kiln is most likely to be sent by mistake. */
function unrecognised(document: Json): string {
  const context = document['@context'];
  if (typeof context === 'string' && context.includes('spdx.org')) {
    return 'this is SPDX 3 (JSON-LD); kiln accepts SPDX 2.x JSON (spdxVersion "SPDX-2.3")';
  }
  if (Array.isArray(document.artifacts) && isPlainObject(document.schema)) {
    return "this is syft's own JSON (syft-json); kiln accepts spdx-json or cyclonedx-json";
  }
  return 'neither SPDX JSON (spdxVersion) nor CycloneDX JSON (bomFormat "CycloneDX")';
}

/** A value from the upload, short enough to put in a problem. */
function quote(value: unknown): string {
  // JSON.stringify gives undefined only for a missing field: parsed JSON holds no functions.
  return clip(JSON.stringify(value) ?? '(missing)', 40);
}

function clip(text: string, max = 200): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
