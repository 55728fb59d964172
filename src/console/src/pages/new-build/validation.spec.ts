import { type Draft, emptyDraft } from './draft.js';
import { FIELD_STEPS, MESSAGES, fieldOf, problemsOf, stepsOf } from './validation.js';

function draft(patch: Partial<Draft>): Draft {
  return { ...emptyDraft(), project_id: 'p', ...patch };
}

describe('problemsOf', () => {
  it('asks a kaniko build for a Dockerfile and a registry repository, then a build context', () => {
    expect(problemsOf(draft({ type: 'kaniko' }), 'method-fields')).toEqual({
      'manifest.build_config.dockerfile': MESSAGES.kanikoDockerfileRequired,
      'manifest.build_config.registry_repository': MESSAGES.kanikoRegistryRepositoryRequired,
    });
    expect(problemsOf(draft({ type: 'kaniko', build_context: ' ' }), 'config')).toEqual({
      'manifest.build_config.build_context': 'Build context is required for Kaniko builds',
    });
    expect(problemsOf(draft({ type: 'buildx', build_context: '' }), 'config')).toEqual({});
  });

  it('uses the wizard messages word for word', () => {
    expect(MESSAGES).toMatchObject({
      baseImageRequired: 'Base image is required',
      instructionsRequired: 'At least one build instruction is required',
      kanikoDockerfileRequired: 'Dockerfile content is required for Kaniko builds',
      kanikoRegistryRepositoryRequired: 'Registry repository is required for Kaniko builds',
      paketoBuilderRequired: 'Buildpack builder selection is required for Paketo builds',
      packerTemplateRequired: 'Packer template is required for Packer builds',
    });
  });

  it('asks a container build for a base image and at least one non-blank instruction', () => {
    expect(
      problemsOf(draft({ type: 'container', instructions: '\n  \n' }), 'method-fields'),
    ).toEqual({
      'manifest.base_image': 'Base image is required',
      'manifest.instructions': 'At least one build instruction is required',
    });
    expect(
      problemsOf(
        draft({ type: 'container', base_image: 'alpine', instructions: 'RUN a' }),
        'method-fields',
      ),
    ).toEqual({});
  });

  it('asks buildx for Dockerfile content, paketo for a builder, packer for a template', () => {
    expect(problemsOf(draft({ type: 'buildx' }), 'method-fields')).toEqual({
      'manifest.build_config.dockerfile': 'Dockerfile content is required for Buildx builds',
    });
    expect(problemsOf(draft({ type: 'paketo' }), 'method-fields')).toEqual({
      'manifest.build_config.paketo_config.builder':
        'Buildpack builder selection is required for Paketo builds',
    });
    expect(problemsOf(draft({ type: 'paketo', paketo_tag: 'tiny' }), 'method-fields')).toEqual({});
    expect(problemsOf(draft({ type: 'packer', packer_template: '  ' }), 'method-fields')).toEqual({
      'manifest.build_config.packer_template': 'Packer template is required for Packer builds',
    });
  });

  it('refuses a JSON packer template that does not parse, and leaves HCL to the server', () => {
    const broken = problemsOf(
      draft({ type: 'packer', packer_template: '{"builders":' }),
      'method-fields',
    );
    expect(broken['manifest.build_config.packer_template']).toMatch(
      /^The template is not valid JSON/,
    );
    expect(
      problemsOf(draft({ type: 'packer', packer_template: 'source "x" "y" {' }), 'method-fields'),
    ).toEqual({});
  });

  it('requires a tag whatever the method, with the server’s message', () => {
    expect(problemsOf(draft({ type: 'paketo', tags: ' , ' }), 'tags')).toEqual({
      'manifest.tags': 'At least one tag is required',
    });
    expect(problemsOf(draft({ type: 'paketo', tags: 'v1' }), 'tags')).toEqual({});
  });

  it('requires a project, a method, and a branch and well-formed commit for the reference form', () => {
    expect(problemsOf(draft({ project_id: '' }), 'start')).toEqual({
      project_id: 'Choose a project',
    });
    expect(problemsOf(draft({}), 'method')).toEqual({ 'manifest.type': 'Choose a build method' });
    expect(problemsOf(draft({ form: 'repository', git_commit: 'xyz' }), 'source')).toEqual({
      git_branch: 'Branch is required',
      git_commit: 'A commit is 7 to 40 hexadecimal characters',
    });
  });
});

describe('stepsOf and fieldOf', () => {
  it('has three steps for a repository build and six for a manifest', () => {
    expect(stepsOf({ form: 'repository' })).toEqual(['start', 'source', 'review']);
    expect(stepsOf({ form: 'manifest' })).toEqual([
      'start',
      'method',
      'method-fields',
      'config',
      'tags',
      'review',
    ]);
  });

  it('maps a 400 detail key to the field that shows it, or to none', () => {
    expect(fieldOf('manifest.name')).toBe('manifest.name');
    expect(fieldOf('manifest.build_config.platforms.1')).toBe('manifest.build_config.platforms');
    expect(fieldOf('manifest.build_config.builders')).toBe('manifest.build_config.packer_template');
    expect(fieldOf('manifest.metadata')).toBeUndefined();
    expect(fieldOf('body')).toBeUndefined();
    expect(FIELD_STEPS[fieldOf('manifest.tags')!]).toBe('tags');
  });
});
