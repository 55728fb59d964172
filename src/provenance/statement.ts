/*
 * The statements kiln signs for a build (docs/provenance.md): an in-toto Statement v1 with an SLSA
 * Provenance v1 predicate, built from kiln's own records of the build, and one with the build's
 * SBOM as its predicate. Pure: plain data in, a statement out; the caller gathers the facts.
 * Equal input gives equal output, keys sorted at every depth, so a statement's bytes (and the
 * signature over them) depend on nothing but the build.
 */
import type { BuildConfigSnapshot } from '../lifecycle/build.entity.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { PushedImages } from '../manifest/formats.js';
import type { SbomFormat } from '../manifest/tool-commands.js';
import type { BuildManifest, MethodName } from '../manifest/types.js';
import { isPlainObject } from '../manifest/fields.js';
import { stableJson } from '../common/stable-json.js';
import { withoutCredentials } from '../common/url-credentials.js';
import {
  digestSet,
  gitUrl,
  type ImageDependency,
  imageDependency,
  normalisedUri,
  splitDigest,
} from './statement-resources.js';
import {
  type JsonValue,
  redactJson,
  redactNamed,
  redactPackerTemplate,
} from './statement-redaction.js';

export { type ImageDependency, imageDependency } from './statement-resources.js';

export const IN_TOTO_STATEMENT_V1 = 'https://in-toto.io/Statement/v1';
export const SLSA_PROVENANCE_V1 = 'https://slsa.dev/provenance/v1';

/** The predicate types cosign gives SBOM attestations (`--type spdxjson`, `--type cyclonedx`). */
export const SBOM_PREDICATE_TYPES: Readonly<Record<SbomFormat, string>> = {
  'spdx-json': 'https://spdx.dev/Document',
  'cyclonedx-json': 'https://cyclonedx.org/bom',
};

/** What a build of `method` means, its parameters and dependencies (docs/provenance.md). */
export function buildTypeOf(method: MethodName): string {
  return `https://kiln.dev/buildtypes/${method}/v1`;
}

/** An in-toto ResourceDescriptor: a subject, a dependency or a byproduct. */
export interface ResourceDescriptor {
  readonly name?: string;
  readonly uri?: string;
  readonly digest?: Readonly<Record<string, string>>;
  readonly mediaType?: string;
  readonly annotations?: Readonly<Record<string, JsonValue>>;
}

export interface InTotoStatement<Predicate = unknown> {
  readonly _type: typeof IN_TOTO_STATEMENT_V1;
  readonly subject: readonly ResourceDescriptor[];
  readonly predicateType: string;
  readonly predicate: Predicate;
}

export interface SlsaProvenance {
  readonly buildDefinition: {
    readonly buildType: string;
    readonly externalParameters: Readonly<Record<string, JsonValue>>;
    readonly internalParameters: Readonly<Record<string, JsonValue>>;
    readonly resolvedDependencies: readonly ResourceDescriptor[];
  };
  readonly runDetails: {
    readonly builder: { readonly id: string; readonly version: Readonly<Record<string, string>> };
    readonly metadata: {
      readonly invocationId: string;
      readonly startedOn?: string;
      readonly finishedOn: string;
    };
    readonly byproducts: readonly ResourceDescriptor[];
  };
}

/** What a packer build made: its manifest post-processor's artifacts, which carry no digest. */
export interface PackerOutput {
  /** `sha256:…` of the packer manifest (manifest.json) that lists the artifacts. */
  readonly manifestDigest: string;
  readonly artifacts: ReadonlyArray<{
    /** The packer build that made it (the manifest's `name`). */
    readonly name: string;
    readonly builderType: string;
    /** e.g. `us-east-1:ami-0abc…`; several regions are comma-separated, as packer writes them. */
    readonly artifactId: string;
  }>;
}

/** Everything a provenance statement says, gathered by its caller from kiln's records. */
export interface ProvenanceInput {
  readonly build: {
    readonly id: string;
    readonly tenantId: string;
    readonly projectId: string;
    readonly buildNumber: number;
    /**
     * As stored. buildx secrets may be sealed or unsealed: a value that is a secret reference
     * shows as written, any other value as `[redacted]`.
     */
    readonly spec: BuildSpec;
    readonly config: BuildConfigSnapshot;
    /** The commit that was built, resolved from the branch when none was asked for. */
    readonly gitCommit: string | null;
    readonly gitBranch: string | null;
    readonly createdBy: string | null;
    readonly trigger: {
      readonly id: string;
      readonly event: string | null;
      readonly pusher: string | null;
    } | null;
    readonly startedAt: Date | null;
    readonly finishedAt: Date;
  };
  /** What the build pushed: image references with their digest, or an S3 object's address. */
  readonly pushed?: PushedImages;
  readonly packer?: PackerOutput;
  readonly installation: {
    /** A URI naming the kiln installation, e.g. `https://kiln.example.com`. */
    readonly builderId: string;
    readonly version: string;
    readonly runner: 'kubernetes' | 'local';
    readonly namespace: string | null;
  };
  /** The builder and step images the build ran. */
  readonly images: readonly ImageDependency[];
  readonly byproducts: {
    /** The stored build log: the digest of lines 1..`lines`, and where the API serves them. */
    readonly log: { readonly digest: string; readonly lines: number; readonly uri: string };
    /** The SBOM and scan documents kiln stored for the build. */
    readonly documents: ReadonlyArray<{
      readonly name: string;
      readonly mediaType: string;
      readonly digest: string;
      readonly uri?: string;
    }>;
  };
}

/** A statement needs a subject: a build that left nothing with a digest has no statement. */
export class NoSubjectError extends Error {
  constructor() {
    super('the build left no image, S3 object or packer artifact with a digest to attest');
  }
}

/** The SLSA provenance of a successful build. Throws NoSubjectError when it pushed nothing. */
export function provenanceStatement(input: ProvenanceInput): InTotoStatement<SlsaProvenance> {
  const { build, installation } = input;
  const method = build.spec.method;
  const predicate: SlsaProvenance = {
    buildDefinition: {
      buildType: buildTypeOf(method),
      externalParameters: externalParameters(build.spec, build.config),
      // What kiln decided rather than the caller: its version and where it ran the build, and
      // the ids it gave the build and the identity it authenticated (a trigger's pusher as the
      // git provider names them). Verifiers need not expect them; they answer "which build?".
      internalParameters: {
        version: installation.version,
        runner: installation.runner,
        namespace: installation.namespace,
        tenantId: build.tenantId,
        projectId: build.projectId,
        buildNumber: build.buildNumber,
        createdBy: build.createdBy,
        trigger: build.trigger === null ? null : { ...build.trigger },
      },
      resolvedDependencies: resolvedDependencies(input),
    },
    runDetails: {
      builder: {
        id: `${normalisedUri(installation.builderId).replace(/\/+$/, '')}/builders/${method}`,
        version: { kiln: installation.version },
      },
      metadata: {
        invocationId: build.id,
        ...(build.startedAt === null ? {} : { startedOn: build.startedAt.toISOString() }),
        finishedOn: build.finishedAt.toISOString(),
      },
      byproducts: byproducts(input.byproducts),
    },
  };
  return sorted({
    _type: IN_TOTO_STATEMENT_V1,
    subject: subjects(input.pushed, input.packer),
    predicateType: SLSA_PROVENANCE_V1,
    predicate,
  });
}

export interface SbomStatementInput {
  readonly pushed?: PushedImages;
  readonly packer?: PackerOutput;
  readonly format: SbomFormat;
  /** The SBOM document as stored (SPDX 2.x JSON or CycloneDX JSON). */
  readonly document: unknown;
}

/** An SBOM attestation: the build's SBOM document about the same subjects as its provenance. */
export function sbomStatement(input: SbomStatementInput): InTotoStatement {
  if (!isPlainObject(input.document)) throw new TypeError('an SBOM document is a JSON object');
  return sorted({
    _type: IN_TOTO_STATEMENT_V1,
    subject: subjects(input.pushed, input.packer),
    predicateType: SBOM_PREDICATE_TYPES[input.format],
    predicate: input.document,
  });
}

/**
 * Every name the build pushed, with its digest: image references without their digest, an S3
 * object by its address, and each packer artifact as `<builder type>:<artifact id>` with the
 * digest of the packer manifest that lists it (the artifacts, AMIs and the like, have none).
 */
function subjects(
  pushed: PushedImages | undefined,
  packer: PackerOutput | undefined,
): ResourceDescriptor[] {
  const found = subjectsFound(pushed, packer);
  const seen = new Set<string>();
  const unique = found.filter((subject) => {
    const key = stableJson([subject.name, subject.digest]);
    return seen.has(key) ? false : (seen.add(key), true);
  });
  if (unique.length === 0) throw new NoSubjectError();
  return unique;
}

/** Whether the build left anything a statement could name (else provenanceStatement throws). */
export function hasSubject(
  pushed: PushedImages | undefined,
  packer: PackerOutput | undefined,
): boolean {
  return subjectsFound(pushed, packer).length > 0;
}

function subjectsFound(
  pushed: PushedImages | undefined,
  packer: PackerOutput | undefined,
): ResourceDescriptor[] {
  const found: ResourceDescriptor[] = [];
  if (pushed !== undefined) {
    for (const image of pushed.images) {
      if (image.startsWith('s3://')) {
        found.push({ name: image, uri: image, digest: digestSet(pushed.digest) });
      } else {
        const { name, digest } = splitDigest(image);
        found.push({ name, digest: digestSet(digest ?? pushed.digest) });
      }
    }
  }
  if (packer !== undefined) {
    for (const artifact of packer.artifacts) {
      found.push({
        name: `${artifact.builderType}:${artifact.artifactId}`,
        digest: digestSet(packer.manifestDigest),
        annotations: { packerBuild: artifact.name },
      });
    }
  }
  return found;
}

/**
 * The request as submitted, every secret value replaced (statement-redaction.ts): the reference
 * form's repository, branch, commit and build args; the wizard's manifest; a Build resource's
 * spec. The repository is the project's, which the tenant controls as it does the request.
 */
function externalParameters(
  spec: BuildSpec,
  config: BuildConfigSnapshot,
): Record<string, JsonValue> {
  const source = {
    repository: spec.source.repository === null ? null : withoutCredentials(spec.source.repository),
    branch: spec.source.branch,
    commit: spec.source.commit,
  };
  switch (config.form) {
    case 'reference':
      return { form: 'reference', ...source, build_args: redactNamed(config.build_args) };
    case 'wizard':
      return { form: 'wizard', ...source, manifest: redactedManifest(config.manifest) };
    case 'resource':
      return {
        form: 'resource',
        resource: { namespace: config.namespace, name: config.name, uid: config.uid },
        spec: redactedWithPacker(spec, spec.config),
      };
  }
}

function redactedManifest(manifest: BuildManifest): JsonValue {
  return redactedWithPacker(manifest, manifest.build_config, 'build_config');
}

/**
 * `value` redacted, with its packer template's own redaction and the variables that template
 * declares sensitive (`config` is where both sit in `value`, under `configKey`).
 */
function redactedWithPacker(
  value: object,
  config: { packer_template?: string; variables?: Record<string, unknown> },
  configKey = 'config',
): JsonValue {
  const redacted = redactJson(value) as Record<string, JsonValue>;
  const template = config.packer_template;
  if (template === undefined) return redacted;
  const packer = redactPackerTemplate(template);
  return {
    ...redacted,
    [configKey]: {
      ...(redacted[configKey] as Record<string, JsonValue>),
      packer_template: withoutCredentials(packer.template),
      ...(config.variables === undefined
        ? {}
        : { variables: redactNamed(config.variables, packer.sensitive) }),
    },
  };
}

/**
 * The source repository at the commit built (`git+<url>@<ref>`, digest gitCommit), then the
 * images the build ran, then images its spec names that the caller did not list: the container
 * method's base image, the Paketo builder.
 */
function resolvedDependencies(input: ProvenanceInput): ResourceDescriptor[] {
  const { spec, gitBranch, gitCommit } = input.build;
  const found: ResourceDescriptor[] = [];
  if (spec.source.repository !== null) {
    const url = gitUrl(withoutCredentials(spec.source.repository));
    const ref = gitBranch ?? gitCommit;
    const commit = gitCommit?.toLowerCase();
    found.push({
      name: 'source',
      uri: ref === null ? url : `${url}@${ref}`,
      ...(commit !== undefined && /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(commit)
        ? { digest: { gitCommit: commit } }
        : {}),
    });
  }
  found.push(...input.images.map(imageDescriptor));
  const named: Array<[string, string | undefined]> = [
    ['base-image', spec.config.base_image],
    ['paketo-builder', spec.config.paketo_config?.builder],
  ];
  for (const [name, reference] of named) {
    if (reference === undefined || reference === '') continue;
    const dependency = imageDescriptor(imageDependency(name, reference));
    if (!found.some((known) => known.uri === dependency.uri)) found.push(dependency);
  }
  return found;
}

function imageDescriptor(image: ImageDependency): ResourceDescriptor {
  return {
    name: image.name,
    uri: image.uri,
    ...(image.digest === undefined ? {} : { digest: digestSet(image.digest) }),
  };
}

function byproducts(given: ProvenanceInput['byproducts']): ResourceDescriptor[] {
  return [
    {
      name: 'build-log',
      uri: given.log.uri,
      digest: digestSet(given.log.digest),
      annotations: { lines: given.log.lines },
    },
    ...given.documents.map((document) => ({
      name: document.name,
      ...(document.uri === undefined ? {} : { uri: document.uri }),
      mediaType: document.mediaType,
      digest: digestSet(document.digest),
    })),
  ];
}

/** `value` with keys sorted at every depth and undefined members left out. */
function sorted<T>(value: T): T {
  return JSON.parse(stableJson(value)) as T;
}
