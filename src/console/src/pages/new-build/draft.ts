/**
 * What the New build wizard edits: one flat draft for both request forms of POST /builds (spec
 * 4.1 reference form, 2.7 wizard form). Lists are kept as the text the user typed and objects as
 * key/value rows; manifest.ts turns the draft into the request body.
 */

export const METHODS = ['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const;
export type Method = (typeof METHODS)[number];
export const SBOM_TOOLS = ['syft', 'grype', 'trivy'] as const;
export const SCAN_TOOLS = ['trivy', 'clair', 'grype', 'snyk'] as const;
export const REGISTRY_TYPES = ['s3', 'harbor', 'quay', 'artifactory'] as const;
export const SECRET_MANAGER_TYPES = ['vault', 'aws_secretsmanager', 'azure_keyvault'] as const;
/** The three Paketo builders the wizard offers, as `<namespace>/builder:<tag>`. */
export const PAKETO_TAGS = ['base', 'full', 'tiny'] as const;
export const PAKETO_NAMESPACE = 'paketobuildpacks';

/** One row of a key=value editor. */
export interface Pair {
  readonly key: string;
  readonly value: string;
}

export interface Draft {
  /** `repository`: the reference form (a branch of the project's repository); else a manifest. */
  readonly form: 'repository' | 'manifest';
  readonly project_id: string;
  // Reference form.
  readonly git_branch: string;
  readonly git_commit: string;
  readonly build_args: readonly Pair[];
  // Manifest.
  readonly type: Method | '';
  readonly name: string;
  readonly description: string;
  readonly base_image: string;
  /** One instruction per line. */
  readonly instructions: string;
  readonly dockerfile: string;
  readonly registry_repository: string;
  /** Comma-separated. */
  readonly platforms: string;
  readonly cache_to: string;
  /** One per line. */
  readonly cache_from: string;
  readonly secrets: readonly Pair[];
  readonly paketo_namespace: string;
  readonly paketo_tag: (typeof PAKETO_TAGS)[number] | '';
  /** Comma-separated. */
  readonly buildpacks: string;
  readonly paketo_env: readonly Pair[];
  readonly paketo_build_args: readonly Pair[];
  readonly packer_template: string;
  readonly sbom_tool: (typeof SBOM_TOOLS)[number];
  readonly scan_tool: (typeof SCAN_TOOLS)[number];
  readonly registry_type: (typeof REGISTRY_TYPES)[number];
  readonly secret_manager_type: (typeof SECRET_MANAGER_TYPES)[number];
  readonly build_context: string;
  readonly target: string;
  readonly cache: boolean;
  readonly cache_repo: string;
  readonly manifest_build_args: readonly Pair[];
  readonly variables: readonly Pair[];
  /** Comma-separated. */
  readonly tags: string;
  readonly environment: readonly Pair[];
}

/** A new draft: the spec's defaults (build context `.`, Paketo namespace) and the first tools. */
export function emptyDraft(): Draft {
  return {
    form: 'manifest',
    project_id: '',
    git_branch: '',
    git_commit: '',
    build_args: [],
    type: '',
    name: '',
    description: '',
    base_image: '',
    instructions: '',
    dockerfile: '',
    registry_repository: '',
    platforms: '',
    cache_to: '',
    cache_from: '',
    secrets: [],
    paketo_namespace: PAKETO_NAMESPACE,
    paketo_tag: '',
    buildpacks: '',
    paketo_env: [],
    paketo_build_args: [],
    packer_template: '',
    sbom_tool: 'syft',
    scan_tool: 'trivy',
    registry_type: 'harbor',
    secret_manager_type: 'vault',
    build_context: '.',
    target: '',
    cache: false,
    cache_repo: '',
    manifest_build_args: [],
    variables: [],
    tags: '',
    environment: [],
  };
}
