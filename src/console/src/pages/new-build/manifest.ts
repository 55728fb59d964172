import type { Draft, Method, Pair } from './draft.js';

/** Splits on commas and trims; empty entries are dropped (tags). */
export function splitCommas(text: string): string[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

/** One element per line, trimmed; blank lines are dropped (instructions). */
export function splitLines(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/**
 * Key/value rows as an object. Rows without a key are dropped (an editor's unfinished row), and
 * with `dropEmptyValues` rows without a value too (environment).
 */
export function toObject(pairs: readonly Pair[], dropEmptyValues = false): Record<string, string> {
  const object: Record<string, string> = {};
  for (const { key, value } of pairs) {
    const name = key.trim();
    if (name === '' || (dropEmptyValues && value === '')) continue;
    object[name] = value;
  }
  return object;
}

/** The Paketo builder image (`<builder_namespace>/builder:<tag>`), or '' if unchosen. */
export function paketoBuilder(draft: Pick<Draft, 'paketo_namespace' | 'paketo_tag'>): string {
  const namespace = draft.paketo_namespace.trim();
  return namespace === '' || draft.paketo_tag === ''
    ? ''
    : `${namespace}/builder:${draft.paketo_tag}`;
}

/** A JSON template is one whose first non-blank character is `{`; anything else is HCL2. */
export function isJsonTemplate(template: string): boolean {
  return template.trimStart().startsWith('{');
}

export type TemplateRead =
  | {
      readonly ok: true;
      readonly builders: unknown[];
      readonly provisioners: unknown[];
      readonly post_processors: unknown[];
    }
  | { readonly ok: false; readonly problem: string };

/**
 * A legacy JSON Packer template read in the browser: its builders, provisioners and
 * post-processors (the manifest sends them beside the template, "parsed from the template").
 * HCL2 is parsed only by the server.
 */
export function readJsonTemplate(template: string): TemplateRead {
  let parsed: unknown;
  try {
    parsed = JSON.parse(template);
  } catch (error) {
    return { ok: false, problem: `The template is not valid JSON: ${(error as Error).message}` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return { ok: false, problem: 'The template must be a JSON object' };
  }
  const list = (key: string): unknown[] => {
    const value = (parsed as Record<string, unknown>)[key];
    return Array.isArray(value) ? value : [];
  };
  return {
    ok: true,
    builders: list('builders'),
    provisioners: list('provisioners'),
    post_processors: list('post-processors'),
  };
}

/** POST /builds, reference form. */
export interface ReferenceBody {
  project_id: string;
  git_branch: string;
  git_commit?: string;
  build_args?: Record<string, string>;
}

/** POST /builds, wizard form. */
export interface WizardBody {
  tenant_id: string;
  project_id: string;
  manifest: Record<string, unknown>;
}

/** Adds `key: value` unless the value is empty ('' , [] or {}): optional fields are left out. */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  if (value === '' || value === undefined) return;
  if (Array.isArray(value) && value.length === 0) return;
  if (typeof value === 'object' && value !== null && Object.keys(value).length === 0) return;
  target[key] = value;
}

/** The request body the review step shows and "Create build" sends. */
export function requestBody(draft: Draft, tenantId: string): ReferenceBody | WizardBody {
  if (draft.form === 'repository') {
    const body: ReferenceBody = {
      project_id: draft.project_id,
      git_branch: draft.git_branch.trim(),
    };
    if (draft.git_commit.trim() !== '') body.git_commit = draft.git_commit.trim();
    const buildArgs = toObject(draft.build_args);
    if (Object.keys(buildArgs).length > 0) body.build_args = buildArgs;
    return body;
  }
  return { tenant_id: tenantId, project_id: draft.project_id, manifest: manifestOf(draft) };
}

/** The wizard's manifest: only the fields of the chosen method are sent. */
export function manifestOf(draft: Draft): Record<string, unknown> {
  const type = draft.type as Method;
  const usesImage = type !== 'kaniko';
  const config: Record<string, unknown> = {
    build_type: type,
    sbom_tool: draft.sbom_tool,
    scan_tool: draft.scan_tool,
    registry_type: draft.registry_type,
    secret_manager_type: draft.secret_manager_type,
    build_context: draft.build_context.trim(),
  };
  if (type === 'kaniko' || type === 'buildx' || type === 'container') {
    put(config, 'dockerfile', draft.dockerfile.trim() === '' ? '' : draft.dockerfile);
  }
  if (type === 'kaniko') put(config, 'registry_repository', draft.registry_repository.trim());
  if (type === 'buildx') {
    put(config, 'platforms', splitCommas(draft.platforms));
    put(config, 'cache_to', draft.cache_to.trim());
    // A cache source has commas of its own (`type=registry,ref=…`): one per line.
    put(config, 'cache_from', splitLines(draft.cache_from));
    put(config, 'secrets', toObject(draft.secrets));
  }
  if (type === 'paketo') {
    const paketo: Record<string, unknown> = { builder: paketoBuilder(draft) };
    put(paketo, 'buildpacks', splitCommas(draft.buildpacks));
    put(paketo, 'env', toObject(draft.paketo_env));
    put(paketo, 'build_args', toObject(draft.paketo_build_args));
    config['paketo_config'] = paketo;
  }
  if (type === 'packer') {
    put(
      config,
      'packer_template',
      draft.packer_template.trim() === '' ? '' : draft.packer_template,
    );
    if (isJsonTemplate(draft.packer_template)) {
      const read = readJsonTemplate(draft.packer_template);
      if (read.ok) {
        put(config, 'builders', read.builders);
        put(config, 'provisioners', read.provisioners);
        put(config, 'post_processors', read.post_processors);
      }
    }
  }
  put(config, 'target', draft.target.trim());
  config['cache'] = draft.cache;
  put(config, 'cache_repo', draft.cache_repo.trim());
  put(config, 'build_args', toObject(draft.manifest_build_args));
  put(config, 'variables', toObject(draft.variables));

  return {
    name: draft.name.trim(),
    description: draft.description,
    type,
    // The manifest's rule: an empty base image and no instructions for kaniko.
    base_image: usesImage ? draft.base_image.trim() : '',
    instructions: usesImage ? splitLines(draft.instructions) : [],
    environment: toObject(draft.environment, true),
    tags: splitCommas(draft.tags),
    metadata: {},
    build_config: config,
  };
}
