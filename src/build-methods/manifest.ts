/*
 * Validation and normalisation of the wizard-form build manifest, with the wizard's own messages
 * where the service specification gives one. Decisions where it is ambiguous:
 *
 * - The wizard's rules say "method is not kaniko and base image empty → Base image is required"
 *   (likewise for instructions), but its manifest has the wizard send `base_image: ""` for
 *   kaniko, paketo and packer, and no instructions for kaniko. A manifest the wizard builds
 *   from a valid form must pass, so base image + instructions are required only for
 *   `container`, the one method that generates its Dockerfile from them. `buildx` requires `build_config.dockerfile` instead
 *   ("Dockerfile content is required for Buildx builds"). Other methods keep them as sent.
 * - `build_context` absent → ".". An explicitly empty context gets the Kaniko message for
 *   kaniko and becomes "." for every other method.
 * - `null` means "not given" for every optional field (JSON clients send it for empty fields).
 * - A method's exclusive fields (buildx: `platforms`, `cache_to`, `cache_from`, `secrets`) on
 *   another method are rejected when they carry a value and dropped when empty (a form may send
 *   `[]`, `""`, `{}`).
 *   Other method-specific fields (dockerfile, paketo_config, packer fields) are known, typed
 *   fields and are kept as sent on any method.
 * - Tags and instructions are split (commas / newlines) inside array elements too, so both input
 *   forms normalise the same way. Tag problems are keyed `manifest.tags`: indices after
 *   splitting would not match the input.
 * - Each method's own rules live in its file (`<method>.ts`, table in `methods.ts`); this file
 *   keeps what every method shares.
 */

import { readScanPolicy } from '../manifest/scan-policy.js';
import {
  boundedString,
  enumValue,
  IMAGE_REFERENCE_MAX,
  imageReference,
  isEmptyValue,
  isPlainObject,
  jsonArray,
  jsonObject,
  nonEmpty,
  optionalBoolean,
  optionalString,
  rejectUnknownKeys,
  splitList,
  stringArray,
  stringMap,
  WHITESPACE,
  withoutUndefined,
} from '../manifest/fields.js';
import { isSecretReference, secretValueProblem } from '../manifest/secret-reference.js';
import { repositoryOfReference } from '../manifest/build-spec.js';
import { BUILD_METHODS, exclusiveOwner } from './methods.js';
import type { ManifestDraft } from './method.js';
import {
  type BuildConfig,
  type BuildManifest,
  type Details,
  MANIFEST_MESSAGES,
  type ManifestContext,
  type ManifestResult,
  METHOD_NAMES,
  type MethodName,
  type PaketoConfig,
  REGISTRY_TYPES,
  SBOM_TOOLS,
  SCAN_TOOLS,
  SECRET_MANAGER_TYPES,
} from '../manifest/types.js';

const MANIFEST_KEYS = [
  'name',
  'description',
  'type',
  'base_image',
  'instructions',
  'environment',
  'tags',
  'metadata',
  'build_config',
] as const;
const BUILD_CONFIG_KEYS = [
  'build_type',
  'sbom_tool',
  'scan_tool',
  'registry_type',
  'secret_manager_type',
  'dockerfile',
  'build_context',
  'build_args',
  'target',
  'cache',
  'cache_repo',
  'platforms',
  'cache_to',
  'cache_from',
  'secrets',
  'paketo_config',
  'packer_template',
  'builders',
  'provisioners',
  'post_processors',
  'variables',
  'registry_repository',
  'scan_policy',
] as const satisfies ReadonlyArray<keyof BuildConfig>;
const PAKETO_CONFIG_KEYS = ['builder', 'buildpacks', 'env', 'build_args'] as const;

const NAME_MAX = 255;
const DESCRIPTION_MAX = 4096;
const TAG_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * Validates an untrusted JSON value (already JSON.parse'd) as a wizard manifest. Every problem is
 * reported, keyed by field path (`manifest.build_config.dockerfile`); on success the manifest is
 * normalised (lists split and trimmed, empty environment values dropped, defaults filled) and
 * shares no objects with the input. Synchronous, so it skips the methods' asynchronous rules (an
 * HCL2 packer template is not checked); the API creates builds with `validateManifestAsync`.
 */
export function validateManifest(input: unknown, context: ManifestContext = {}): ManifestResult {
  return resultOf(readManifest(input, context));
}

/**
 * `validateManifest` plus each method's asynchronous rules (`BuildMethod.checkAsync`): what every
 * build created through the API passes, whichever runner then runs it.
 */
export async function validateManifestAsync(
  input: unknown,
  context: ManifestContext = {},
): Promise<ManifestResult> {
  const read = readManifest(input, context);
  if (read.type !== undefined && read.draft !== undefined) {
    await BUILD_METHODS[read.type].checkAsync?.(read.draft, read.details);
  }
  return resultOf(read);
}

/** A manifest as read by the shared rules and the method's synchronous ones. */
interface ManifestRead {
  readonly details: Details;
  readonly type: MethodName | undefined;
  /** Undefined when the method or build_config could not be read: no method rule applies. */
  readonly draft: ManifestDraft | undefined;
  /** Undefined when a required choice is missing. */
  readonly manifest: BuildManifest | undefined;
}

function readManifest(input: unknown, context: ManifestContext): ManifestRead {
  const details: Details = {};
  if (!isPlainObject(input)) {
    return {
      details: { manifest: 'must be an object' },
      type: undefined,
      draft: undefined,
      manifest: undefined,
    };
  }
  rejectUnknownKeys(input, MANIFEST_KEYS, 'manifest', details);

  const type = enumValue(input.type, METHOD_NAMES, 'manifest.type', details);
  const name = boundedString(input.name, 'manifest.name', NAME_MAX, details)?.trim() ?? '';
  const description =
    boundedString(input.description, 'manifest.description', DESCRIPTION_MAX, details) ?? '';
  const baseImage = imageReference(input.base_image, 'manifest.base_image', details) ?? '';
  const instructions =
    splitList(input.instructions, /\r?\n/, 'manifest.instructions', details) ?? [];
  const environment =
    stringMap(input.environment, 'manifest.environment', details, { dropEmpty: true }) ?? {};
  const tags = normaliseTags(input.tags, details);
  const metadata = jsonObject(input.metadata, 'manifest.metadata', details) ?? {};
  const read = readBuildConfig(input.build_config, type, details);

  let draft: ManifestDraft | undefined;
  if (type !== undefined && read !== undefined) {
    draft = {
      baseImage,
      instructions,
      config: read.config,
      contextGiven: read.contextGiven,
      // An s3 build pushes to no registry: its image goes to the tenant's bucket (ADR 0022).
      repositoryFromElsewhere:
        read.config.registry_type === 's3' ||
        tags.some((tag) => repositoryOfReference(tag) !== undefined) ||
        context.defaultRegistry !== undefined,
    };
    BUILD_METHODS[type].check(draft, details);
  }
  checkSecretReferences(type, environment, read?.config, details);

  const buildConfig = read === undefined ? undefined : complete(read.config);
  const manifest =
    type === undefined || buildConfig === undefined
      ? undefined
      : {
          name,
          description,
          type,
          base_image: baseImage,
          instructions,
          environment,
          tags,
          metadata,
          build_config: buildConfig,
        };
  return { details, type, draft, manifest };
}

/**
 * References in `environment` and `build_config.secrets` (docs/adr/0021-secret-references.md):
 * each parses and names the build's own secret manager. An environment entry reaches the image
 * of every method but packer (as a build argument, an ENV line or a buildpack's environment),
 * so a reference there is refused for them: a secret must not end up in an image's history.
 */
function checkSecretReferences(
  type: MethodName | undefined,
  environment: Record<string, string>,
  config: Partial<BuildConfig> | undefined,
  details: Details,
): void {
  const manager = config?.secret_manager_type;
  const entries: Array<[string, string]> = [
    ...Object.entries(environment).map(([name, value]): [string, string] => [
      `manifest.environment.${name}`,
      value,
    ]),
    ...Object.entries(config?.secrets ?? {}).map(([name, value]): [string, string] => [
      `manifest.build_config.secrets.${name}`,
      value,
    ]),
  ];
  for (const [field, value] of entries) {
    if (!isSecretReference(value)) continue;
    if (field.startsWith('manifest.environment.') && type !== undefined && type !== 'packer') {
      details[field] = MANIFEST_MESSAGES.secretInEnvironment(type);
      continue;
    }
    const problem = manager === undefined ? undefined : secretValueProblem(value, manager);
    if (problem !== undefined) details[field] = problem;
  }
}

function resultOf({ details, manifest }: ManifestRead): ManifestResult {
  if (manifest === undefined || Object.keys(details).length > 0) return { ok: false, details };
  return { ok: true, manifest };
}

/** The build_config fields as read: each undefined when absent or wrong. */
function readBuildConfig(
  value: unknown,
  type: MethodName | undefined,
  details: Details,
): { config: Partial<BuildConfig>; contextGiven: string | undefined } | undefined {
  const path = 'manifest.build_config';
  if (!isPlainObject(value)) {
    details[path] = 'must be an object';
    return undefined;
  }
  rejectUnknownKeys(value, BUILD_CONFIG_KEYS, path, details);
  const at = (key: string): string => `${path}.${key}`;

  const buildType = enumValue(value.build_type, METHOD_NAMES, at('build_type'), details);
  if (buildType !== undefined && type !== undefined && buildType !== type) {
    details[at('build_type')] = MANIFEST_MESSAGES.buildTypeMismatch;
  }
  const contextGiven = optionalString(value.build_context, at('build_context'), details)?.trim();
  const config: Partial<BuildConfig> = {
    build_type: buildType,
    sbom_tool: enumValue(value.sbom_tool, SBOM_TOOLS, at('sbom_tool'), details),
    scan_tool: enumValue(value.scan_tool, SCAN_TOOLS, at('scan_tool'), details),
    registry_type: enumValue(value.registry_type, REGISTRY_TYPES, at('registry_type'), details),
    secret_manager_type: enumValue(
      value.secret_manager_type,
      SECRET_MANAGER_TYPES,
      at('secret_manager_type'),
      details,
    ),
    dockerfile: optionalString(value.dockerfile, at('dockerfile'), details),
    build_context: contextGiven === undefined || contextGiven === '' ? '.' : contextGiven,
    build_args: stringMap(value.build_args, at('build_args'), details),
    target: nonEmpty(optionalString(value.target, at('target'), details)?.trim()),
    cache: optionalBoolean(value.cache, at('cache'), details),
    cache_repo: nonEmpty(imageReference(value.cache_repo, at('cache_repo'), details)),
    paketo_config: readPaketoConfig(value.paketo_config, at('paketo_config'), details),
    packer_template: optionalString(value.packer_template, at('packer_template'), details),
    builders: jsonArray(value.builders, at('builders'), details),
    provisioners: jsonArray(value.provisioners, at('provisioners'), details),
    post_processors: jsonArray(value.post_processors, at('post_processors'), details),
    variables: jsonObject(value.variables, at('variables'), details),
    registry_repository: nonEmpty(
      imageReference(value.registry_repository, at('registry_repository'), details),
    ),
    scan_policy: readScanPolicy(value.scan_policy, at('scan_policy'), details),
  };
  if (type !== undefined) {
    Object.assign(config, BUILD_METHODS[type].readExclusiveFields(value, path, details));
    for (const key of BUILD_CONFIG_KEYS) {
      const owner = exclusiveOwner(key);
      if (owner !== undefined && owner !== type && !isEmptyValue(value[key])) {
        details[at(key)] = `only for ${owner} builds`;
      }
    }
  }
  return { config, contextGiven };
}

/** The stored build_config: the required choices all made, optional fields left out when unset. */
function complete(config: Partial<BuildConfig>): BuildConfig | undefined {
  const { build_type, sbom_tool, scan_tool, registry_type, secret_manager_type } = config;
  if (
    build_type === undefined ||
    sbom_tool === undefined ||
    scan_tool === undefined ||
    registry_type === undefined ||
    secret_manager_type === undefined
  ) {
    return undefined;
  }
  return withoutUndefined({
    ...config,
    build_type,
    sbom_tool,
    scan_tool,
    registry_type,
    secret_manager_type,
    build_context: config.build_context ?? '.',
  });
}

function readPaketoConfig(
  value: unknown,
  path: string,
  details: Details,
): PaketoConfig | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object';
    return undefined;
  }
  rejectUnknownKeys(value, PAKETO_CONFIG_KEYS, path, details);
  return withoutUndefined({
    builder: imageReference(value.builder, `${path}.builder`, details),
    buildpacks: stringArray(value.buildpacks, `${path}.buildpacks`, details),
    env: stringMap(value.env, `${path}.env`, details),
    build_args: stringMap(value.build_args, `${path}.build_args`, details),
  });
}

function normaliseTags(value: unknown, details: Details): string[] {
  const path = 'manifest.tags';
  const split = splitList(value, /,/, path, details);
  if (split === undefined) {
    details[path] ??= MANIFEST_MESSAGES.tagsRequired;
    return [];
  }
  const tags = [...new Set(split)];
  if (tags.length === 0) {
    details[path] = MANIFEST_MESSAGES.tagsRequired;
    return [];
  }
  const invalid = tags.filter((tag) => !isTag(tag));
  if (invalid.length > 0) {
    details[path] = invalid
      .map(
        (tag) =>
          `"${tag}" is neither a tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}) nor an image reference with a tag`,
      )
      .join('; ');
  }
  return tags;
}

function isTag(tag: string): boolean {
  if (TAG_PATTERN.test(tag)) return true;
  if (tag.length > IMAGE_REFERENCE_MAX || WHITESPACE.test(tag) || tag.includes('@')) return false;
  const lastSegment = tag.slice(tag.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  return colon > 0 && TAG_PATTERN.test(lastSegment.slice(colon + 1));
}
