import type { Severity } from './severities.js';

/** The wizard manifest's vocabulary: method names, tool choices, the manifest's shape. */

export const METHOD_NAMES = ['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const;
export type MethodName = (typeof METHOD_NAMES)[number];
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

/** `build_config.scan_policy`: which findings fail a build (reason PolicyViolation). */
export interface ScanPolicy {
  /** The least severe severity that fails the build ('unknown' counts every finding). */
  fail_on?: Severity;
  /** Finding ids that never fail the build (CVE-… and GHSA-… match in any case). */
  ignore?: string[];
}

export interface BuildConfig {
  build_type: MethodName;
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
  /** Findings that fail the build (PolicyViolation); none: findings never fail it. */
  scan_policy?: ScanPolicy;
}

/** The normalised manifest kiln stores as the build's configuration snapshot. */
export interface BuildManifest {
  name: string;
  description: string;
  type: MethodName;
  base_image: string;
  instructions: string[];
  environment: Record<string, string>;
  tags: string[];
  metadata: Record<string, unknown>;
  build_config: BuildConfig;
}

export type ManifestResult =
  { ok: true; manifest: BuildManifest } | { ok: false; details: Record<string, string> };

/** What a manifest is checked against besides itself. */
export interface ManifestContext {
  /** The project's or kiln's default registry (`host[:port][/path]`), when one is configured. */
  readonly defaultRegistry?: string;
}

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
  secretInEnvironment: (method: string): string =>
    method === 'buildx'
      ? 'a secret reference in environment would be written into the image as a build argument: put it in build_config.secrets and mount it with RUN --mount=type=secret'
      : `a secret reference in environment would be written into the image of a ${method} build; only packer builds take secrets in environment`,
} as const;

/** Problems found in a manifest, keyed by field path (`manifest.build_config.dockerfile`). */
export type Details = Record<string, string>;
