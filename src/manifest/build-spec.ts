import { createHash } from 'node:crypto';
import type { ScanPolicy } from './types.js';
import { stableJson } from '../common/stable-json.js';
import type {
  BuildConfig,
  BuildManifest,
  MethodName,
  RegistryType,
  SbomTool,
  ScanTool,
  SecretManagerType,
} from './types.js';

/** The method's own settings, as the manifest's build_config names them. */
export type MethodConfig = Omit<
  BuildConfig,
  | 'build_type'
  | 'sbom_tool'
  | 'scan_tool'
  | 'registry_type'
  | 'secret_manager_type'
  | 'build_context'
  | 'build_args'
  | 'registry_repository'
  | 'scan_policy'
> & {
  /** The manifest's base image and instructions (the `container` method builds from them). */
  base_image?: string;
  instructions?: string[];
};

export interface BuildSource {
  /** The project's git repository when the build was created; null when it had none. */
  readonly repository: string | null;
  /** Null: the repository's default branch. */
  readonly branch: string | null;
  /** Null: the branch's head when the build runs. */
  readonly commit: string | null;
  /** Build context, relative to the checkout. */
  readonly context: string;
}

export interface BuildOutput {
  /**
   * Where bare tags are pushed (`outputRepository`, decided at create); null when nothing named
   * one, and the image stays where it was built.
   */
  readonly repository: string | null;
  /** Bare tags or full references, as given; none means the build number is the tag. */
  readonly tags: readonly string[];
  readonly registryType: RegistryType | null;
}

/**
 * Everything a runner needs to run a build, captured once when the build is created and stored
 * with it (docs/adr/0011-layout-and-roles.md). A retry copies it. Runners read nothing else about
 * a build's content, and the Build resource's `spec` is its projection.
 */
export interface BuildSpec {
  readonly version: 1;
  /** `reference`: a project's repository with its own Dockerfile; `wizard`: a manifest. */
  readonly form: 'reference' | 'wizard';
  /** A reference-form build runs as kaniko with the repository's Dockerfile. */
  readonly method: MethodName;
  readonly config: MethodConfig;
  readonly source: BuildSource;
  readonly output: BuildOutput;
  readonly sbomTool: SbomTool | null;
  readonly scanTool: ScanTool | null;
  /**
   * `build_config.scan_policy`: findings that fail the build (PolicyViolation). Absent in specs
   * stored before scan policies existed, which means none.
   */
  readonly scanPolicy?: ScanPolicy | null;
  readonly secretManager: SecretManagerType | null;
  /** The manifest's `environment` (build-time variables). */
  readonly env: Readonly<Record<string, string>>;
  /** The manifest's `build_config.build_args`, or the reference form's `build_args`. */
  readonly buildArgs: Readonly<Record<string, string>>;
  readonly timeoutSeconds: number;
}

/**
 * The digest of what decides a build's output (docs/adr/0030-duplicate-builds.md): method and
 * its config, source, output, environment and build args. Names, metadata, the SBOM and scan
 * tools, the scan policy, the secret manager and the timeout do not change the image, so two
 * builds differing only there are duplicates. Secret values (stored sealed, which is randomised)
 * enter as `fingerprint`s, so equal values count as equal and the digest reveals none of them.
 * Two queued or running builds of one project with one digest are the same build twice (409).
 */
export function specDigest(spec: BuildSpec, fingerprint: (value: string) => string): string {
  const { secrets, ...config } = spec.config;
  const output = {
    method: spec.method,
    config: {
      ...config,
      ...(secrets === undefined
        ? {}
        : {
            secrets: Object.fromEntries(
              Object.entries(secrets).map(([id, value]) => [id, fingerprint(value)]),
            ),
          }),
    },
    source: spec.source,
    output: spec.output,
    env: spec.env,
    buildArgs: spec.buildArgs,
  };
  return createHash('sha256').update(stableJson(output)).digest('hex');
}

/** What a spec takes from the project and kiln's configuration at create. */
export interface SpecContext {
  readonly project: {
    readonly name: string;
    readonly gitRepositoryUrl: string | null;
    readonly defaultRegistry: string | null;
  };
  /** kiln's default registry, used when the project names none. */
  readonly defaultRegistry: string | undefined;
  readonly timeoutSeconds: number;
}

export function specOfManifest(manifest: BuildManifest, context: SpecContext): BuildSpec {
  const {
    build_type: method,
    sbom_tool: sbomTool,
    scan_tool: scanTool,
    registry_type: registryType,
    secret_manager_type: secretManager,
    build_context: buildContext,
    build_args: buildArgs,
    registry_repository: registryRepository,
    scan_policy: scanPolicy,
    ...config
  } = manifest.build_config;
  return {
    version: 1,
    form: 'wizard',
    method,
    config: {
      ...config,
      ...(manifest.base_image === '' ? {} : { base_image: manifest.base_image }),
      ...(manifest.instructions.length === 0 ? {} : { instructions: manifest.instructions }),
    },
    source: {
      repository: context.project.gitRepositoryUrl,
      branch: null,
      commit: null,
      context: buildContext === '' ? '.' : buildContext,
    },
    output: {
      repository: resolvedRepository(registryRepository, manifest.tags, context),
      tags: manifest.tags,
      registryType,
    },
    sbomTool,
    scanTool,
    scanPolicy: scanPolicy ?? null,
    secretManager,
    env: manifest.environment,
    buildArgs: buildArgs ?? {},
    timeoutSeconds: context.timeoutSeconds,
  };
}

/** A reference-form build: the repository's Dockerfile at a branch and commit, with build args. */
export function specOfReference(
  reference: {
    readonly branch: string | null;
    readonly commit: string | null;
    readonly buildArgs: Readonly<Record<string, string>> | null;
  },
  context: SpecContext,
): BuildSpec {
  return {
    version: 1,
    form: 'reference',
    method: 'kaniko',
    config: {},
    source: {
      repository: context.project.gitRepositoryUrl,
      branch: reference.branch,
      commit: reference.commit,
      context: '.',
    },
    output: {
      repository: resolvedRepository(undefined, [], context),
      tags: [],
      registryType: null,
    },
    sbomTool: null,
    scanTool: null,
    scanPolicy: null,
    secretManager: null,
    env: {},
    buildArgs: reference.buildArgs ?? {},
    timeoutSeconds: context.timeoutSeconds,
  };
}

function resolvedRepository(
  registryRepository: string | undefined,
  tags: readonly string[],
  context: SpecContext,
): string | null {
  return (
    outputRepository(
      registryRepository,
      tags,
      context.project.defaultRegistry ?? context.defaultRegistry,
      context.project.name,
    ) ?? null
  );
}

/**
 * The repository a build pushes to (docs/adr/0010-hardening.md, "The kaniko repository"): the
 * manifest's `registry_repository`, else the repository of the first tag that is a full image
 * reference, else `<default registry>/<project slug>`; undefined when none gives one.
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

/**
 * Where each tag is pushed: a full reference as given; a bare tag under the output repository.
 * With no repository, bare tags are not pushed and the image stays where it was built.
 */
export function pushTargets(output: BuildOutput, buildNumber: number): string[] {
  const wanted = output.tags.length === 0 ? [String(buildNumber)] : output.tags;
  const targets: string[] = [];
  for (const tag of wanted) {
    if (repositoryOfReference(tag) !== undefined) targets.push(tag);
    else if (output.repository !== null) targets.push(`${output.repository}:${tag}`);
  }
  return targets;
}

function slug(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'project'
  );
}
