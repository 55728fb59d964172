import type { Draft } from './draft.js';
import {
  isJsonTemplate,
  paketoBuilder,
  readJsonTemplate,
  splitCommas,
  splitLines,
} from './manifest.js';

/**
 * The wizard's messages. The first seven are the service specification's, word for word. It
 * says "Tags are required for all methods" without a message: the server's is used, so both say
 * the same. Buildx's is the server's too (it needs Dockerfile content; the specification has no
 * line for it).
 */
export const MESSAGES = {
  baseImageRequired: 'Base image is required',
  instructionsRequired: 'At least one build instruction is required',
  kanikoDockerfileRequired: 'Dockerfile content is required for Kaniko builds',
  kanikoContextRequired: 'Build context is required for Kaniko builds',
  kanikoRegistryRepositoryRequired: 'Registry repository is required for Kaniko builds',
  paketoBuilderRequired: 'Buildpack builder selection is required for Paketo builds',
  packerTemplateRequired: 'Packer template is required for Packer builds',
  tagsRequired: 'At least one tag is required',
  buildxDockerfileRequired: 'Dockerfile content is required for Buildx builds',
  projectRequired: 'Choose a project',
  methodRequired: 'Choose a build method',
  branchRequired: 'Branch is required',
  commitShape: 'A commit is 7 to 40 hexadecimal characters',
} as const;

export type StepId = 'start' | 'source' | 'method' | 'method-fields' | 'config' | 'tags' | 'review';

export const STEP_TITLES: Record<StepId, string> = {
  start: 'Project and form',
  source: 'Source',
  method: 'Build method',
  'method-fields': 'Method settings',
  config: 'Build configuration',
  tags: 'Tags and environment',
  review: 'Review',
};

/** The steps of the draft's form, in order. */
export function stepsOf(draft: Pick<Draft, 'form'>): StepId[] {
  return draft.form === 'repository'
    ? ['start', 'source', 'review']
    : ['start', 'method', 'method-fields', 'config', 'tags', 'review'];
}

/**
 * Every field the wizard shows, named by the path the API uses for it in a 400's `details`
 * (`manifest.build_config.dockerfile`), with the step that holds it.
 */
export const FIELD_STEPS = {
  project_id: 'start',
  git_branch: 'source',
  git_commit: 'source',
  build_args: 'source',
  'manifest.type': 'method',
  'manifest.name': 'method',
  'manifest.description': 'method',
  'manifest.base_image': 'method-fields',
  'manifest.instructions': 'method-fields',
  'manifest.build_config.dockerfile': 'method-fields',
  'manifest.build_config.registry_repository': 'method-fields',
  'manifest.build_config.platforms': 'method-fields',
  'manifest.build_config.cache_to': 'method-fields',
  'manifest.build_config.cache_from': 'method-fields',
  'manifest.build_config.secrets': 'method-fields',
  'manifest.build_config.paketo_config.builder': 'method-fields',
  'manifest.build_config.paketo_config.buildpacks': 'method-fields',
  'manifest.build_config.paketo_config.env': 'method-fields',
  'manifest.build_config.paketo_config.build_args': 'method-fields',
  'manifest.build_config.packer_template': 'method-fields',
  'manifest.build_config.sbom_tool': 'config',
  'manifest.build_config.scan_tool': 'config',
  'manifest.build_config.registry_type': 'config',
  'manifest.build_config.secret_manager_type': 'config',
  'manifest.build_config.build_context': 'config',
  'manifest.build_config.target': 'config',
  'manifest.build_config.cache': 'config',
  'manifest.build_config.cache_repo': 'config',
  'manifest.build_config.build_args': 'config',
  'manifest.build_config.variables': 'config',
  'manifest.tags': 'tags',
  'manifest.environment': 'tags',
} as const satisfies Record<string, StepId>;

export type FieldId = keyof typeof FIELD_STEPS;
export type Problems = Partial<Record<FieldId, string>>;

/** Server paths shown on another field: the packer entries are read from the template. */
const ALIASES: Record<string, FieldId> = {
  'manifest.build_config.builders': 'manifest.build_config.packer_template',
  'manifest.build_config.provisioners': 'manifest.build_config.packer_template',
  'manifest.build_config.post_processors': 'manifest.build_config.packer_template',
  'manifest.build_config.paketo_config': 'manifest.build_config.paketo_config.builder',
  'manifest.build_config.build_type': 'manifest.type',
};

/**
 * The field a 400's detail key belongs to: the field itself, or the field holding it
 * (`manifest.build_config.platforms.1` → platforms), or undefined when no field shows it.
 */
export function fieldOf(detailKey: string): FieldId | undefined {
  let key = detailKey;
  for (;;) {
    if (key in FIELD_STEPS) return key as FieldId;
    if (key in ALIASES) return ALIASES[key];
    const dot = key.lastIndexOf('.');
    if (dot < 0) return undefined;
    key = key.slice(0, dot);
  }
}

/**
 * What stops the user leaving `step`: each of the wizard's conditions (and the reference form's own
 * required fields) that applies to the draft, keyed by the field it is shown beside.
 *
 * The wizard's rules ask "not kaniko" methods for a base image and instructions, but its
 * manifest has the wizard send `base_image: ""` for paketo and packer: like the server
 * (src/build-methods/container.ts), only `container`, which builds from them, requires them.
 */
export function problemsOf(draft: Draft, step: StepId): Problems {
  const problems: Problems = {};
  switch (step) {
    case 'start':
      if (draft.project_id === '') problems.project_id = MESSAGES.projectRequired;
      break;
    case 'source':
      if (draft.git_branch.trim() === '') problems.git_branch = MESSAGES.branchRequired;
      if (draft.git_commit.trim() !== '' && !/^[0-9a-f]{7,40}$/i.test(draft.git_commit.trim()))
        problems.git_commit = MESSAGES.commitShape;
      break;
    case 'method':
      if (draft.type === '') problems['manifest.type'] = MESSAGES.methodRequired;
      break;
    case 'method-fields':
      methodProblems(draft, problems);
      break;
    case 'config':
      if (draft.type === 'kaniko' && draft.build_context.trim() === '')
        problems['manifest.build_config.build_context'] = MESSAGES.kanikoContextRequired;
      break;
    case 'tags':
      if (splitCommas(draft.tags).length === 0) problems['manifest.tags'] = MESSAGES.tagsRequired;
      break;
    case 'review':
      break;
  }
  return problems;
}

function methodProblems(draft: Draft, problems: Problems): void {
  const blank = (text: string) => text.trim() === '';
  switch (draft.type) {
    case 'kaniko':
      if (blank(draft.dockerfile))
        problems['manifest.build_config.dockerfile'] = MESSAGES.kanikoDockerfileRequired;
      if (blank(draft.registry_repository))
        problems['manifest.build_config.registry_repository'] =
          MESSAGES.kanikoRegistryRepositoryRequired;
      break;
    case 'buildx':
      if (blank(draft.dockerfile))
        problems['manifest.build_config.dockerfile'] = MESSAGES.buildxDockerfileRequired;
      break;
    case 'container':
      if (blank(draft.base_image)) problems['manifest.base_image'] = MESSAGES.baseImageRequired;
      if (splitLines(draft.instructions).length === 0)
        problems['manifest.instructions'] = MESSAGES.instructionsRequired;
      break;
    case 'paketo':
      if (paketoBuilder(draft) === '')
        problems['manifest.build_config.paketo_config.builder'] = MESSAGES.paketoBuilderRequired;
      break;
    case 'packer':
      if (blank(draft.packer_template)) {
        problems['manifest.build_config.packer_template'] = MESSAGES.packerTemplateRequired;
      } else if (isJsonTemplate(draft.packer_template)) {
        const read = readJsonTemplate(draft.packer_template);
        if (!read.ok) problems['manifest.build_config.packer_template'] = read.problem;
      }
      break;
    case '':
      break;
  }
}
