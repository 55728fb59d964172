import { Inject, Injectable, Optional } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { BuildArtifacts } from '../artifacts/build-artifacts.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { BuildAccess } from '../integrations/build-access.js';
import type { BuildConfigSnapshot, BuildEntity } from '../lifecycle/build.entity.js';
import { BuildLogsRepository } from '../logs/build-logs.repository.js';
import { digestOfLog } from '../logs/log-digest.js';
import { LogSink } from '../logs/log-sink.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { PushedImages } from '../manifest/formats.js';
import { Metrics } from '../metrics/metrics.js';
import { splitImageReference } from '../registries/naming.js';
import {
  OciReferrers,
  sha256Digest,
  sigstoreBundleAnnotations,
} from '../registries/oci-referrers.js';
import {
  type Attachment,
  ProvenanceRepository,
  type StoredProvenance,
} from './provenance.repository.js';
import {
  envelopeStatement,
  type SignedBundle,
  SIGSTORE_BUNDLE_V03,
  signStatement,
} from './signing.js';
import { SigningKeys } from './signing-keys.js';
import {
  type ImageDependency,
  hasSubject,
  NoSubjectError,
  type PackerOutput,
  provenanceStatement,
  type ProvenanceInput,
  sbomStatement,
} from './statement.js';
import { SecretSealer } from '../secrets/secret-sealer.js';

/** What a runner knows of a build that succeeded, beyond its record. */
export interface ProvenanceFacts {
  readonly build: BuildEntity;
  /** When the build ended: the statement's finishedOn and the record's completed_at. */
  readonly finishedAt: Date;
  readonly pushed?: PushedImages;
  readonly packer?: PackerOutput;
  readonly runner: 'kubernetes' | 'local';
  /** The namespace its Job ran in (kubernetes). */
  readonly namespace: string | null;
  /** The builder and step images it ran, pinned by digest where known (imageDependency). */
  readonly images: readonly ImageDependency[];
  /** Registries (`host[:port]`) reached over plain HTTP. */
  readonly insecureRegistries: readonly string[];
}

/** `attached`, `stored-only` or `failed: …`; `fails` when the tenant's policy fails the build. */
export interface ProvenanceOutcome {
  readonly state: string;
  /** Set when the tenant requires provenance and it failed: the build fails with this message. */
  readonly fails?: string;
}

const STATE_LIMIT = 1_000;
const KILN_VERSION = readVersion();

/**
 * Signed provenance for every successful build (docs/provenance.md, docs/adr/0054-provenance.md),
 * asked by both runners after the image was built, pushed and gated and before the success is
 * written: built from kiln's own records (the spec as submitted, the resolved commit, the images
 * that ran, the SBOM and scan, the digest of the stored log), signed with the tenant's key as a
 * Sigstore bundle, stored, then attached to each pushed image as an OCI referrer. Each step's
 * failure is a `[kiln]` line and the build's `provenance` state; with the tenant's policy
 * `required` it fails the build (ProvenanceFailed), else the build succeeds saying so.
 */
@Injectable()
export class ProvenanceService {
  constructor(
    private readonly repository: ProvenanceRepository,
    private readonly keys: SigningKeys,
    private readonly artifacts: BuildArtifacts,
    private readonly logs: BuildLogsRepository,
    private readonly sink: LogSink,
    private readonly access: BuildAccess,
    private readonly sealer: SecretSealer,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    @Optional() private readonly metrics?: Metrics,
  ) {}

  async produce(facts: ProvenanceFacts): Promise<ProvenanceOutcome> {
    const { build } = facts;
    const { policy, signingKey } = await this.keys.settings(build.tenantId);
    let stored: StoredProvenance;
    try {
      const signed = await this.signed(facts, signingKey);
      if ('problem' in signed) return await this.failed(facts, policy, signed.problem);
      stored = signed;
    } catch (error) {
      this.logger.error({ err: error, build_id: build.id }, 'provenance could not be made');
      return this.failed(facts, policy, `could not be made: ${messageOf(error)}`);
    }
    const targets = attachTargets(facts.pushed);
    if (targets.length === 0) {
      await this.say(build.id, 'INFO', storedOnlyNote(facts, stored));
      this.count('stored-only');
      return { state: 'stored-only' };
    }
    const problems: string[] = [];
    const attachments: Attachment[] = [];
    for (const target of targets) {
      try {
        attachments.push(...(await this.attach(facts, stored, target)));
      } catch (error) {
        problems.push(`${target.repository}@${target.digest}: ${messageOf(error)}`);
      }
    }
    await this.repository.setAttachments(build.id, attachments);
    for (const attachment of attachments) {
      await this.say(
        build.id,
        'INFO',
        `${attachment.kind === 'sbom' ? 'the SBOM attestation' : 'signed provenance'} attached to ${attachment.subject} (referrer ${attachment.digest}, ${attachment.via === 'fallback-tag' ? 'the referrers tag schema: the registry has no referrers API' : 'the referrers API'})`,
      );
    }
    if (problems.length > 0) {
      return this.failed(facts, policy, `could not be attached: ${problems.join('; ')}`);
    }
    this.count('attached');
    return { state: 'attached' };
  }

  /** The build's signed statements: stored before (a second pass), or made, signed and stored. */
  private async signed(
    facts: ProvenanceFacts,
    signingKey: string | null,
  ): Promise<StoredProvenance | { problem: string }> {
    const { build } = facts;
    const earlier = await this.repository.provenance(build.id);
    if (earlier !== undefined) return earlier;
    // Before the log is settled and digested: a build that pushed nothing has no statement.
    if (!hasSubject(facts.pushed, facts.packer)) {
      return { problem: `could not be made: ${new NoSubjectError().message}` };
    }
    const signer = await this.keys.signer(build.tenantId, signingKey);
    if (!signer.ok) return { problem: `could not be signed: ${signer.message}` };
    // Every line the build printed is stored before the digest is taken; kiln's own provenance
    // lines come after the lines it covers.
    if (!(await this.sink.settle(build.id))) {
      return { problem: 'the build log could not be stored whole (the database is unavailable)' };
    }
    const log = await digestOfLog(this.logs, build.id);
    const documents = await this.artifacts.documents(build.id);
    const publicUrl = this.config.triggers.publicUrl.replace(/\/+$/, '');
    const input: ProvenanceInput = {
      build: {
        id: build.id,
        tenantId: build.tenantId,
        projectId: build.projectId,
        buildNumber: build.buildNumber,
        // buildx secrets unsealed: a secret reference shows as written, a value as [redacted].
        spec: withSecretsUnsealed(build.spec, this.sealer),
        config: configWithSecretsUnsealed(build.config, this.sealer),
        gitCommit: (await this.logs.checkedOutCommit(build.id)) ?? build.gitCommit,
        gitBranch: build.gitBranch,
        createdBy: build.createdBy,
        trigger:
          build.triggerId === null
            ? null
            : { id: build.triggerId, event: build.triggerEvent, pusher: build.triggeredBy },
        startedAt: build.startedAt,
        finishedAt: facts.finishedAt,
      },
      ...(facts.pushed === undefined ? {} : { pushed: facts.pushed }),
      ...(facts.packer === undefined ? {} : { packer: facts.packer }),
      installation: {
        builderId: publicUrl,
        version: KILN_VERSION,
        runner: facts.runner,
        namespace: facts.namespace,
      },
      images: facts.images,
      byproducts: {
        log: {
          digest: log.sha256,
          lines: log.lines,
          uri: `${publicUrl}/api/v1/builds/${build.id}/logs`,
        },
        documents: documents.map((document) => ({
          name: document.kind === 'sbom' ? `sbom.${document.format}` : 'scan',
          uri: `${publicUrl}/api/v1/builds/${build.id}/${document.kind}`,
          mediaType: mediaTypeOf(document.format),
          digest: sha256Digest(document.bytes),
        })),
      },
    };
    // It has a subject: checked above.
    const statement = provenanceStatement(input);
    const sbom = documents.find((document) => document.kind === 'sbom' && !document.truncated);
    const sbomDocument = sbom === undefined ? undefined : parsedJson(sbom.bytes);
    const sbomFormat = sbom?.format;
    const sbomSigned =
      sbomDocument === undefined || (sbomFormat !== 'spdx-json' && sbomFormat !== 'cyclonedx-json')
        ? null
        : JSON.stringify(
            signStatement(
              sbomStatement({
                ...(facts.pushed === undefined ? {} : { pushed: facts.pushed }),
                ...(facts.packer === undefined ? {} : { packer: facts.packer }),
                format: sbomFormat,
                document: sbomDocument,
              }),
              signer.key,
            ),
          );
    return this.repository.storeOnce({
      buildId: build.id,
      tenantId: build.tenantId,
      keyId: signer.key.keyId,
      bundle: JSON.stringify(signStatement(statement, signer.key)),
      sbomBundle: sbomSigned,
      logDigest: log.sha256,
      logLines: log.lines,
    });
  }

  /** Attaches the build's bundles to one pushed image; throws what went wrong. */
  private async attach(
    facts: ProvenanceFacts,
    stored: StoredProvenance,
    target: AttachTarget,
  ): Promise<Attachment[]> {
    const { host, path } = target;
    const login = await this.access.registryLogin(facts.build, host);
    if (!login.ok) throw new Error(`the registry credentials could not be read: ${login.message}`);
    const registry = new OciReferrers({
      insecure: login.insecure || facts.insecureRegistries.includes(host),
      ...(login.credentials === undefined ? {} : { credentials: login.credentials }),
      timeoutMs: this.config.externalCalls.timeoutMs,
    });
    const subject = await registry.resolve(`${host}/${path}@${target.digest}`);
    const attachments: Attachment[] = [];
    const documents: Array<{ kind: string; bundle: string }> = [
      { kind: 'provenance', bundle: stored.bundle },
      ...(stored.sbomBundle === null ? [] : [{ kind: 'sbom', bundle: stored.sbomBundle }]),
    ];
    for (const { kind, bundle } of documents) {
      const attached = await registry.attach(
        { host, path },
        { digest: subject.digest, mediaType: subject.mediaType, size: subject.size },
        {
          artifactType: SIGSTORE_BUNDLE_V03,
          layerMediaType: SIGSTORE_BUNDLE_V03,
          content: Buffer.from(bundle, 'utf8'),
          annotations: bundleAnnotations(bundle, stored.createdAt),
        },
      );
      attachments.push({
        kind,
        subject: `${host}/${path}@${subject.digest}`,
        digest: attached.digest,
        via: attached.via,
      });
    }
    return attachments;
  }

  private async failed(
    facts: ProvenanceFacts,
    policy: 'optional' | 'required',
    problem: string,
  ): Promise<ProvenanceOutcome> {
    const message = `provenance ${problem}`.slice(0, STATE_LIMIT);
    this.count('failed');
    if (policy === 'required') {
      const fails = `${message}; the tenant requires provenance, so the build fails (its image stays pushed)`;
      await this.say(facts.build.id, 'ERROR', fails);
      return { state: `failed: ${problem}`.slice(0, STATE_LIMIT), fails };
    }
    await this.say(facts.build.id, 'WARN', `${message}; the build succeeds without it`);
    return { state: `failed: ${problem}`.slice(0, STATE_LIMIT) };
  }

  private async say(
    buildId: string,
    level: 'INFO' | 'WARN' | 'ERROR',
    text: string,
  ): Promise<void> {
    await this.sink.append(buildId, [{ text: `${level}: [kiln] ${text}`, container: 'kiln' }]);
  }

  private count(outcome: 'attached' | 'stored-only' | 'failed'): void {
    this.metrics?.inc('kiln_provenance_total', { outcome });
  }
}

interface AttachTarget {
  readonly host: string;
  readonly path: string;
  readonly repository: string;
  readonly digest: string;
}

/** The distinct repositories the build pushed its image to (an S3 layout has no registry). */
function attachTargets(pushed: PushedImages | undefined): AttachTarget[] {
  if (pushed === undefined) return [];
  const targets = new Map<string, AttachTarget>();
  for (const image of pushed.images) {
    if (image.startsWith('s3://')) continue;
    const reference = splitImageReference(image);
    const repository = `${reference.host}/${reference.path}`;
    targets.set(repository, {
      host: reference.host,
      path: reference.path,
      repository,
      digest: pushed.digest,
    });
  }
  return [...targets.values()];
}

/**
 * The annotations cosign writes on a bundle referrer, from the signed statement itself (its
 * predicate type, and when the build finished), so attaching the same bundle again pushes the
 * very same manifest.
 */
function bundleAnnotations(bundle: string, stored: Date): Record<string, string> {
  const statement = envelopeStatement(JSON.parse(bundle) as SignedBundle) as {
    predicateType: string;
    predicate?: { runDetails?: { metadata?: { finishedOn?: string } } };
  };
  const finished = statement.predicate?.runDetails?.metadata?.finishedOn;
  return sigstoreBundleAnnotations(
    statement.predicateType,
    finished === undefined ? stored : new Date(finished),
  );
}

function storedOnlyNote(facts: ProvenanceFacts, stored: StoredProvenance): string {
  const why =
    facts.packer !== undefined
      ? 'a packer build pushes no image to attach it to'
      : facts.pushed?.images.some((image) => image.startsWith('s3://')) === true
        ? 'an S3 layout is not in a registry'
        : 'the build pushed no image to attach it to';
  return `signed provenance stored (key ${stored.keyId.slice(0, 16)}…): GET /api/v1/builds/${facts.build.id}/provenance serves it; ${why}`;
}

/** The spec with its buildx secrets unsealed: what the statement builder redacts by kind. */
function withSecretsUnsealed(spec: BuildSpec, sealer: SecretSealer): BuildSpec {
  const secrets = spec.config.secrets;
  if (secrets === undefined || Object.keys(secrets).length === 0) return spec;
  return { ...spec, config: { ...spec.config, secrets: sealer.unsealAll(secrets) } };
}

/**
 * The wizard's manifest as submitted, with its buildx secrets unsealed like the spec's: the
 * statement shows this manifest, and a sealed secret reference would show as [redacted].
 */
function configWithSecretsUnsealed(
  config: BuildConfigSnapshot,
  sealer: SecretSealer,
): BuildConfigSnapshot {
  if (config.form !== 'wizard') return config;
  const { manifest } = config;
  const secrets = manifest.build_config.secrets;
  if (secrets === undefined || Object.keys(secrets).length === 0) return config;
  return {
    ...config,
    manifest: {
      ...manifest,
      build_config: { ...manifest.build_config, secrets: sealer.unsealAll(secrets) },
    },
  };
}

/** The media type of a stored document, by the format kiln recorded. */
function mediaTypeOf(format: string): string {
  switch (format) {
    case 'spdx-json':
      return 'application/spdx+json';
    case 'cyclonedx-json':
      return 'application/vnd.cyclonedx+json';
    default:
      return 'application/json';
  }
}

function parsedJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function readVersion(): string {
  try {
    const path = new URL('../../package.json', import.meta.url);
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
