import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { type Bundle, bundleFromJSON, isBundleWithDsseEnvelope } from '@sigstore/bundle';
import { toSignedEntity, toTrustMaterial, VerificationError, Verifier } from '@sigstore/verify';
import { fieldOf } from './registry.js';

/*
 * Verifying the attestations kiln attaches to images (docs/provenance.md, "Signatures"), as its
 * server does in src/provenance/signing.ts, which the CLI may not import: a Sigstore bundle v0.3
 * whose DSSE envelope holds an in-toto statement, signed with one of the tenant's ECDSA P-256
 * keys and named by the bundle's `publicKey.hint` (the key id). kiln has no transparency log or
 * timestamp authority, so the tenant's keys alone are the trust and every threshold is 0.
 */

/** The media type prefix of a Sigstore bundle, as cosign recognises a bundle layer. */
export const SIGSTORE_BUNDLE = 'application/vnd.dev.sigstore.bundle';
export const SLSA_PROVENANCE_V1 = 'https://slsa.dev/provenance/v1';
/** The predicate types cosign gives SBOM attestations, as kiln attaches them. */
export const SBOM_PREDICATE_TYPES = ['https://spdx.dev/Document', 'https://cyclonedx.org/bom'];

const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';
const IN_TOTO_STATEMENT_V1 = 'https://in-toto.io/Statement/v1';
const TRUSTED_ROOT = 'application/vnd.dev.sigstore.trustedroot.v0.2+json';

/** An in-toto statement, as far as `kiln verify` reads one. */
export interface Statement {
  readonly predicateType: string;
  readonly subject: ReadonlyArray<{ readonly name: string | null; readonly sha256: string | null }>;
  readonly predicate: unknown;
}

/** The bundle does not verify against the tenant's keys, or signs no statement. */
export class BundleRejected extends Error {
  override readonly name = 'BundleRejected';
  constructor(
    message: string,
    /** The key the bundle names, when it names one. */
    readonly keyId: string | null,
  ) {
    super(message);
  }
}

/** The key id kiln gives a public key: hex SHA-256 of its SPKI DER. */
export function keyIdOf(publicKeyPem: string): string {
  const der = createPublicKey(publicKeyPem).export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex');
}

/**
 * Verifies `json` (a bundle as read from the registry) against `keys` (by key id) with
 * @sigstore/verify, and returns the key id and the statement read from the verified bytes.
 * Throws BundleRejected saying why not.
 */
export function verifyBundle(
  json: unknown,
  keys: ReadonlyMap<string, KeyObject>,
): { keyId: string; statement: Statement } {
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON(json);
  } catch (error) {
    throw new BundleRejected(`it is not a Sigstore bundle (${messageOf(error)})`, null);
  }
  const material = bundle.verificationMaterial.content;
  if (material.$case !== 'publicKey') {
    throw new BundleRejected(`it is signed with a certificate, not one of the tenant's keys`, null);
  }
  const keyId = material.publicKey.hint;
  if (!keys.has(keyId)) {
    throw new BundleRejected(
      `it is signed by key ${keyId}, which is not one of the tenant's`,
      keyId,
    );
  }
  const trust = toTrustMaterial(
    {
      mediaType: TRUSTED_ROOT,
      tlogs: [],
      certificateAuthorities: [],
      ctlogs: [],
      timestampAuthorities: [],
    },
    // A retired key still verifies what it signed: kiln keys carry no validity window.
    (hint) => ({ publicKey: keys.get(hint)!, validFor: () => true }),
  );
  try {
    new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(
      toSignedEntity(bundle),
    );
  } catch (error) {
    const signature = error instanceof VerificationError && error.code === 'SIGNATURE_ERROR';
    throw new BundleRejected(
      signature
        ? `its signature does not hold for key ${keyId}: the statement is not the one that was signed`
        : `it does not verify with key ${keyId} (${messageOf(error)})`,
      keyId,
    );
  }
  if (!isBundleWithDsseEnvelope(bundle)) {
    throw new BundleRejected('it signs no DSSE envelope, so no statement', keyId);
  }
  // The statement is read from the very bytes that were verified, never from the JSON again.
  const { payloadType, payload } = bundle.content.dsseEnvelope;
  return { keyId, statement: statementOf(payloadType, payload, keyId) };
}

function statementOf(payloadType: string, payload: Buffer, keyId: string): Statement {
  const reject = (why: string) => new BundleRejected(`its signed payload ${why}`, keyId);
  if (payloadType !== IN_TOTO_PAYLOAD_TYPE) throw reject(`is of type ${payloadType}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload.toString('utf8'));
  } catch {
    throw reject('is not JSON');
  }
  const predicateType = fieldOf(parsed, 'predicateType');
  const subject = fieldOf(parsed, 'subject');
  if (fieldOf(parsed, '_type') !== IN_TOTO_STATEMENT_V1 || typeof predicateType !== 'string') {
    throw reject('is not an in-toto statement v1');
  }
  if (!Array.isArray(subject)) throw reject('has no subject');
  return {
    predicateType,
    subject: subject.map((entry) => ({
      name: text(fieldOf(entry, 'name')),
      sha256: text(fieldOf(fieldOf(entry, 'digest'), 'sha256')),
    })),
    predicate: fieldOf(parsed, 'predicate'),
  };
}

/** Who built what from which commit: an SLSA v1 provenance as kiln writes it. */
export interface ProvenanceSummary {
  readonly build_id: string | null;
  readonly builder_id: string | null;
  readonly build_type: string | null;
  /** The source dependency's URI without its `@ref`, and the ref (kiln writes `<url>@<ref>`). */
  readonly repository: string | null;
  readonly ref: string | null;
  readonly commit: string | null;
  readonly created_by: string | null;
  readonly trigger: { id: string | null; event: string | null; pusher: string | null } | null;
  readonly started_on: string | null;
  readonly finished_on: string | null;
  readonly build_log: { digest: string | null; lines: number | null; uri: string | null } | null;
}

/** What an SLSA provenance predicate says, each field null when it is missing. */
export function provenanceSummary(predicate: unknown): ProvenanceSummary {
  const definition = fieldOf(predicate, 'buildDefinition');
  const run = fieldOf(predicate, 'runDetails');
  const metadata = fieldOf(run, 'metadata');
  const internal = fieldOf(definition, 'internalParameters');
  const dependencies = fieldOf(definition, 'resolvedDependencies');
  const source = Array.isArray(dependencies)
    ? (dependencies as unknown[]).find(
        (d) => text(fieldOf(fieldOf(d, 'digest'), 'gitCommit')) !== null,
      )
    : undefined;
  const byproducts = fieldOf(run, 'byproducts');
  const log = Array.isArray(byproducts)
    ? (byproducts as unknown[]).find((b) => fieldOf(b, 'name') === 'build-log')
    : undefined;
  const trigger = fieldOf(internal, 'trigger');
  const lines = fieldOf(fieldOf(log, 'annotations'), 'lines');
  const logDigest = text(fieldOf(fieldOf(log, 'digest'), 'sha256'));
  return {
    build_id: text(fieldOf(metadata, 'invocationId')),
    builder_id: text(fieldOf(fieldOf(run, 'builder'), 'id')),
    build_type: text(fieldOf(definition, 'buildType')),
    ...splitSource(text(fieldOf(source, 'uri'))),
    commit: text(fieldOf(fieldOf(source, 'digest'), 'gitCommit')),
    created_by: text(fieldOf(internal, 'createdBy')),
    trigger:
      typeof trigger === 'object' && trigger !== null
        ? {
            id: text(fieldOf(trigger, 'id')),
            event: text(fieldOf(trigger, 'event')),
            pusher: text(fieldOf(trigger, 'pusher')),
          }
        : null,
    started_on: text(fieldOf(metadata, 'startedOn')),
    finished_on: text(fieldOf(metadata, 'finishedOn')),
    build_log:
      log === undefined
        ? null
        : {
            digest: logDigest === null ? null : `sha256:${logDigest}`,
            lines: typeof lines === 'number' ? lines : null,
            uri: text(fieldOf(log, 'uri')),
          },
  };
}

/**
 * `git+https://host/repo.git@main` → the repository and `main`. The ref follows the last '@'
 * after the host (an '@' before it is a user name, as in `git+ssh://git@host/repo`).
 */
function splitSource(uri: string | null): { repository: string | null; ref: string | null } {
  if (uri === null) return { repository: null, ref: null };
  const scheme = uri.indexOf('://');
  const pathStart = uri.indexOf('/', scheme < 0 ? 0 : scheme + 3);
  const at = uri.lastIndexOf('@');
  return pathStart >= 0 && at > pathStart
    ? { repository: uri.slice(0, at), ref: uri.slice(at + 1) }
    : { repository: uri, ref: null };
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
