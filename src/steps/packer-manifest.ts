/**
 * What a packer build made, for its provenance: the file its template's `manifest`
 * post-processor wrote, found from the template and read (packerArtifactsOf). The local runner
 * reads it after `packer build`; in a build's pod the `packer-manifest` step does, and tells the
 * operator through its termination message (packerMessage, read back by packerFromMessage).
 * Nothing here fails a build: a manifest kiln cannot read costs the provenance its artifacts.
 */
import { readFile, realpath } from 'node:fs/promises';
import { isAbsolute, posix, relative, resolve, sep } from 'node:path';
import {
  type PackerArtifact,
  type PackerArtifacts,
  PackerManifestError,
  packerArtifactsOf,
} from '../manifest/formats.js';

/** Where the manifest post-processor writes when its `output` is not set (packer's default). */
export const PACKER_MANIFEST_DEFAULT_OUTPUT = 'packer-manifest.json';

/** kiln's line when the template has no manifest post-processor, under both runners. */
export const NO_MANIFEST_POST_PROCESSOR =
  'the template has no manifest post-processor; provenance names no artifacts';

/**
 * The kubelet keeps up to 4096 bytes of a container's termination message (12 KiB for the whole
 * pod). The step is the one container of a packer pod that writes one when the build succeeds,
 * so it may use all of them.
 */
export const PACKER_MESSAGE_MAX_BYTES = 4096;

/** What kiln learned of packer's manifest. */
export type PackerReport =
  | { readonly kind: 'artifacts'; readonly artifacts: PackerArtifacts }
  /** The template asks for no manifest: said as a note. */
  | { readonly kind: 'none'; readonly reason: string }
  /** It asks for one that kiln cannot find or read: said as a WARN line. */
  | { readonly kind: 'problem'; readonly problem: string };

/** The manifest a template asks for, or why there is none to read. */
type ManifestOutput =
  | { readonly kind: 'file'; readonly output: string; readonly note?: string }
  | Exclude<PackerReport, { kind: 'artifacts' }>;

/** Where kiln reads the manifest from, besides the template. */
export interface ManifestPlace {
  /** The template's file name: packer reads `*.json` as legacy JSON, anything else as HCL2. */
  readonly templateFile: string;
  /** packer's working directory, against which a relative `output` is resolved. */
  readonly workingDir: string;
  /** A manifest outside this directory (after links) is not read: the local checkout. */
  readonly within?: string;
}

/**
 * A PackerReport, with the manifest's path as the template gives it when one was read, and a
 * line to say when the template writes more than one manifest.
 */
export type PackerManifestRead = (
  | (Extract<PackerReport, { kind: 'artifacts' }> & { readonly file: string })
  | Exclude<PackerReport, { kind: 'artifacts' }>
) & { readonly note?: string };

/**
 * Finds the manifest the template asks for (see manifestOutputOf) and reads it. Never throws for
 * what the build wrote: every way of not finding it is a `problem`.
 */
export async function readPackerManifest(
  template: string,
  place: ManifestPlace,
): Promise<PackerManifestRead> {
  const found = await manifestOutputOf(template, place.templateFile);
  if (found.kind !== 'file') return found;
  const { output, note } = found;
  const problem = (text: string): PackerManifestRead => ({
    kind: 'problem',
    problem: text,
    ...(note === undefined ? {} : { note }),
  });
  const path = resolve(place.workingDir, output);
  let bytes: Buffer;
  try {
    if (place.within !== undefined && !(await isWithin(place.within, path))) {
      return problem(`${output} is outside the checkout, where kiln does not read`);
    }
    bytes = await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return problem(
      code === 'ENOENT'
        ? `packer wrote no ${output}`
        : `${output} cannot be read (${code ?? 'error'})`,
    );
  }
  try {
    return {
      kind: 'artifacts',
      artifacts: packerArtifactsOf(bytes),
      file: output,
      ...(note === undefined ? {} : { note }),
    };
  } catch (error) {
    if (!(error instanceof PackerManifestError)) throw error;
    return problem(`${output} ${error.message}`);
  }
}

/** Whether `path`, its links followed as far as they exist, lies inside `dir`. */
async function isWithin(dir: string, path: string): Promise<boolean> {
  const real = await realpath(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return path;
    throw error;
  });
  const inside = relative(await realpath(dir), real);
  return inside !== '' && inside !== '..' && !inside.startsWith(`..${sep}`) && !isAbsolute(inside);
}

/**
 * The file the template's `manifest` post-processor writes: its `output`, or
 * PACKER_MANIFEST_DEFAULT_OUTPUT, relative to packer's working directory. kiln runs packer in the
 * template's directory, so `${path.root}`, `${path.cwd}`, `{{template_dir}}` and `{{pwd}}` are
 * that directory; any other expression or template function is computed when packer runs, and
 * kiln cannot tell which file it names. Of several manifest post-processors, the first whose file
 * kiln can tell is read, and a note says so when they write different files.
 */
export async function manifestOutputOf(
  template: string,
  templateFile: string,
): Promise<ManifestOutput> {
  let outputs: string[];
  try {
    outputs = templateFile.endsWith('.json')
      ? jsonManifestOutputs(JSON.parse(template))
      : await hclManifestOutputs(template);
  } catch {
    // The template was checked when the build was created and packer just ran it: this is not met.
    return {
      kind: 'problem',
      problem: 'the template cannot be read for its manifest post-processor',
    };
  }
  if (outputs.length === 0) return { kind: 'none', reason: NO_MANIFEST_POST_PROCESSOR };
  const files = [...new Set(outputs.map(fileOf))];
  const output = files.find((file) => file !== undefined);
  if (output === undefined) {
    return {
      kind: 'problem',
      problem: `the manifest post-processor's output ${JSON.stringify(outputs[0])} is computed when packer runs, so kiln cannot tell which file it wrote`,
    };
  }
  if (files.length === 1) return { kind: 'file', output };
  return {
    kind: 'file',
    output,
    note: `the template has ${files.length} manifest post-processors writing different files; kiln reads ${output}`,
  };
}

/** An output with the template's own directory written as `.`; undefined: computed by packer. */
function fileOf(output: string): string | undefined {
  const file = output
    .replace(/\$\{\s*path\.(?:root|cwd)\s*\}/g, '.')
    .replace(/\{\{\s*(?:template_dir|pwd)\s*\}\}/g, '.');
  return /\$\{|%\{|\{\{/.test(file) ? undefined : posix.normalize(file);
}

/** A legacy JSON template's `post-processors`: each a type, an object, or a chain of those. */
function jsonManifestOutputs(template: unknown): string[] {
  const chains = isRecord(template) ? asArray(template['post-processors']) : [];
  return chains
    .flatMap((entry): unknown[] => (Array.isArray(entry) ? asArray(entry) : [entry]))
    .flatMap((entry: unknown) => {
      if (entry === 'manifest') return [PACKER_MANIFEST_DEFAULT_OUTPUT];
      return isRecord(entry) && entry['type'] === 'manifest' ? [outputOf(entry)] : [];
    });
}

/**
 * An HCL2 template's manifest post-processors, as @cdktf/hcl2json renders them: each `build {}`
 * an element of `build`, with `"post-processor": { manifest: [{…}] }` and
 * `"post-processors": [{ "post-processor": { manifest: [{…}] } }]`; an expression as the text
 * `${…}`.
 */
async function hclManifestOutputs(template: string): Promise<string[]> {
  // Loaded on first use: the WebAssembly module is large, and only HCL2 templates need it.
  const { parse } = await import('@cdktf/hcl2json');
  const body: unknown = await parse('template.pkr.hcl', template);
  const blocks = (parent: unknown): unknown[] =>
    isRecord(parent) && isRecord(parent['post-processor'])
      ? asArray(parent['post-processor']['manifest'])
      : [];
  return asArray(isRecord(body) ? body['build'] : undefined)
    .flatMap((build) => [
      ...blocks(build),
      ...asArray(isRecord(build) ? build['post-processors'] : undefined).flatMap(blocks),
    ])
    .map((block) => outputOf(isRecord(block) ? block : {}));
}

function outputOf(config: Record<string, unknown>): string {
  const output = config['output'];
  return typeof output === 'string' && output.trim() !== ''
    ? output.trim()
    : PACKER_MANIFEST_DEFAULT_OUTPUT;
}

/** kiln's line naming the manifest it read: its file, how many artifacts, its digest. */
export function packerArtifactsLine(
  file: string,
  { artifacts, manifestDigest }: PackerArtifacts,
): string {
  const count = `${artifacts.length} artifact${artifacts.length === 1 ? '' : 's'}`;
  return `packer's manifest ${file} names ${count} (${manifestDigest})`;
}

/**
 * What kiln says at the end of a packer build's log when there are no artifacts to name: a note
 * when the template asks for no manifest, a WARN line when kiln cannot read the one it asks for.
 */
export function packerNote(
  report: PackerReport,
): { readonly level: 'INFO' | 'WARN'; readonly text: string } | undefined {
  switch (report.kind) {
    case 'artifacts':
      return undefined;
    case 'none':
      return { level: 'INFO', text: report.reason };
    case 'problem':
      return {
        level: 'WARN',
        text: `could not read packer's manifest: ${report.problem}; provenance names no artifacts`,
      };
  }
}

/**
 * The `packer-manifest` step's termination message: the report as JSON within
 * PACKER_MESSAGE_MAX_BYTES. The manifest's digest always fits; of its artifacts, the first that
 * fit, with `truncated: true` and how many were left out when not all do.
 */
export function packerMessage(report: PackerReport): { message: string; omitted: number } {
  switch (report.kind) {
    case 'none':
      return {
        message: JSON.stringify({ kind: 'none', reason: capped(report.reason) }),
        omitted: 0,
      };
    case 'problem':
      return {
        message: JSON.stringify({ kind: 'problem', problem: capped(report.problem) }),
        omitted: 0,
      };
    case 'artifacts':
      break;
  }
  const { manifestDigest, artifacts: all } = report.artifacts;
  const artifacts: PackerArtifact[] = [];
  const encode = (truncated: boolean): string =>
    JSON.stringify({
      kind: 'artifacts',
      manifestDigest,
      artifacts,
      ...(truncated ? { truncated: true } : {}),
    });
  for (const [index, artifact] of all.entries()) {
    artifacts.push(artifact);
    const last = index === all.length - 1;
    if (Buffer.byteLength(encode(!last)) > PACKER_MESSAGE_MAX_BYTES) {
      artifacts.pop();
      break;
    }
  }
  const omitted = all.length - artifacts.length;
  return { message: encode(omitted > 0), omitted };
}

/**
 * A reason or problem names the template's output, which may be long: at most 512 characters,
 * which JSON writes in at most six bytes each (`\u001f`), so it always fits.
 */
function capped(text: string): string {
  const max = 512;
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;
const STEP = 'the packer-manifest step';

/** Reads a termination message packerMessage wrote; anything else is a problem. */
export function packerFromMessage(text: string): PackerReport {
  const problem = (what: string): PackerReport => ({ kind: 'problem', problem: `${STEP}${what}` });
  if (text.trim() === '') return problem(' left no termination message');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return problem('’s termination message is not JSON');
  }
  if (!isRecord(value)) return problem('’s termination message is not an object');
  switch (value['kind']) {
    case 'none':
      return typeof value['reason'] === 'string'
        ? { kind: 'none', reason: value['reason'] }
        : problem('’s termination message says no manifest, but not why');
    case 'problem':
      return typeof value['problem'] === 'string'
        ? { kind: 'problem', problem: value['problem'] }
        : problem('’s termination message has a problem, but not which');
    case 'artifacts':
      return (
        artifactsOf(value) ?? problem('’s termination message lists no artifacts kiln can read')
      );
    default:
      return problem('’s termination message is of no kind kiln knows');
  }
}

function artifactsOf(value: Record<string, unknown>): PackerReport | undefined {
  const { manifestDigest, artifacts, truncated } = value;
  if (typeof manifestDigest !== 'string' || !DIGEST.test(manifestDigest)) return undefined;
  if (!Array.isArray(artifacts)) return undefined;
  const read = artifacts.map((artifact: unknown): PackerArtifact | undefined => {
    if (!isRecord(artifact)) return undefined;
    const { name, builderType, artifactId } = artifact;
    return typeof name === 'string' &&
      typeof builderType === 'string' &&
      typeof artifactId === 'string'
      ? { name, builderType, artifactId }
      : undefined;
  });
  if (read.some((artifact) => artifact === undefined)) return undefined;
  return {
    kind: 'artifacts',
    artifacts: {
      manifestDigest,
      artifacts: read as PackerArtifact[],
      ...(truncated === true ? { truncated: true } : {}),
    },
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}
