import { type Draft, emptyDraft } from './draft.js';
import {
  manifestOf,
  paketoBuilder,
  readJsonTemplate,
  requestBody,
  splitCommas,
  splitLines,
  toObject,
} from './manifest.js';

const TENANT = '11111111-1111-4111-8111-111111111111';
const PROJECT = '22222222-2222-4222-8222-222222222222';

function draft(patch: Partial<Draft>): Draft {
  return { ...emptyDraft(), project_id: PROJECT, ...patch };
}

describe('splitting what the user typed', () => {
  it('splits tags on commas, trims them and drops empty entries', () => {
    expect(splitCommas(' latest, v1 ,, ,v2')).toEqual(['latest', 'v1', 'v2']);
    expect(splitCommas(' , ')).toEqual([]);
  });

  it('makes one instruction per line and drops blank lines', () => {
    expect(splitLines('RUN a\r\n\n   \n  CMD ["sh"]  \n')).toEqual(['RUN a', 'CMD ["sh"]']);
  });

  it('drops rows without a key, and rows without a value only when asked', () => {
    const rows = [
      { key: ' CI ', value: 'true' },
      { key: 'EMPTY', value: '' },
      { key: '', value: 'orphan' },
    ];
    expect(toObject(rows)).toEqual({ CI: 'true', EMPTY: '' });
    expect(toObject(rows, true)).toEqual({ CI: 'true' });
  });
});

describe('paketoBuilder', () => {
  it('names <namespace>/builder:<tag>, and nothing until both are chosen', () => {
    expect(paketoBuilder({ paketo_namespace: 'paketobuildpacks', paketo_tag: 'tiny' })).toBe(
      'paketobuildpacks/builder:tiny',
    );
    expect(paketoBuilder({ paketo_namespace: 'paketobuildpacks', paketo_tag: '' })).toBe('');
    expect(paketoBuilder({ paketo_namespace: ' ', paketo_tag: 'base' })).toBe('');
  });
});

describe('readJsonTemplate', () => {
  it('reads builders, provisioners and post-processors from a JSON template', () => {
    const template = JSON.stringify({
      builders: [{ type: 'docker' }],
      provisioners: [{ type: 'shell' }],
      'post-processors': [[{ type: 'docker-tag' }]],
    });
    expect(readJsonTemplate(template)).toEqual({
      ok: true,
      builders: [{ type: 'docker' }],
      provisioners: [{ type: 'shell' }],
      post_processors: [[{ type: 'docker-tag' }]],
    });
  });

  it('says why a template is not JSON', () => {
    const read = readJsonTemplate('{"builders": [');
    expect(read.ok).toBe(false);
    expect(!read.ok && read.problem).toMatch(/^The template is not valid JSON: /);
    expect(readJsonTemplate('[1]')).toEqual({
      ok: false,
      problem: 'The template must be a JSON object',
    });
  });
});

describe('requestBody', () => {
  it('sends the reference form with only the fields given', () => {
    expect(requestBody(draft({ form: 'repository', git_branch: ' main ' }), TENANT)).toEqual({
      project_id: PROJECT,
      git_branch: 'main',
    });
    expect(
      requestBody(
        draft({
          form: 'repository',
          git_branch: 'main',
          git_commit: 'abc1234',
          build_args: [{ key: 'A', value: '1' }],
        }),
        TENANT,
      ),
    ).toEqual({
      project_id: PROJECT,
      git_branch: 'main',
      git_commit: 'abc1234',
      build_args: { A: '1' },
    });
  });

  it('sends a kaniko manifest with an empty base image and no instructions', () => {
    const body = requestBody(
      draft({
        type: 'kaniko',
        name: ' app ',
        base_image: 'ignored:1',
        instructions: 'RUN ignored',
        dockerfile: 'FROM alpine\n',
        registry_repository: ' registry.example.com/team/app ',
        platforms: 'linux/amd64',
        tags: 'latest, v1 ,',
        environment: [
          { key: 'CI', value: 'true' },
          { key: 'EMPTY', value: '' },
        ],
      }),
      TENANT,
    );
    expect(body).toEqual({
      tenant_id: TENANT,
      project_id: PROJECT,
      manifest: {
        name: 'app',
        description: '',
        type: 'kaniko',
        base_image: '',
        instructions: [],
        environment: { CI: 'true' },
        tags: ['latest', 'v1'],
        metadata: {},
        build_config: {
          build_type: 'kaniko',
          sbom_tool: 'syft',
          scan_tool: 'trivy',
          registry_type: 'harbor',
          secret_manager_type: 'vault',
          build_context: '.',
          dockerfile: 'FROM alpine\n',
          registry_repository: 'registry.example.com/team/app',
          cache: false,
        },
      },
    });
  });

  it('sends buildx-only fields for buildx alone', () => {
    const fields = {
      dockerfile: 'FROM alpine\n',
      platforms: 'linux/amd64, linux/arm64',
      cache_to: 'type=inline',
      cache_from: 'type=registry,ref=r/a:cache\n\ntype=local,src=/c',
      secrets: [{ key: 'npm', value: 'vault:kv/data/npm#token' }],
    };
    expect(manifestOf(draft({ type: 'buildx', ...fields })).build_config).toMatchObject({
      platforms: ['linux/amd64', 'linux/arm64'],
      cache_to: 'type=inline',
      cache_from: ['type=registry,ref=r/a:cache', 'type=local,src=/c'],
      secrets: { npm: 'vault:kv/data/npm#token' },
    });
    const container = manifestOf(draft({ type: 'container', ...fields })).build_config as object;
    for (const key of ['platforms', 'cache_to', 'cache_from', 'secrets'])
      expect(container).not.toHaveProperty(key);
  });

  it('sends the paketo builder and its lists, and the base image of a container build', () => {
    const paketo = manifestOf(
      draft({
        type: 'paketo',
        paketo_tag: 'full',
        buildpacks: 'paketo-buildpacks/nodejs',
        paketo_env: [{ key: 'BP_NODE_VERSION', value: '20.*' }],
      }),
    );
    expect(paketo.build_config).toMatchObject({
      paketo_config: {
        builder: 'paketobuildpacks/builder:full',
        buildpacks: ['paketo-buildpacks/nodejs'],
        env: { BP_NODE_VERSION: '20.*' },
      },
    });
    expect(
      manifestOf(
        draft({ type: 'container', base_image: 'alpine:3.20', instructions: 'RUN a\n\nRUN b' }),
      ),
    ).toMatchObject({ base_image: 'alpine:3.20', instructions: ['RUN a', 'RUN b'] });
  });

  it('sends a JSON packer template with the entries read from it, an HCL one alone', () => {
    const json = '{"builders":[{"type":"docker"}]}';
    expect(manifestOf(draft({ type: 'packer', packer_template: json })).build_config).toMatchObject(
      {
        packer_template: json,
        builders: [{ type: 'docker' }],
      },
    );
    const hcl = 'source "docker" "x" {}';
    const config = manifestOf(draft({ type: 'packer', packer_template: hcl })).build_config;
    expect(config).toMatchObject({ packer_template: hcl });
    expect(config).not.toHaveProperty('builders');
  });
});
