import { basename } from 'node:path';
import { UsageError } from './exit-codes.js';
import { keyValues } from './commands/common.js';
import { readInput, readText } from './commands/files.js';

/** The flags of `kiln build create` and `kiln build run` that say what to build. */
export interface BuildFlags {
  project?: string;
  branch?: string;
  commit?: string;
  buildArg: string[];
  file?: string;
  method?: string;
  name?: string;
  description?: string;
  dockerfile?: string;
  context?: string;
  tag: string[];
  baseImage?: string;
  instruction: string[];
  env: string[];
  label: string[];
  target?: string;
  platform: string[];
  registryRepository?: string;
  registryType: string;
  secretManager: string;
  sbomTool: string;
  scanTool: string;
  cache?: boolean;
  cacheRepo?: string;
  cacheTo?: string;
  cacheFrom: string[];
  secret: string[];
  builder?: string;
  buildpack: string[];
  packerTemplate?: string;
  var: string[];
  failOn?: string;
  ignore: string[];
}

/** The manifest flags: any of them (or -f) chooses the wizard form over the reference form. */
const MANIFEST_FLAGS = [
  'method',
  'name',
  'description',
  'dockerfile',
  'context',
  'baseImage',
  'target',
  'registryRepository',
  'cacheRepo',
  'cacheTo',
  'builder',
  'packerTemplate',
  'failOn',
] as const satisfies ReadonlyArray<keyof BuildFlags>;
const MANIFEST_LISTS = [
  'tag',
  'instruction',
  'env',
  'label',
  'platform',
  'cacheFrom',
  'secret',
  'buildpack',
  'var',
  'ignore',
] as const satisfies ReadonlyArray<keyof BuildFlags>;

export type CreateBody =
  | {
      readonly form: 'reference';
      readonly body: {
        project_id: string;
        git_branch: string;
        git_commit?: string;
        build_args?: Record<string, string>;
      };
    }
  | {
      readonly form: 'wizard';
      readonly body: { tenant_id: string; project_id: string; manifest: Record<string, unknown> };
    };

/**
 * The manifest in a file (or `-`): the manifest itself, or a whole wizard-form create body
 * (`{tenant_id, project_id, manifest}`), whose project is then the default.
 */
export async function manifestFromFile(
  path: string,
): Promise<{ manifest: Record<string, unknown>; projectId?: string }> {
  const document = await readInput(path);
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new UsageError(`${path}: a build manifest is an object`);
  }
  const record = document as Record<string, unknown>;
  if (typeof record['manifest'] === 'object' && record['manifest'] !== null) {
    const projectId = typeof record['project_id'] === 'string' ? record['project_id'] : undefined;
    return {
      manifest: record['manifest'] as Record<string, unknown>,
      ...(projectId === undefined ? {} : { projectId }),
    };
  }
  return { manifest: record };
}

/** The manifest flags given (not -f). */
export function manifestFlagsGiven(flags: BuildFlags): string[] {
  return [
    ...MANIFEST_FLAGS.filter((flag) => flags[flag] !== undefined),
    ...MANIFEST_LISTS.filter((flag) => flags[flag].length > 0),
  ];
}

export function wantsManifest(flags: BuildFlags): boolean {
  return flags.file !== undefined || manifestFlagsGiven(flags).length > 0;
}

/**
 * The spec's §2.7 manifest from flags: file contents for --dockerfile and --packer-template,
 * the four required choices defaulted (syft, trivy, harbor, vault), and nothing sent that was
 * not given, so kiln's own defaults and messages apply.
 */
export async function manifestFromFlags(flags: BuildFlags): Promise<Record<string, unknown>> {
  if (flags.method === undefined) {
    throw new UsageError(
      '--method is required for a manifest build (kaniko, buildx, container, paketo, packer)',
    );
  }
  const method = flags.method;
  const buildArgs = keyValues(flags.buildArg, '--build-arg');
  const secrets = keyValues(flags.secret, '--secret');
  const variables = keyValues(flags.var, '--var');
  const buildConfig: Record<string, unknown> = {
    build_type: method,
    sbom_tool: flags.sbomTool,
    scan_tool: flags.scanTool,
    registry_type: flags.registryType,
    secret_manager_type: flags.secretManager,
    build_context: flags.context ?? '.',
    ...(flags.dockerfile === undefined ? {} : { dockerfile: await readText(flags.dockerfile) }),
    ...(Object.keys(buildArgs).length === 0 ? {} : { build_args: buildArgs }),
    ...(flags.target === undefined ? {} : { target: flags.target }),
    ...(flags.cache === undefined ? {} : { cache: flags.cache }),
    ...(flags.cacheRepo === undefined ? {} : { cache_repo: flags.cacheRepo }),
    ...(flags.platform.length === 0 ? {} : { platforms: flags.platform }),
    ...(flags.cacheTo === undefined ? {} : { cache_to: flags.cacheTo }),
    ...(flags.cacheFrom.length === 0 ? {} : { cache_from: flags.cacheFrom }),
    ...(Object.keys(secrets).length === 0 ? {} : { secrets }),
    ...(flags.builder === undefined && flags.buildpack.length === 0
      ? {}
      : { paketo_config: { builder: flags.builder ?? '', buildpacks: flags.buildpack } }),
    ...(flags.packerTemplate === undefined
      ? {}
      : { packer_template: await readText(flags.packerTemplate) }),
    ...(Object.keys(variables).length === 0 ? {} : { variables }),
    ...(flags.registryRepository === undefined
      ? {}
      : { registry_repository: flags.registryRepository }),
    ...(flags.failOn === undefined && flags.ignore.length === 0
      ? {}
      : {
          scan_policy: {
            ...(flags.failOn === undefined ? {} : { fail_on: flags.failOn }),
            ignore: flags.ignore,
          },
        }),
  };
  return {
    name: flags.name ?? (flags.dockerfile === undefined ? method : basename(flags.dockerfile)),
    description: flags.description ?? '',
    type: method,
    base_image: flags.baseImage ?? '',
    instructions: flags.instruction,
    environment: keyValues(flags.env, '--env'),
    tags: flags.tag,
    metadata: keyValues(flags.label, '--label'),
    build_config: buildConfig,
  };
}
