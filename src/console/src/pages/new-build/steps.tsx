import {
  type Draft,
  METHODS,
  PAKETO_TAGS,
  REGISTRY_TYPES,
  SBOM_TOOLS,
  SCAN_TOOLS,
  SECRET_MANAGER_TYPES,
} from './draft.js';
import { CheckboxField, PairsField, RadioField, SelectField, TextField } from './fields.js';
import { isJsonTemplate } from './manifest.js';
import type { FieldId } from './validation.js';

/** What every step gets: the draft, a way to change it, and each field's message. */
export interface StepProps {
  readonly draft: Draft;
  /** Changes the draft from `field` (which clears what the server said about that field). */
  readonly change: (field: FieldId | 'form', patch: Partial<Draft>) => void;
  readonly errorOf: (field: FieldId) => string | undefined;
}

/** The draft's free-text fields. */
type TextKey = { [K in keyof Draft]: Draft[K] extends string ? K : never }[keyof Draft];

const choices = (values: readonly string[]) => values.map((value) => ({ value, label: value }));

const METHOD_LABELS: Record<(typeof METHODS)[number], string> = {
  kaniko: 'kaniko: an inline Dockerfile, built by Kaniko',
  buildx: 'buildx: an inline Dockerfile, built by BuildKit (platforms, cache, secrets)',
  container: 'container: a base image and instructions, one per line',
  paketo: 'paketo: Cloud Native Buildpacks, no Dockerfile',
  packer: 'packer: a Packer template (HCL or JSON)',
};

export function StartStep({
  draft,
  change,
  errorOf,
  projects,
}: StepProps & { projects: ReadonlyArray<{ id: string; name: string }> | undefined }) {
  return (
    <>
      <RadioField
        field="form"
        label="What to build"
        value={draft.form}
        onValue={(form) => change('form', { form: form === 'repository' ? form : 'manifest' })}
        options={[
          { value: 'manifest', label: 'From a build manifest: method, image settings and tags' },
          { value: 'repository', label: 'From the project’s repository: a branch and commit' },
        ]}
      />
      <SelectField
        field="project_id"
        label="Project"
        error={errorOf('project_id')}
        hint={projects?.length === 0 ? 'This tenant has no project yet.' : undefined}
        value={draft.project_id}
        onValue={(project_id) => change('project_id', { project_id })}
        options={[
          { value: '', label: projects === undefined ? 'Loading projects…' : 'Choose a project' },
          ...(projects ?? []).map((project) => ({ value: project.id, label: project.name })),
        ]}
      />
    </>
  );
}

export function SourceStep({ draft, change, errorOf }: StepProps) {
  return (
    <>
      <TextField
        field="git_branch"
        label="Branch"
        error={errorOf('git_branch')}
        value={draft.git_branch}
        onValue={(git_branch) => change('git_branch', { git_branch })}
      />
      <TextField
        field="git_commit"
        label="Commit (optional)"
        hint="A SHA-1, 7 to 40 hexadecimal characters. Without it, the branch’s latest commit."
        error={errorOf('git_commit')}
        value={draft.git_commit}
        onValue={(git_commit) => change('git_commit', { git_commit })}
      />
      <PairsField
        field="build_args"
        label="Build arguments"
        error={errorOf('build_args')}
        pairs={draft.build_args}
        onValue={(build_args) => change('build_args', { build_args })}
      />
    </>
  );
}

export function MethodStep({ draft, change, errorOf }: StepProps) {
  return (
    <>
      <RadioField
        field="manifest.type"
        label="Build method"
        error={errorOf('manifest.type')}
        value={draft.type}
        onValue={(type) => change('manifest.type', { type: METHODS.find((m) => m === type) ?? '' })}
        options={METHODS.map((method) => ({ value: method, label: METHOD_LABELS[method] }))}
      />
      <TextField
        field="manifest.name"
        label="Name (optional)"
        error={errorOf('manifest.name')}
        value={draft.name}
        onValue={(name) => change('manifest.name', { name })}
      />
      <TextField
        field="manifest.description"
        label="Description (optional)"
        rows={2}
        error={errorOf('manifest.description')}
        value={draft.description}
        onValue={(description) => change('manifest.description', { description })}
      />
    </>
  );
}

/** The fields of the chosen method only (the manifest says which field applies to which method). */
export function MethodFieldsStep(props: StepProps) {
  const { draft, change, errorOf } = props;
  const type = draft.type;
  const text = (field: FieldId, key: TextKey, label: string, extra = {}) => (
    <TextField
      field={field}
      label={label}
      error={errorOf(field)}
      value={draft[key]}
      onValue={(value) => change(field, { [key]: value })}
      {...extra}
    />
  );
  return (
    <>
      {(type === 'kaniko' || type === 'buildx') &&
        text('manifest.build_config.dockerfile', 'dockerfile', 'Dockerfile', { rows: 8 })}
      {type === 'container' &&
        text(
          'manifest.build_config.dockerfile',
          'dockerfile',
          'Dockerfile path or content (optional)',
          {
            rows: 3,
            hint: 'Kept with the build. A container build’s Dockerfile is written from the base image and instructions below.',
          },
        )}
      {type === 'kaniko' &&
        text(
          'manifest.build_config.registry_repository',
          'registry_repository',
          'Registry repository',
          { hint: 'Where the image is pushed, for example registry.example.com/team/app' },
        )}
      {type !== 'kaniko' &&
        text(
          'manifest.base_image',
          'base_image',
          type === 'container' ? 'Base image' : 'Base image (optional)',
          { hint: 'For example docker.io/library/alpine:3.20' },
        )}
      {type !== 'kaniko' &&
        text(
          'manifest.instructions',
          'instructions',
          type === 'container' ? 'Instructions' : 'Instructions (optional)',
          { rows: 5, hint: 'One Dockerfile instruction per line; blank lines are left out.' },
        )}
      {type === 'buildx' && <BuildxFields {...props} />}
      {type === 'paketo' && <PaketoFields {...props} />}
      {type === 'packer' &&
        text('manifest.build_config.packer_template', 'packer_template', 'Packer template', {
          rows: 10,
          hint:
            draft.packer_template.trim() !== '' && !isJsonTemplate(draft.packer_template)
              ? 'HCL: the server checks it when the build is created.'
              : 'HCL or JSON. A JSON template is checked here; HCL by the server when the build is created.',
        })}
    </>
  );
}

function BuildxFields({ draft, change, errorOf }: StepProps) {
  return (
    <>
      <TextField
        field="manifest.build_config.platforms"
        label="Platforms (optional)"
        hint="Separated by commas, for example linux/amd64, linux/arm64"
        error={errorOf('manifest.build_config.platforms')}
        value={draft.platforms}
        onValue={(platforms) => change('manifest.build_config.platforms', { platforms })}
      />
      <TextField
        field="manifest.build_config.cache_to"
        label="Cache to (optional)"
        hint="For example type=registry,ref=registry.example.com/team/app:cache,mode=max"
        error={errorOf('manifest.build_config.cache_to')}
        value={draft.cache_to}
        onValue={(cache_to) => change('manifest.build_config.cache_to', { cache_to })}
      />
      <TextField
        field="manifest.build_config.cache_from"
        label="Cache from (optional)"
        hint="One cache source per line"
        rows={2}
        error={errorOf('manifest.build_config.cache_from')}
        value={draft.cache_from}
        onValue={(cache_from) => change('manifest.build_config.cache_from', { cache_from })}
      />
      <PairsField
        field="manifest.build_config.secrets"
        label="Secrets"
        hint="Mounted with RUN --mount=type=secret,id=<name>. A value may be a secret manager reference."
        error={errorOf('manifest.build_config.secrets')}
        pairs={draft.secrets}
        onValue={(secrets) => change('manifest.build_config.secrets', { secrets })}
      />
    </>
  );
}

function PaketoFields({ draft, change, errorOf }: StepProps) {
  const builder = 'manifest.build_config.paketo_config.builder';
  return (
    <>
      <TextField
        field="paketo_namespace"
        label="Builder namespace"
        value={draft.paketo_namespace}
        onValue={(paketo_namespace) => change(builder, { paketo_namespace })}
      />
      <RadioField
        field={builder}
        label="Builder"
        error={errorOf(builder)}
        value={draft.paketo_tag}
        onValue={(tag) => change(builder, { paketo_tag: PAKETO_TAGS.find((t) => t === tag) ?? '' })}
        options={PAKETO_TAGS.map((tag) => ({
          value: tag,
          label: (
            <code>
              {draft.paketo_namespace.trim() || '<namespace>'}/builder:{tag}
            </code>
          ),
        }))}
      />
      <TextField
        field="manifest.build_config.paketo_config.buildpacks"
        label="Buildpacks (optional)"
        hint="Separated by commas; none: the builder detects them"
        error={errorOf('manifest.build_config.paketo_config.buildpacks')}
        value={draft.buildpacks}
        onValue={(buildpacks) =>
          change('manifest.build_config.paketo_config.buildpacks', { buildpacks })
        }
      />
      <PairsField
        field="manifest.build_config.paketo_config.env"
        label="Buildpack environment"
        error={errorOf('manifest.build_config.paketo_config.env')}
        pairs={draft.paketo_env}
        onValue={(paketo_env) => change('manifest.build_config.paketo_config.env', { paketo_env })}
      />
      <PairsField
        field="manifest.build_config.paketo_config.build_args"
        label="Buildpack build arguments"
        error={errorOf('manifest.build_config.paketo_config.build_args')}
        pairs={draft.paketo_build_args}
        onValue={(paketo_build_args) =>
          change('manifest.build_config.paketo_config.build_args', { paketo_build_args })
        }
      />
    </>
  );
}

export function ConfigStep({ draft, change, errorOf }: StepProps) {
  return (
    <>
      <SelectField
        field="manifest.build_config.sbom_tool"
        label="SBOM tool"
        error={errorOf('manifest.build_config.sbom_tool')}
        value={draft.sbom_tool}
        onValue={(value) =>
          change('manifest.build_config.sbom_tool', {
            sbom_tool: SBOM_TOOLS.find((t) => t === value) ?? 'syft',
          })
        }
        options={choices(SBOM_TOOLS)}
      />
      <SelectField
        field="manifest.build_config.scan_tool"
        label="Scan tool"
        error={errorOf('manifest.build_config.scan_tool')}
        value={draft.scan_tool}
        onValue={(value) =>
          change('manifest.build_config.scan_tool', {
            scan_tool: SCAN_TOOLS.find((t) => t === value) ?? 'trivy',
          })
        }
        options={choices(SCAN_TOOLS)}
      />
      <SelectField
        field="manifest.build_config.registry_type"
        label="Registry type"
        error={errorOf('manifest.build_config.registry_type')}
        value={draft.registry_type}
        onValue={(value) =>
          change('manifest.build_config.registry_type', {
            registry_type: REGISTRY_TYPES.find((t) => t === value) ?? 'harbor',
          })
        }
        options={choices(REGISTRY_TYPES)}
      />
      <SelectField
        field="manifest.build_config.secret_manager_type"
        label="Secret manager"
        error={errorOf('manifest.build_config.secret_manager_type')}
        value={draft.secret_manager_type}
        onValue={(value) =>
          change('manifest.build_config.secret_manager_type', {
            secret_manager_type: SECRET_MANAGER_TYPES.find((t) => t === value) ?? 'vault',
          })
        }
        options={choices(SECRET_MANAGER_TYPES)}
      />
      <TextField
        field="manifest.build_config.build_context"
        label="Build context"
        error={errorOf('manifest.build_config.build_context')}
        value={draft.build_context}
        onValue={(build_context) =>
          change('manifest.build_config.build_context', { build_context })
        }
      />
      <TextField
        field="manifest.build_config.target"
        label="Target stage (optional)"
        error={errorOf('manifest.build_config.target')}
        value={draft.target}
        onValue={(target) => change('manifest.build_config.target', { target })}
      />
      <CheckboxField
        field="manifest.build_config.cache"
        label="Use the build cache"
        checked={draft.cache}
        onValue={(cache) => change('manifest.build_config.cache', { cache })}
      />
      <TextField
        field="manifest.build_config.cache_repo"
        label="Cache repository (optional)"
        error={errorOf('manifest.build_config.cache_repo')}
        value={draft.cache_repo}
        onValue={(cache_repo) => change('manifest.build_config.cache_repo', { cache_repo })}
      />
      <PairsField
        field="manifest.build_config.build_args"
        label="Build arguments"
        error={errorOf('manifest.build_config.build_args')}
        pairs={draft.manifest_build_args}
        onValue={(manifest_build_args) =>
          change('manifest.build_config.build_args', { manifest_build_args })
        }
      />
      <PairsField
        field="manifest.build_config.variables"
        label="Variables"
        error={errorOf('manifest.build_config.variables')}
        pairs={draft.variables}
        onValue={(variables) => change('manifest.build_config.variables', { variables })}
      />
    </>
  );
}

export function TagsStep({ draft, change, errorOf }: StepProps) {
  return (
    <>
      <TextField
        field="manifest.tags"
        label="Tags"
        hint="Separated by commas, for example latest, v1.2.0"
        error={errorOf('manifest.tags')}
        value={draft.tags}
        onValue={(tags) => change('manifest.tags', { tags })}
      />
      <PairsField
        field="manifest.environment"
        label="Environment"
        hint="Build-time environment variables; entries with an empty value are not sent."
        error={errorOf('manifest.environment')}
        pairs={draft.environment}
        onValue={(environment) => change('manifest.environment', { environment })}
      />
    </>
  );
}
