/*
 * What kiln accepts as a build's SBOM, and how each SBOM tool is told to write one.
 *
 * kiln stores SPDX 2.x JSON and CycloneDX JSON and refuses anything else, with a problem that
 * names what the upload looks like instead (XML, tag-value, SPDX 3, syft's own JSON), so a
 * misconfigured step is fixed from the build log rather than discovered when someone reads the
 * SBOM.
 */
import { isPlainObject, type Json } from '../manifest/fields.js';
import type { SbomFormat } from '../manifest/tool-commands.js';

/** A readable SBOM: its format, the spec version it declares, how many packages it lists. */
export interface SbomSummary {
  readonly format: SbomFormat;
  /** SPDX: the version after "SPDX-" ("2.3"); CycloneDX: specVersion ("1.6"). */
  readonly specVersion: string;
  /** SPDX: packages[]; CycloneDX: the top-level components[]. Absent lists count 0. */
  readonly packages: number;
}

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
