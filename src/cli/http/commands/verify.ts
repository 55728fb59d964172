import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Command } from 'commander';
import { unwrap } from '../api/client.js';
import type { Schemas } from '../api/paths.js';
import {
  BundleRejected,
  keyIdOf,
  type ProvenanceSummary,
  provenanceSummary,
  SBOM_PREDICATE_TYPES,
  SIGSTORE_BUNDLE,
  SLSA_PROVENANCE_V1,
  verifyBundle,
} from '../attestations.js';
import { dockerConfigPath, dockerCredentials, type DockerEnvironment } from '../docker-config.js';
import { EXIT, ExitWith } from '../exit-codes.js';
import { fields, type Format, note, outputOption, printRecords, when } from '../output.js';
import {
  type ImageReference,
  OCI_MANIFEST,
  parseImageReference,
  RegistryError,
  RegistryReader,
} from '../registry.js';
import type { Session } from '../session.js';

type SigningKey = Schemas['SigningKeyDto'];

/** The most a bundle layer may weigh: an SBOM statement can be large, a provenance is small. */
const MAX_BUNDLE_BYTES = 64 * 1024 * 1024;

/** Each outcome of `kiln verify` and its exit code (docs/cli.md). */
const OUTCOMES = {
  verified: EXIT.ok,
  'no-attestation': EXIT.noAttestation,
  'signature-invalid': EXIT.signatureInvalid,
  'subject-mismatch': EXIT.subjectMismatch,
} as const;
type Outcome = keyof typeof OUTCOMES;

/** One attestation found on the image, and what came of verifying it. */
interface Attestation {
  /** The referrer manifest's digest. */
  readonly referrer: string;
  readonly verified: boolean;
  /** Why it did not verify. */
  readonly error: string | null;
  readonly key_id: string | null;
  readonly key_state: 'active' | 'retired' | null;
  readonly key_retired_at: string | null;
  /** Read from the verified statement only: an unverified one says nothing. */
  readonly predicate_type: string | null;
  readonly subjects: ReadonlyArray<{ name: string | null; digest: string | null }>;
  readonly subject_matches: boolean | null;
  readonly provenance: ProvenanceSummary | null;
}

/** What `kiln verify -o json` prints. */
interface VerifyResult {
  /** `host/repository@sha256:…`: the image verified, by the digest its reference resolved to. */
  readonly image: string;
  readonly reference: string;
  readonly digest: string;
  readonly result: Outcome;
  readonly message: string;
  readonly referrers_from: 'referrers-api' | 'fallback-tag';
  readonly attestations: readonly Attestation[];
}

const EXIT_HELP = `
Exit codes:
  0  a provenance attestation verifies against the tenant's keys, about this image
  4  the image has no provenance attestation
  5  no provenance signature holds: changed after signing, or not the tenant's key
  6  a provenance verifies, but it is about another image
  7  the registry could not be reached, refused, or has no such image
  3, 64, 69: as for every command (kiln refused, bad usage, kiln unreachable)

Registry credentials come from docker's config file ($DOCKER_CONFIG/config.json, else
~/.docker/config.json, "auths" only); without any, kiln asks as an anonymous client.`;

/** `kiln verify <image>`: the signed provenance kiln attached to an image (docs/provenance.md). */
export function registerVerify(program: Command, session: Session, env: DockerEnvironment) {
  program
    .command('verify <image>')
    .description(
      "Verify the provenance kiln attached to an image: fetched from its registry, checked against the tenant's signing keys and the image's digest; prints who built it from which commit (build:read)",
    )
    .option(
      '--insecure',
      'reach the registry over plain HTTP, for a registry without TLS (never assumed, not even for localhost)',
    )
    .addOption(outputOption())
    .addHelpText('after', EXIT_HELP)
    .action(async (given: string, options: { insecure?: boolean; output: Format }) => {
      const reference = parseImageReference(given);
      const keys = await tenantKeys(session);
      const configPath = dockerConfigPath(env);
      const reader = new RegistryReader(reference, {
        insecure: options.insecure === true,
        credentials: await dockerCredentials(configPath, reference.host),
        credentialsFrom: configPath,
      });
      let found: Awaited<ReturnType<typeof fromRegistry>>;
      try {
        found = await fromRegistry(reader, reference);
      } catch (error) {
        if (error instanceof RegistryError) fail(EXIT.registry, error.message);
        throw error;
      }
      const attestations = found.bundles.map((bundle) =>
        checked(bundle.referrer, bundle.json, keys, found.digest),
      );
      const named = `${reference.host}/${reference.repository}`;
      const image = `${named}@${found.digest}`;
      const { result, message } = judged(image, found.via, attestations);
      const answer: VerifyResult = {
        image,
        reference:
          reference.digest === undefined
            ? `${named}:${reference.tag}`
            : `${named}@${reference.digest}`,
        digest: found.digest,
        result,
        message,
        referrers_from: found.via,
        attestations,
      };
      printRecords(options.output, answer, () => (result === 'verified' ? forPeople(answer) : ''));
      if (result !== 'verified') fail(OUTCOMES[result], message);
    });
}

interface TenantKeys {
  /** Public keys by the id kiln gives them, computed here from the PEM. */
  readonly byId: ReadonlyMap<string, KeyObject>;
  readonly records: ReadonlyMap<string, SigningKey>;
}

/** Every key the tenant ever signed with, active and retired: GET /signing-keys. */
async function tenantKeys(session: Session): Promise<TenantKeys> {
  const { keys } = await unwrap(
    session.client().GET('/api/v1/signing-keys', {
      params: { header: await session.tenantHeader() },
    }),
  );
  const byId = new Map<string, KeyObject>();
  const records = new Map<string, SigningKey>();
  for (const key of keys) {
    // The id is computed rather than taken from the answer: it is what the bundle's hint names.
    const id = keyIdOf(key.public_key);
    byId.set(id, createPublicKey(key.public_key));
    records.set(id, key);
  }
  return { byId, records };
}

/** The image's digest and its Sigstore bundle referrers, each read and checked. */
async function fromRegistry(reader: RegistryReader, reference: ImageReference) {
  const digest = await reader.resolve(reference.digest ?? reference.tag ?? 'latest');
  const { via, descriptors } = await reader.referrers(digest);
  const bundles: Array<{ referrer: string; json: unknown }> = [];
  for (const descriptor of descriptors) {
    // Other artifacts (signatures, notation, SBOM documents) are not kiln's attestations.
    if (descriptor.mediaType !== OCI_MANIFEST) continue;
    if (descriptor.artifactType?.startsWith(SIGSTORE_BUNDLE) === false) continue;
    const { layers } = await reader.manifest(descriptor.digest);
    // As cosign reads one: a bundle referrer has exactly one layer, the bundle.
    const [layer] = layers;
    if (layers.length !== 1 || !layer!.mediaType.startsWith(SIGSTORE_BUNDLE)) continue;
    const bytes = await reader.blob(layer!.digest, MAX_BUNDLE_BYTES);
    let json: unknown;
    try {
      json = JSON.parse(bytes.toString('utf8'));
    } catch {
      json = undefined;
    }
    bundles.push({ referrer: descriptor.digest, json });
  }
  return { digest, via, bundles };
}

/** One bundle verified against the tenant's keys, its subject against the image's digest. */
function checked(referrer: string, json: unknown, keys: TenantKeys, digest: string): Attestation {
  const hex = digest.slice('sha256:'.length);
  const keyOf = (keyId: string | null) => {
    const record = keyId === null ? undefined : keys.records.get(keyId);
    return {
      key_id: keyId,
      key_state: record === undefined ? null : record.active ? 'active' : 'retired',
      key_retired_at: record?.retired_at ?? null,
    } as const;
  };
  try {
    const { keyId, statement } = verifyBundle(json, keys.byId);
    const provenance = statement.predicateType === SLSA_PROVENANCE_V1;
    return {
      referrer,
      verified: true,
      error: null,
      ...keyOf(keyId),
      predicate_type: statement.predicateType,
      subjects: statement.subject.map((subject) => ({
        name: subject.name,
        digest: subject.sha256 === null ? null : `sha256:${subject.sha256}`,
      })),
      subject_matches: statement.subject.some((subject) => subject.sha256 === hex),
      provenance: provenance ? provenanceSummary(statement.predicate) : null,
    };
  } catch (error) {
    if (!(error instanceof BundleRejected)) throw error;
    return {
      referrer,
      verified: false,
      error: error.message,
      ...keyOf(error.keyId),
      predicate_type: null,
      subjects: [],
      subject_matches: null,
      provenance: null,
    };
  }
}

/**
 * The outcome: verified when a provenance verifies and is about this image. Otherwise the
 * nearest miss: a verified provenance about another image, then a bundle that did not verify (it
 * may have been a provenance), then none at all.
 */
function judged(
  image: string,
  via: VerifyResult['referrers_from'],
  attestations: readonly Attestation[],
): { result: Outcome; message: string } {
  const provenances = attestations.filter((a) => a.provenance !== null);
  const good = provenances.filter((a) => a.subject_matches === true);
  if (good.length > 0) {
    const builds = good.map((a) => a.provenance?.build_id ?? a.referrer).join(', ');
    return { result: 'verified', message: `${image}: verified the provenance of build ${builds}` };
  }
  const [other] = provenances;
  if (other !== undefined) {
    const names = other.subjects.map((s) => `${s.name ?? '-'}@${s.digest ?? '-'}`).join(', ');
    return {
      result: 'subject-mismatch',
      message: `${image}: the provenance of build ${other.provenance?.build_id ?? '-'} verifies, but it is about ${names}, not this image`,
    };
  }
  const rejected = attestations.filter((a) => !a.verified);
  if (rejected.length > 0) {
    const more = rejected.length > 1 ? ` (and ${rejected.length - 1} more)` : '';
    return {
      result: 'signature-invalid',
      message: `${image}: no attestation verifies against the tenant's keys: ${rejected[0]!.referrer}: ${rejected[0]!.error}${more}`,
    };
  }
  const where =
    via === 'fallback-tag'
      ? `the registry has no referrers API, and its tag sha256-${image.split('@sha256:')[1]} lists none`
      : "the registry's referrers API lists none";
  const others = attestations.map((a) => a.predicate_type).join(', ');
  return {
    result: 'no-attestation',
    message: `${image}: no provenance attestation is attached (${others === '' ? where : `only ${others}`})`,
  };
}

function forPeople(result: VerifyResult): string {
  const blocks = result.attestations
    .filter((a) => a.provenance !== null && a.subject_matches === true)
    .map((a) => {
      const p = a.provenance!;
      const trigger = p.trigger;
      return fields([
        ['Image', result.image],
        ['Provenance', `verified: signed with the tenant's key, about this image`],
        ['Build', p.build_id ?? '-'],
        ['Builder', p.builder_id ?? '-'],
        ['Method', p.build_type ?? '-'],
        ['Repository', p.repository ?? '-'],
        ['Ref', p.ref ?? '-'],
        ['Commit', p.commit ?? '-'],
        ['Created by', p.created_by ?? '-'],
        [
          'Triggered by',
          trigger === null
            ? '-'
            : `trigger ${trigger.id ?? '-'} (${trigger.event ?? '-'} by ${trigger.pusher ?? '-'})`,
        ],
        ['Started', when(p.started_on)],
        ['Finished', when(p.finished_on)],
        ['Key', keyText(a)],
        [
          'Build log',
          p.build_log === null
            ? '-'
            : `${p.build_log.digest ?? '-'} (${p.build_log.lines ?? '?'} lines)`,
        ],
      ]);
    });
  const others: Array<[string, string]> = result.attestations
    .filter((a) => a.provenance === null || a.subject_matches !== true)
    .map((a) => {
      if (!a.verified) return ['Not verified', `${a.referrer}: ${a.error ?? ''}`];
      const kind = SBOM_PREDICATE_TYPES.includes(a.predicate_type ?? '') ? 'SBOM' : 'Attestation';
      const about = a.subject_matches === true ? '' : ', about another image';
      return [kind, `${a.predicate_type ?? '-'} (verified, key ${keyText(a)}${about})`];
    });
  if (others.length > 0) blocks.push(fields(others));
  return blocks.join('\n\n');
}

function keyText(attestation: Attestation): string {
  const state =
    attestation.key_state === 'retired'
      ? `retired ${when(attestation.key_retired_at)}`
      : (attestation.key_state ?? 'unknown');
  return `${attestation.key_id ?? '-'} (${state})`;
}

/** Says why on standard error, one line, and ends with `code`. */
function fail(code: number, message: string): never {
  note(`kiln: ${message}`);
  throw new ExitWith(code);
}
