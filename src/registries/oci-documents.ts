import { createHash } from 'node:crypto';
import type { OciAnswer, OciSession } from './oci-session.js';
import { isRecord } from './registry-answers.js';

/**
 * The documents of the OCI distribution client (oci-referrers.ts): media types, descriptors,
 * manifests and digests, each read from a registry's answer and checked before it is trusted.
 */

export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
export const OCI_EMPTY = 'application/vnd.oci.empty.v1+json';
export const DOCKER_MANIFEST = 'application/vnd.docker.distribution.manifest.v2+json';
export const DOCKER_MANIFEST_LIST = 'application/vnd.docker.distribution.manifest.list.v2+json';
export const SIGSTORE_BUNDLE_V03 = 'application/vnd.dev.sigstore.bundle.v0.3+json';

export const MANIFEST_TYPES = [OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST];
const SHA256 = /^sha256:[a-f0-9]{64}$/;
const ANY_DIGEST = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

/** An OCI content descriptor (image-spec descriptor.md), as far as kiln reads one. */
export interface OciDescriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly artifactType?: string;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** A manifest or an index, its descriptor-valued fields checked; other fields as sent. */
export interface OciManifestContent {
  readonly schemaVersion?: unknown;
  readonly mediaType?: string;
  readonly artifactType?: string;
  readonly config?: OciDescriptor;
  readonly layers?: readonly OciDescriptor[];
  readonly manifests?: readonly OciDescriptor[];
  readonly subject?: OciDescriptor;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly [field: string]: unknown;
}

/**
 * The annotations cosign puts on a bundle referrer (see oci-referrers.ts). `created` should
 * come from the attestation, not the clock, so that attaching it again is the same manifest.
 */
export function sigstoreBundleAnnotations(
  predicateType: string,
  created: Date,
): Record<string, string> {
  return {
    'dev.sigstore.bundle.content': 'dsse-envelope',
    'dev.sigstore.bundle.predicateType': predicateType,
    'org.opencontainers.image.created': created.toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}

/** `sha256:<hex>` of `bytes`. */
export function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The referrers tag schema's tag for `digest`: `<algorithm>-<encoded>`, truncated as the spec says. */
export function referrersTag(digest: string): string {
  const [algorithm = '', encoded = ''] = digest.split(':', 2);
  return `${algorithm.slice(0, 32)}-${encoded.slice(0, 64)}`.replace(/[^a-zA-Z0-9_.-]/g, '-');
}

export function checkDigest(session: OciSession, operation: string, digest: string): void {
  if (!SHA256.test(digest)) {
    throw session.error(
      operation,
      undefined,
      `"${digest.slice(0, 80)}" is not a sha256 digest; kiln checks sha256 digests only`,
    );
  }
}

/**
 * The sha256 of the answer's bytes, which must equal `expected` when given and the registry's
 * Docker-Content-Digest when it sent one: kiln never takes a registry's word for a digest.
 */
export function verifiedDigest(
  session: OciSession,
  operation: string,
  answer: OciAnswer,
  expected: string | undefined,
): string {
  const actual = sha256Digest(answer.body);
  if (expected !== undefined && actual !== expected) {
    throw session.error(
      operation,
      answer.status,
      `the registry sent content whose digest is ${actual}, not ${expected}`,
    );
  }
  checkDigestHeader(session, operation, answer, actual);
  return actual;
}

export function checkDigestHeader(
  session: OciSession,
  operation: string,
  answer: OciAnswer,
  digest: string,
): void {
  const header = answer.headers.get('docker-content-digest');
  if (header !== null && header !== digest) {
    throw session.error(
      operation,
      answer.status,
      `the registry says the digest is ${header}, but it is ${digest}`,
    );
  }
}

/** The Content-Type without parameters, or undefined. */
export function contentType(answer: OciAnswer): string | undefined {
  const value = answer.headers.get('content-type')?.split(';')[0]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** The served media type when it is a manifest type, else the document's own `mediaType`. */
export function manifestMediaType(
  session: OciSession,
  operation: string,
  answer: OciAnswer,
): string {
  const served = contentType(answer);
  if (served !== undefined && MANIFEST_TYPES.includes(served)) return served;
  const content = parseManifest(session, operation, answer.body);
  if (content.mediaType !== undefined && MANIFEST_TYPES.includes(content.mediaType)) {
    return content.mediaType;
  }
  throw session.error(
    operation,
    answer.status,
    `the registry sent ${served ?? 'a document without a type'}, not an image manifest or index`,
  );
}

/** The document as a manifest or index, each descriptor-valued field checked. */
export function parseManifest(
  session: OciSession,
  operation: string,
  raw: Buffer,
): OciManifestContent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw session.error(operation, 200, 'the registry sent a manifest that is not JSON');
  }
  const problem = (field: string) =>
    session.error(operation, 200, `the manifest's ${field} is not valid`);
  if (!isRecord(parsed)) throw problem('top level');
  for (const field of ['config', 'subject'] as const) {
    if (parsed[field] !== undefined && descriptorOf(parsed[field]) === undefined) {
      throw problem(field);
    }
  }
  for (const field of ['layers', 'manifests'] as const) {
    const list = parsed[field];
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.some((entry) => descriptorOf(entry) === undefined)) {
      throw problem(field);
    }
  }
  for (const field of ['mediaType', 'artifactType'] as const) {
    if (parsed[field] !== undefined && typeof parsed[field] !== 'string') throw problem(field);
  }
  if (parsed.annotations !== undefined && annotationsOf(parsed.annotations) === undefined) {
    throw problem('annotations');
  }
  return parsed;
}

/** The entries of an index that are valid descriptors; others are skipped, not trusted. */
export function descriptorsIn(entries: unknown[]): OciDescriptor[] {
  return entries.flatMap((entry) => {
    const descriptor = descriptorOf(entry);
    return descriptor === undefined ? [] : [descriptor];
  });
}

export function descriptorOf(value: unknown): OciDescriptor | undefined {
  if (!isRecord(value)) return undefined;
  const { mediaType, digest, size, artifactType, annotations } = value;
  if (typeof mediaType !== 'string' || typeof digest !== 'string' || !ANY_DIGEST.test(digest)) {
    return undefined;
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) return undefined;
  if (artifactType !== undefined && typeof artifactType !== 'string') return undefined;
  const checked = annotations === undefined ? undefined : annotationsOf(annotations);
  if (annotations !== undefined && checked === undefined) return undefined;
  return {
    mediaType,
    digest,
    size,
    ...(artifactType === undefined ? {} : { artifactType }),
    ...(checked === undefined ? {} : { annotations: checked }),
  };
}

export function annotationsOf(value: unknown): Record<string, string> | undefined {
  if (!isRecord(value)) return undefined;
  const entries = Object.entries(value);
  return entries.every(([, v]) => typeof v === 'string')
    ? (value as Record<string, string>)
    : undefined;
}

export function listed(entries: unknown[], digest: string): boolean {
  return entries.some((entry) => isRecord(entry) && entry.digest === digest);
}

/** Keys sorted, as cosign's Go map is written, so equal annotations give equal bytes; none: undefined. */
export function sortedAnnotations(
  annotations: Readonly<Record<string, string>>,
): Record<string, string> | undefined {
  const keys = Object.keys(annotations).sort();
  if (keys.length === 0) return undefined;
  return Object.fromEntries(keys.map((key) => [key, annotations[key]!]));
}

/** The `rel="next"` target of a Link header (RFC 8288), or undefined. */
export function nextLink(header: string | null): string | undefined {
  if (header === null) return undefined;
  for (const part of header.split(',')) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (match !== null && /;\s*rel="?next"?/i.test(match[2]!)) return match[1];
  }
  return undefined;
}
