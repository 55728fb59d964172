/*
 * Validation and normalisation of the wizard-form build manifest (spec 2.7), with the wizard's
 * own messages (spec 7) where the spec gives one. Decisions where the spec is ambiguous (to be
 * recorded in an ADR):
 *
 * - Spec 7 says "method is not kaniko and base image empty → Base image is required" (likewise
 *   for instructions), but spec 2.7 says the wizard sends `base_image: ""` for kaniko, paketo
 *   and packer, and no instructions for kaniko. A manifest the wizard builds from a valid form
 *   must pass, so base image + instructions are required only for `container`, the one method
 *   that generates its Dockerfile from them. `buildx` requires `build_config.dockerfile` instead
 *   ("Dockerfile content is required for Buildx builds"). Other methods keep them as sent.
 * - `build_context` absent → ".". An explicitly empty context gets the Kaniko message for
 *   kaniko and becomes "." for every other method.
 * - `null` means "not given" for every optional field (JSON clients send it for empty fields).
 * - buildx-only fields (`platforms`, `cache_to`, `cache_from`, `secrets`) on another method are
 *   rejected when they carry a value and dropped when empty (a form may send `[]`, `""`, `{}`).
 *   Other method-specific fields (dockerfile, paketo_config, packer fields) are known, typed
 *   fields and are kept as sent on any method.
 * - Tags and instructions are split (commas / newlines) inside array elements too, so both input
 *   forms normalise the same way. Tag problems are keyed `manifest.tags`: indices after
 *   splitting would not match the input.
 * - Packer: builders given are checked against a legacy JSON template's `builders[].type`. An
 *   HCL2 template (HCL syntax, or HCL2 JSON syntax, which has no top-level `builders`) is
 *   accepted as sent. DESIGN.md wants HCL2 checked with an HCL parser from npm: a follow-up.
 * - Paketo: the builder is stored as sent; `paketoBuilderImage` maps the deprecated bionic names
 *   when the Job is built, so the snapshot shows what the user chose.
 */

export const BUILD_METHODS = ['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const;
export type BuildMethod = (typeof BUILD_METHODS)[number];
export const SBOM_TOOLS = ['syft', 'grype', 'trivy'] as const;
export type SbomTool = (typeof SBOM_TOOLS)[number];
export const SCAN_TOOLS = ['trivy', 'clair', 'grype', 'snyk'] as const;
export type ScanTool = (typeof SCAN_TOOLS)[number];
export const REGISTRY_TYPES = ['s3', 'harbor', 'quay', 'artifactory'] as const;
export type RegistryType = (typeof REGISTRY_TYPES)[number];
export const SECRET_MANAGER_TYPES = ['vault', 'aws_secretsmanager', 'azure_keyvault'] as const;
export type SecretManagerType = (typeof SECRET_MANAGER_TYPES)[number];

export interface PaketoConfig {
  builder?: string;
  buildpacks?: string[];
  env?: Record<string, string>;
  build_args?: Record<string, string>;
}

export interface BuildConfig {
  build_type: BuildMethod;
  sbom_tool: SbomTool;
  scan_tool: ScanTool;
  registry_type: RegistryType;
  secret_manager_type: SecretManagerType;
  dockerfile?: string;
  build_context: string;
  build_args?: Record<string, string>;
  target?: string;
  cache?: boolean;
  cache_repo?: string;
  platforms?: string[];
  cache_to?: string;
  cache_from?: string[];
  secrets?: Record<string, string>;
  paketo_config?: PaketoConfig;
  packer_template?: string;
  builders?: unknown[];
  provisioners?: unknown[];
  post_processors?: unknown[];
  variables?: Record<string, unknown>;
  registry_repository?: string;
}

/** The normalised manifest kiln stores as the build's configuration snapshot. */
export interface BuildManifest {
  name: string;
  description: string;
  type: BuildMethod;
  base_image: string;
  instructions: string[];
  environment: Record<string, string>;
  tags: string[];
  metadata: Record<string, unknown>;
  build_config: BuildConfig;
}

export type ManifestResult =
  { ok: true; manifest: BuildManifest } | { ok: false; details: Record<string, string> };

export const MANIFEST_MESSAGES = {
  baseImageRequired: 'Base image is required',
  instructionsRequired: 'At least one build instruction is required',
  kanikoDockerfileRequired: 'Dockerfile content is required for Kaniko builds',
  kanikoContextRequired: 'Build context is required for Kaniko builds',
  kanikoRegistryRepositoryRequired: 'Registry repository is required for Kaniko builds',
  paketoBuilderRequired: 'Buildpack builder selection is required for Paketo builds',
  packerTemplateRequired: 'Packer template is required for Packer builds',
  tagsRequired: 'At least one tag is required',
  buildxDockerfileRequired: 'Dockerfile content is required for Buildx builds',
  buildTypeMismatch: 'build_type must equal manifest.type',
  onlyForBuildx: 'only for buildx builds',
  notAllowed: 'is not allowed',
} as const;

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
] as const;
const PAKETO_CONFIG_KEYS = ['builder', 'buildpacks', 'env', 'build_args'] as const;
const BUILDX_ONLY_KEYS = ['platforms', 'cache_to', 'cache_from', 'secrets'] as const;

const NAME_MAX = 255;
const DESCRIPTION_MAX = 4096;
const IMAGE_REFERENCE_MAX = 255;
/** Deep enough for any real template fragment; stops cyclic or hostile input. */
const JSON_DEPTH_MAX = 64;
const TAG_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const PLATFORM_PATTERN = /^[a-z0-9]+\/[a-z0-9_]+(?:\/[a-z0-9]+)?$/;
const WHITESPACE = /\s/;
const PAKETO_BIONIC_BUILDER = /^(.+)\/builder:(base|full|tiny)$/;

type Details = Record<string, string>;
type Json = Record<string, unknown>;

/**
 * Validates an untrusted JSON value (already JSON.parse'd) as a wizard manifest. Every problem is
 * reported, keyed by field path (`manifest.build_config.dockerfile`); on success the manifest is
 * normalised (lists split and trimmed, empty environment values dropped, defaults filled) and
 * shares no objects with the input.
 */
export function validateManifest(input: unknown, context: ManifestContext = {}): ManifestResult {
  const details: Details = {};
  if (!isPlainObject(input)) return { ok: false, details: { manifest: 'must be an object' } };
  rejectUnknownKeys(input, MANIFEST_KEYS, 'manifest', details);

  const type = enumValue(input.type, BUILD_METHODS, 'manifest.type', details);
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
  const buildConfig = readBuildConfig(input.build_config, type, details, {
    repositoryFromElsewhere:
      tags.some((tag) => repositoryOfReference(tag) !== undefined) ||
      context.defaultRegistry !== undefined,
  });

  if (type === 'container') {
    if (baseImage === '') details['manifest.base_image'] ??= MANIFEST_MESSAGES.baseImageRequired;
    if (instructions.length === 0) {
      details['manifest.instructions'] ??= MANIFEST_MESSAGES.instructionsRequired;
    }
  }

  if (type === undefined || buildConfig === undefined || Object.keys(details).length > 0) {
    return { ok: false, details };
  }
  return {
    ok: true,
    manifest: {
      name,
      description,
      type,
      base_image: baseImage,
      instructions,
      environment,
      tags,
      metadata,
      build_config: buildConfig,
    },
  };
}

/**
 * The builder image a paketo Job runs. The wizard offers the deprecated bionic builders
 * `<ns>/builder:base|full|tiny`; they map to the maintained `<ns>/builder-jammy-<tag>:latest`
 * (`mapped: true`, so the caller can say so in the build log). Anything else is used as given.
 */
export function paketoBuilderImage(builder: string): { image: string; mapped: boolean } {
  const match = PAKETO_BIONIC_BUILDER.exec(builder);
  if (match === null) return { image: builder, mapped: false };
  const [, namespace, tag] = match;
  return { image: `${namespace}/builder-jammy-${tag}:latest`, mapped: true };
}

/** What a manifest is checked against besides itself. */
export interface ManifestContext {
  /** The project's or kiln's default registry (`host[:port][/path]`), when one is configured. */
  readonly defaultRegistry?: string;
}

/**
 * The repository a build pushes to (DESIGN.md, "API details decided here"): the manifest's
 * `registry_repository`, else the repository of the first tag that is a full image reference, else
 * `<default registry>/<project slug>`; undefined when none gives one.
 */
export function outputRepository(
  registryRepository: string | undefined,
  tags: readonly string[],
  defaultRegistry: string | undefined,
  projectName: string,
): string | undefined {
  if (registryRepository !== undefined) return registryRepository;
  for (const tag of tags) {
    const repository = repositoryOfReference(tag);
    if (repository !== undefined) return repository;
  }
  return defaultRegistry === undefined ? undefined : `${defaultRegistry}/${slug(projectName)}`;
}

/** `registry/repo:tag` → `registry/repo`; undefined for a bare tag or a name without a registry. */
export function repositoryOfReference(tag: string): string | undefined {
  const slash = tag.lastIndexOf('/');
  const colon = tag.lastIndexOf(':');
  return slash > 0 && colon > slash ? tag.slice(0, colon) : undefined;
}

function slug(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'project'
  );
}

function readBuildConfig(
  value: unknown,
  type: BuildMethod | undefined,
  details: Details,
  output: { repositoryFromElsewhere: boolean },
): BuildConfig | undefined {
  const path = 'manifest.build_config';
  if (!isPlainObject(value)) {
    details[path] = 'must be an object';
    return undefined;
  }
  rejectUnknownKeys(value, BUILD_CONFIG_KEYS, path, details);
  const at = (key: string): string => `${path}.${key}`;

  const buildType = enumValue(value.build_type, BUILD_METHODS, at('build_type'), details);
  if (buildType !== undefined && type !== undefined && buildType !== type) {
    details[at('build_type')] = MANIFEST_MESSAGES.buildTypeMismatch;
  }
  const sbomTool = enumValue(value.sbom_tool, SBOM_TOOLS, at('sbom_tool'), details);
  const scanTool = enumValue(value.scan_tool, SCAN_TOOLS, at('scan_tool'), details);
  const registryType = enumValue(value.registry_type, REGISTRY_TYPES, at('registry_type'), details);
  const secretManagerType = enumValue(
    value.secret_manager_type,
    SECRET_MANAGER_TYPES,
    at('secret_manager_type'),
    details,
  );

  const dockerfile = optionalString(value.dockerfile, at('dockerfile'), details);
  const contextGiven = optionalString(value.build_context, at('build_context'), details)?.trim();
  const buildArgs = stringMap(value.build_args, at('build_args'), details);
  const target = nonEmpty(optionalString(value.target, at('target'), details)?.trim());
  const cache = optionalBoolean(value.cache, at('cache'), details);
  const cacheRepo = nonEmpty(imageReference(value.cache_repo, at('cache_repo'), details));
  const paketoConfig = readPaketoConfig(value.paketo_config, at('paketo_config'), details);
  const packerTemplate = optionalString(value.packer_template, at('packer_template'), details);
  const builders = jsonArray(value.builders, at('builders'), details);
  const provisioners = jsonArray(value.provisioners, at('provisioners'), details);
  const postProcessors = jsonArray(value.post_processors, at('post_processors'), details);
  const variables = jsonObject(value.variables, at('variables'), details);
  const registryRepository = nonEmpty(
    imageReference(value.registry_repository, at('registry_repository'), details),
  );

  let buildx: Pick<BuildConfig, (typeof BUILDX_ONLY_KEYS)[number]> = {};
  if (type === 'buildx') {
    buildx = readBuildxFields(value, path, details);
  } else if (type !== undefined) {
    for (const key of BUILDX_ONLY_KEYS) {
      if (!isEmptyValue(value[key])) details[at(key)] = MANIFEST_MESSAGES.onlyForBuildx;
    }
  }

  const blank = (text: string | undefined): boolean => text === undefined || text.trim() === '';
  switch (type) {
    case 'kaniko':
      if (blank(dockerfile))
        details[at('dockerfile')] ??= MANIFEST_MESSAGES.kanikoDockerfileRequired;
      if (contextGiven === '') {
        details[at('build_context')] = MANIFEST_MESSAGES.kanikoContextRequired;
      }
      if (registryRepository === undefined && !output.repositoryFromElsewhere) {
        details[at('registry_repository')] ??= MANIFEST_MESSAGES.kanikoRegistryRepositoryRequired;
      }
      break;
    case 'buildx':
      if (blank(dockerfile))
        details[at('dockerfile')] ??= MANIFEST_MESSAGES.buildxDockerfileRequired;
      break;
    case 'paketo':
      if (paketoConfig?.builder === undefined || paketoConfig.builder === '') {
        details[at('paketo_config.builder')] ??= MANIFEST_MESSAGES.paketoBuilderRequired;
      }
      break;
    case 'packer':
      if (blank(packerTemplate)) {
        details[at('packer_template')] ??= MANIFEST_MESSAGES.packerTemplateRequired;
      } else if (packerTemplate !== undefined && builders !== undefined) {
        checkBuildersAgainstTemplate(packerTemplate, builders, at('builders'), details);
      }
      break;
    case 'container':
    case undefined:
      break;
  }

  if (
    buildType === undefined ||
    sbomTool === undefined ||
    scanTool === undefined ||
    registryType === undefined ||
    secretManagerType === undefined
  ) {
    return undefined;
  }
  return withoutUndefined({
    build_type: buildType,
    sbom_tool: sbomTool,
    scan_tool: scanTool,
    registry_type: registryType,
    secret_manager_type: secretManagerType,
    dockerfile,
    build_context: contextGiven === undefined || contextGiven === '' ? '.' : contextGiven,
    build_args: buildArgs,
    target,
    cache,
    cache_repo: cacheRepo,
    ...buildx,
    paketo_config: paketoConfig,
    packer_template: packerTemplate,
    builders,
    provisioners,
    post_processors: postProcessors,
    variables,
    registry_repository: registryRepository,
  });
}

function readBuildxFields(
  config: Json,
  path: string,
  details: Details,
): Pick<BuildConfig, (typeof BUILDX_ONLY_KEYS)[number]> {
  const platforms = stringArray(config.platforms, `${path}.platforms`, details);
  platforms?.forEach((platform, index) => {
    if (!PLATFORM_PATTERN.test(platform)) {
      details[`${path}.platforms.${index}`] =
        `"${platform}" must look like os/arch[/variant], for example linux/amd64 or linux/arm64/v8`;
    }
  });
  return {
    platforms,
    cache_to: nonEmpty(optionalString(config.cache_to, `${path}.cache_to`, details)?.trim()),
    cache_from: stringArray(config.cache_from, `${path}.cache_from`, details),
    secrets: stringMap(config.secrets, `${path}.secrets`, details),
  };
}

function readPaketoConfig(
  value: unknown,
  path: string,
  details: Details,
): PaketoConfig | undefined {
  if (isAbsent(value)) return undefined;
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

/** Only legacy JSON templates list `builders`; HCL2 (either syntax) is not checked here. */
function checkBuildersAgainstTemplate(
  template: string,
  builders: unknown[],
  path: string,
  details: Details,
): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(template);
  } catch {
    return;
  }
  if (!isPlainObject(parsed) || !Array.isArray(parsed.builders)) return;
  const declared = new Set(
    parsed.builders.flatMap((builder) =>
      isPlainObject(builder) && typeof builder.type === 'string' ? [builder.type] : [],
    ),
  );
  const problems = builders.flatMap((builder, index) => {
    if (!isPlainObject(builder) || typeof builder.type !== 'string') {
      return [`entry ${index} has no type`];
    }
    return declared.has(builder.type)
      ? []
      : [`type "${builder.type}" is not a builder of the template`];
  });
  if (problems.length > 0) {
    const known = declared.size > 0 ? [...declared].join(', ') : 'none';
    details[path] = `${problems.join('; ')} (template builders: ${known})`;
  }
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

/**
 * A list given as an array of strings or as one string, split on `separator` (also inside array
 * elements), trimmed, blanks dropped. Undefined when absent or of the wrong type.
 */
function splitList(
  value: unknown,
  separator: RegExp,
  path: string,
  details: Details,
): string[] | undefined {
  if (isAbsent(value)) return undefined;
  let parts: string[];
  if (typeof value === 'string') {
    parts = [value];
  } else if (Array.isArray(value)) {
    parts = [];
    value.forEach((element: unknown, index) => {
      if (typeof element === 'string') parts.push(element);
      else details[`${path}.${index}`] = 'must be a string';
    });
  } else {
    details[path] = 'must be an array of strings or a string';
    return undefined;
  }
  return parts
    .flatMap((part) => part.split(separator))
    .map((part) => part.trim())
    .filter((part) => part !== '');
}

function enumValue<T extends string>(
  value: unknown,
  allowed: readonly T[],
  path: string,
  details: Details,
): T | undefined {
  if (typeof value === 'string' && (allowed as readonly string[]).includes(value))
    return value as T;
  details[path] = `must be one of: ${allowed.join(', ')}`;
  return undefined;
}

function optionalString(value: unknown, path: string, details: Details): string | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value === 'string') return value;
  details[path] = 'must be a string';
  return undefined;
}

function boundedString(
  value: unknown,
  path: string,
  max: number,
  details: Details,
): string | undefined {
  const text = optionalString(value, path, details);
  if (text !== undefined && text.length > max) {
    details[path] = `must be at most ${max} characters`;
    return undefined;
  }
  return text;
}

/** Trimmed; empty stays empty (the caller decides whether it is required). */
function imageReference(value: unknown, path: string, details: Details): string | undefined {
  const text = optionalString(value, path, details)?.trim();
  if (text === undefined || text === '') return text;
  if (WHITESPACE.test(text) || text.length > IMAGE_REFERENCE_MAX) {
    details[path] =
      `must be an image reference without whitespace, at most ${IMAGE_REFERENCE_MAX} characters`;
    return undefined;
  }
  return text;
}

function optionalBoolean(value: unknown, path: string, details: Details): boolean | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value === 'boolean') return value;
  details[path] = 'must be a boolean';
  return undefined;
}

function stringArray(value: unknown, path: string, details: Details): string[] | undefined {
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) {
    details[path] = 'must be an array of strings';
    return undefined;
  }
  const strings: string[] = [];
  value.forEach((element: unknown, index) => {
    if (typeof element === 'string') strings.push(element.trim());
    else details[`${path}.${index}`] = 'must be a string';
  });
  return strings;
}

/** Keys become environment variable / build-arg names, so they must be usable as `KEY=value`. */
function stringMap(
  value: unknown,
  path: string,
  details: Details,
  options: { dropEmpty?: boolean } = {},
): Record<string, string> | undefined {
  if (isAbsent(value)) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object of string to string';
    return undefined;
  }
  const entries: [string, string][] = [];
  for (const [key, entry] of Object.entries(value)) {
    if (key === '' || key.includes('=') || WHITESPACE.test(key)) {
      const problem = `key "${key}" must be non-empty, without "=" or whitespace`;
      details[path] = details[path] === undefined ? problem : `${details[path]}; ${problem}`;
    } else if (typeof entry !== 'string') {
      details[`${path}.${key}`] = 'must be a string';
    } else if (!(options.dropEmpty === true && entry === '')) {
      entries.push([key, entry]);
    }
  }
  // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
  return Object.fromEntries(entries);
}

function jsonObject(value: unknown, path: string, details: Details): Json | undefined {
  if (isAbsent(value)) return undefined;
  if (!isPlainObject(value)) {
    details[path] = 'must be an object';
    return undefined;
  }
  return jsonCopy(value, path, details) as Json | undefined;
}

function jsonArray(value: unknown, path: string, details: Details): unknown[] | undefined {
  if (isAbsent(value)) return undefined;
  if (!Array.isArray(value)) {
    details[path] = 'must be an array';
    return undefined;
  }
  return jsonCopy(value, path, details) as unknown[] | undefined;
}

function jsonCopy(value: unknown, path: string, details: Details): unknown {
  const copy = copyJson(value, 0);
  if (copy !== NOT_JSON) return copy;
  details[path] = 'must contain JSON values only';
  return undefined;
}

const NOT_JSON = Symbol('not JSON');

/** A deep copy made of plain data, or NOT_JSON for anything JSON cannot hold. */
function copyJson(value: unknown, depth: number): unknown {
  if (depth > JSON_DEPTH_MAX) return NOT_JSON;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : NOT_JSON;
  if (Array.isArray(value)) {
    const copy = value.map((element: unknown) => copyJson(element, depth + 1));
    return copy.includes(NOT_JSON) ? NOT_JSON : copy;
  }
  if (!isPlainObject(value)) return NOT_JSON;
  const entries = Object.entries(value).map(
    ([key, entry]) => [key, copyJson(entry, depth + 1)] as const,
  );
  // fromEntries defines own properties, so a "__proto__" key stays data, never a prototype.
  return entries.some(([, entry]) => entry === NOT_JSON) ? NOT_JSON : Object.fromEntries(entries);
}

function rejectUnknownKeys(
  value: Json,
  allowed: readonly string[],
  path: string,
  details: Details,
): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) details[`${path}.${key}`] = MANIFEST_MESSAGES.notAllowed;
  }
}

function isPlainObject(value: unknown): value is Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  // Compared structurally, not with this realm's Object.prototype, so values from another
  // realm (vm contexts, worker messages) count as plain objects too.
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === null || Object.getPrototypeOf(prototype) === null;
}

/** An empty optional setting means "not set": leave it out rather than pass `--flag=`. */
function nonEmpty(text: string | undefined): string | undefined {
  return text === '' ? undefined : text;
}

function isAbsent(value: unknown): value is undefined | null {
  return value === undefined || value === null;
}

function isEmptyValue(value: unknown): boolean {
  if (isAbsent(value)) return true;
  if (typeof value === 'string') return value.trim() === '';
  if (Array.isArray(value)) return value.length === 0;
  return isPlainObject(value) && Object.keys(value).length === 0;
}

/** Optional fields that were not given are left out, so the stored snapshot has no nulls. */
function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as T;
}
