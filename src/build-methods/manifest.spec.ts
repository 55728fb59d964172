import { outputRepository } from '../manifest/build-spec.js';
import { validateManifest, validateManifestAsync } from './manifest.js';
import { paketoBuilderImage } from './paketo.js';
import { type BuildManifest, METHOD_NAMES, type MethodName } from '../manifest/types.js';

// Fixtures are mutated deeply to make each bad case; validateManifest takes unknown anyway.
type Fixture = Record<string, any>;

const JSON_PACKER_TEMPLATE = JSON.stringify({
  variables: { region: 'eu-west-1' },
  builders: [
    { type: 'amazon-ebs', region: '{{user `region`}}', source_ami: 'ami-123' },
    { type: 'docker', image: 'ubuntu:22.04', commit: true },
  ],
  provisioners: [{ type: 'shell', inline: ['apt-get update'] }],
});

const HCL_PACKER_TEMPLATE = `source "amazon-ebs" "base" {
  region = "eu-west-1"
}
build {
  sources = ["source.amazon-ebs.base"]
}`;

const commonConfig = {
  sbom_tool: 'syft',
  scan_tool: 'trivy',
  registry_type: 'harbor',
  secret_manager_type: 'vault',
};

/** A manifest as the wizard sends it for a valid form of each method. */
function wizard(method: MethodName): Fixture {
  const base = {
    name: `${method}-app`,
    description: 'Built from the wizard',
    type: method,
    base_image: '',
    instructions: [],
    environment: { NODE_ENV: 'production' },
    tags: ['latest', 'v1.2.3'],
    metadata: { source: 'wizard' },
  };
  switch (method) {
    case 'kaniko':
      return {
        ...base,
        build_config: {
          ...commonConfig,
          build_type: 'kaniko',
          dockerfile: 'FROM node:20-alpine\nRUN npm ci\n',
          build_context: '.',
          build_args: { NODE_VERSION: '20' },
          target: 'runtime',
          cache: true,
          cache_repo: 'harbor.example.com/team/app-cache',
          registry_repository: 'harbor.example.com/team/app',
        },
      };
    case 'buildx':
      return {
        ...base,
        build_config: {
          ...commonConfig,
          build_type: 'buildx',
          dockerfile: 'FROM golang:1.22\nRUN go build ./...\n',
          build_context: '.',
          platforms: ['linux/amd64', 'linux/arm64/v8'],
          cache_to: 'type=registry,ref=harbor.example.com/team/app:cache',
          cache_from: ['type=registry,ref=harbor.example.com/team/app:cache'],
          secrets: { npmrc: 'vault:secret/data/npm#token' },
        },
      };
    case 'container':
      return {
        ...base,
        base_image: 'node:20-alpine',
        instructions: ['WORKDIR /app', 'COPY . .', 'RUN npm ci', 'CMD ["node", "server.js"]'],
        build_config: { ...commonConfig, build_type: 'container', build_context: '.' },
      };
    case 'paketo':
      return {
        ...base,
        build_config: {
          ...commonConfig,
          build_type: 'paketo',
          build_context: '.',
          paketo_config: {
            builder: 'paketobuildpacks/builder:base',
            buildpacks: ['paketo-buildpacks/nodejs'],
            env: { BP_NODE_VERSION: '20' },
            build_args: {},
          },
        },
      };
    case 'packer':
      return {
        ...base,
        build_config: {
          ...commonConfig,
          build_type: 'packer',
          build_context: '.',
          packer_template: JSON_PACKER_TEMPLATE,
          builders: [{ type: 'amazon-ebs', region: 'eu-west-1' }],
          provisioners: [{ type: 'shell', inline: ['apt-get update'] }],
          post_processors: [],
          variables: { region: 'eu-west-1' },
        },
      };
  }
}

function accepted(input: unknown): BuildManifest {
  const result = validateManifest(input);
  if (!result.ok) throw new Error(`expected acceptance, got ${JSON.stringify(result.details)}`);
  return result.manifest;
}

function rejected(input: unknown): Record<string, string> {
  const result = validateManifest(input);
  if (result.ok) throw new Error('expected rejection, got a manifest');
  return result.details;
}

describe(validateManifest.name, () => {
  describe('manifests the wizard sends for a valid form', () => {
    it.each(METHOD_NAMES)('accepts a %s manifest', (method) => {
      expect(validateManifest(wizard(method)).ok).toBe(true);
    });

    it('accepts kaniko with an empty base image and no instructions', () => {
      const manifest = accepted(wizard('kaniko'));
      expect(manifest.base_image).toBe('');
      expect(manifest.instructions).toEqual([]);
    });

    it.each(['paketo', 'packer', 'buildx'] as const)(
      'accepts %s with an empty base image and no instructions',
      (method) => {
        const manifest = accepted({ ...wizard(method), base_image: '', instructions: [] });
        expect(manifest.base_image).toBe('');
        expect(manifest.instructions).toEqual([]);
      },
    );

    it('normalises a kaniko manifest into the stored snapshot', () => {
      expect(accepted(wizard('kaniko'))).toEqual({
        name: 'kaniko-app',
        description: 'Built from the wizard',
        type: 'kaniko',
        base_image: '',
        instructions: [],
        environment: { NODE_ENV: 'production' },
        tags: ['latest', 'v1.2.3'],
        metadata: { source: 'wizard' },
        build_config: {
          build_type: 'kaniko',
          sbom_tool: 'syft',
          scan_tool: 'trivy',
          registry_type: 'harbor',
          secret_manager_type: 'vault',
          dockerfile: 'FROM node:20-alpine\nRUN npm ci\n',
          build_context: '.',
          build_args: { NODE_VERSION: '20' },
          target: 'runtime',
          cache: true,
          cache_repo: 'harbor.example.com/team/app-cache',
          registry_repository: 'harbor.example.com/team/app',
        },
      });
    });

    it('keeps the buildx-only fields of a buildx manifest', () => {
      const config = accepted(wizard('buildx')).build_config;
      expect(config.platforms).toEqual(['linux/amd64', 'linux/arm64/v8']);
      expect(config.cache_to).toBe('type=registry,ref=harbor.example.com/team/app:cache');
      expect(config.cache_from).toEqual(['type=registry,ref=harbor.example.com/team/app:cache']);
      expect(config.secrets).toEqual({ npmrc: 'vault:secret/data/npm#token' });
    });

    it('stores the paketo builder as the user chose it', () => {
      expect(accepted(wizard('paketo')).build_config.paketo_config?.builder).toBe(
        'paketobuildpacks/builder:base',
      );
    });

    it('keeps packer builders, provisioners, post-processors and variables as sent', () => {
      const config = accepted(wizard('packer')).build_config;
      expect(config.builders).toEqual([{ type: 'amazon-ebs', region: 'eu-west-1' }]);
      expect(config.provisioners).toEqual([{ type: 'shell', inline: ['apt-get update'] }]);
      expect(config.post_processors).toEqual([]);
      expect(config.variables).toEqual({ region: 'eu-west-1' });
    });

    it('fills the defaults when optional fields are missing or null', () => {
      const input = wizard('kaniko');
      delete input.name;
      delete input.description;
      delete input.environment;
      delete input.build_config.build_context;
      input.metadata = null;
      const manifest = accepted(input);
      expect(manifest.name).toBe('');
      expect(manifest.description).toBe('');
      expect(manifest.environment).toEqual({});
      expect(manifest.metadata).toEqual({});
      expect(manifest.build_config.build_context).toBe('.');
    });

    it('leaves out optional settings sent as empty strings', () => {
      const input = wizard('buildx');
      Object.assign(input.build_config, { target: ' ', cache_repo: '', cache_to: '' });
      const config = accepted(input).build_config;
      expect(config).not.toHaveProperty('target');
      expect(config).not.toHaveProperty('cache_repo');
      expect(config).not.toHaveProperty('cache_to');
    });

    it('returns a manifest that shares no objects with the input', () => {
      const input = wizard('packer');
      const manifest = accepted(input);
      input.metadata.source = 'changed';
      input.build_config.builders[0].region = 'us-east-1';
      input.build_config.variables.region = 'us-east-1';
      expect(manifest.metadata).toEqual({ source: 'wizard' });
      expect(manifest.build_config.builders).toEqual([{ type: 'amazon-ebs', region: 'eu-west-1' }]);
      expect(manifest.build_config.variables).toEqual({ region: 'eu-west-1' });
    });
  });

  describe('wizard messages', () => {
    it.each<[MethodName, string, (m: Fixture) => void, string, string]>([
      [
        'container',
        'an empty base image',
        (m) => (m.base_image = '  '),
        'manifest.base_image',
        'Base image is required',
      ],
      [
        'container',
        'a missing base image',
        (m) => delete m.base_image,
        'manifest.base_image',
        'Base image is required',
      ],
      [
        'container',
        'no instructions',
        (m) => (m.instructions = []),
        'manifest.instructions',
        'At least one build instruction is required',
      ],
      [
        'container',
        'only blank instruction lines',
        (m) => (m.instructions = '\n   \n'),
        'manifest.instructions',
        'At least one build instruction is required',
      ],
      [
        'kaniko',
        'an empty dockerfile',
        (m) => (m.build_config.dockerfile = ' \n '),
        'manifest.build_config.dockerfile',
        'Dockerfile content is required for Kaniko builds',
      ],
      [
        'kaniko',
        'a missing dockerfile',
        (m) => delete m.build_config.dockerfile,
        'manifest.build_config.dockerfile',
        'Dockerfile content is required for Kaniko builds',
      ],
      [
        'kaniko',
        'an empty build context',
        (m) => (m.build_config.build_context = ''),
        'manifest.build_config.build_context',
        'Build context is required for Kaniko builds',
      ],
      [
        'kaniko',
        'an empty registry repository',
        (m) => (m.build_config.registry_repository = ''),
        'manifest.build_config.registry_repository',
        'Registry repository is required for Kaniko builds',
      ],
      [
        'kaniko',
        'a registry repository given only as cache_repo',
        (m) => delete m.build_config.registry_repository,
        'manifest.build_config.registry_repository',
        'Registry repository is required for Kaniko builds',
      ],
      [
        'buildx',
        'an empty dockerfile',
        (m) => (m.build_config.dockerfile = ''),
        'manifest.build_config.dockerfile',
        'Dockerfile content is required for Buildx builds',
      ],
      [
        'paketo',
        'an empty builder',
        (m) => (m.build_config.paketo_config.builder = ''),
        'manifest.build_config.paketo_config.builder',
        'Buildpack builder selection is required for Paketo builds',
      ],
      [
        'paketo',
        'no paketo_config',
        (m) => delete m.build_config.paketo_config,
        'manifest.build_config.paketo_config.builder',
        'Buildpack builder selection is required for Paketo builds',
      ],
      [
        'packer',
        'an empty template',
        (m) => (m.build_config.packer_template = ''),
        'manifest.build_config.packer_template',
        'Packer template is required for Packer builds',
      ],
      [
        'packer',
        'a missing template',
        (m) => delete m.build_config.packer_template,
        'manifest.build_config.packer_template',
        'Packer template is required for Packer builds',
      ],
    ])('rejects %s with %s', (method, _condition, mutate, path, message) => {
      const input = wizard(method);
      mutate(input);
      expect(rejected(input)).toEqual({ [path]: message });
    });

    it.each(METHOD_NAMES)('requires at least one tag for %s', (method) => {
      expect(rejected({ ...wizard(method), tags: [] })).toEqual({
        'manifest.tags': 'At least one tag is required',
      });
    });

    it('requires a tag when the tags field is missing', () => {
      const input = wizard('kaniko');
      delete input.tags;
      expect(rejected(input)).toEqual({ 'manifest.tags': 'At least one tag is required' });
    });

    it('treats a tags string of only commas and spaces as no tag', () => {
      expect(rejected({ ...wizard('container'), tags: ' , ,, ' })).toEqual({
        'manifest.tags': 'At least one tag is required',
      });
    });

    describe('the kaniko output repository (a manifest with only the required fields)', () => {
      const withoutRepository = (tags: string[]): Fixture => {
        const input = wizard('kaniko');
        delete input.build_config.registry_repository;
        return { ...input, tags };
      };

      it('accepts a manifest without registry_repository when a tag is a full image reference', () => {
        expect(
          accepted(withoutRepository(['v1', 'harbor.example.com/team/app:v1'])).build_config
            .registry_repository,
        ).toBeUndefined();
      });

      it('accepts a manifest without registry_repository when a default registry is configured', () => {
        const result = validateManifest(withoutRepository(['v1']), {
          defaultRegistry: '127.0.0.1:5000/kiln',
        });
        expect(result.ok).toBe(true);
      });

      it('refuses it with the spec message when neither tags nor a default registry give one', () => {
        expect(rejected(withoutRepository(['v1', 'library:v2']))).toEqual({
          'manifest.build_config.registry_repository':
            'Registry repository is required for Kaniko builds',
        });
      });
    });

    it('defaults an empty build context to "." for methods other than kaniko', () => {
      const input = wizard('buildx');
      input.build_config.build_context = '';
      expect(accepted(input).build_config.build_context).toBe('.');
    });
  });

  describe('tags', () => {
    it('splits a comma-separated string, trims, drops empties and dedupes in order', () => {
      expect(accepted({ ...wizard('kaniko'), tags: ' v1, latest,,v1 , stable ' }).tags).toEqual([
        'v1',
        'latest',
        'stable',
      ]);
    });

    it('splits commas inside array elements the same way', () => {
      expect(
        accepted({ ...wizard('kaniko'), tags: ['v1, v2', ' latest ', 'v2', ''] }).tags,
      ).toEqual(['v1', 'v2', 'latest']);
    });

    it('accepts full image references with a tag', () => {
      const tags = ['harbor.example.com:8443/team/app:v1.2.3', 'team/app:latest'];
      expect(accepted({ ...wizard('kaniko'), tags }).tags).toEqual(tags);
    });

    it.each([
      ['a tag starting with a dash', '-v1'],
      ['a tag with a slash and no tag part', 'harbor.example.com:8443/team/app'],
      ['a tag of 129 characters', `v${'1'.repeat(128)}`],
      ['a reference with a digest', 'team/app@sha256:abc'],
      ['a tag with an invalid character', 'v1+build'],
    ])('rejects %s', (_name, tag) => {
      expect(rejected({ ...wizard('kaniko'), tags: ['latest', tag] })['manifest.tags']).toContain(
        `"${tag}"`,
      );
    });

    it('rejects a tag containing whitespace given in an array element', () => {
      expect(rejected({ ...wizard('kaniko'), tags: ['my tag'] })['manifest.tags']).toContain(
        '"my tag"',
      );
    });

    it('rejects a tags value that is neither a string nor an array', () => {
      expect(rejected({ ...wizard('kaniko'), tags: 5 })).toEqual({
        'manifest.tags': 'must be an array of strings or a string',
      });
    });

    it('rejects non-string tag elements by index', () => {
      expect(rejected({ ...wizard('kaniko'), tags: ['v1', 2] })).toEqual({
        'manifest.tags.1': 'must be a string',
      });
    });
  });

  describe('instructions', () => {
    it('splits a multi-line string into trimmed instructions without blank lines', () => {
      const input = { ...wizard('container'), instructions: 'RUN a\r\n\n   RUN b  \n\t\nCMD c\n' };
      expect(accepted(input).instructions).toEqual(['RUN a', 'RUN b', 'CMD c']);
    });

    it('splits array elements that hold several lines', () => {
      const input = { ...wizard('container'), instructions: ['RUN a\nRUN b', '  ', 'CMD c'] };
      expect(accepted(input).instructions).toEqual(['RUN a', 'RUN b', 'CMD c']);
    });
  });

  describe('string maps', () => {
    it('drops environment entries whose value is the empty string', () => {
      const input = { ...wizard('kaniko'), environment: { A: '1', EMPTY: '', SPACE: ' ' } };
      expect(accepted(input).environment).toEqual({ A: '1', SPACE: ' ' });
    });

    it('rejects a non-string environment value', () => {
      expect(rejected({ ...wizard('kaniko'), environment: { PORT: 8080 } })).toEqual({
        'manifest.environment.PORT': 'must be a string',
      });
    });

    it.each([
      ['build_args', 'kaniko', (m: Fixture) => (m.build_config.build_args = { A: 1 })],
      ['secrets', 'buildx', (m: Fixture) => (m.build_config.secrets = { A: true })],
      [
        'paketo_config.env',
        'paketo',
        (m: Fixture) => (m.build_config.paketo_config.env = { A: [] }),
      ],
      [
        'paketo_config.build_args',
        'paketo',
        (m: Fixture) => (m.build_config.paketo_config.build_args = { A: null }),
      ],
    ] as const)('rejects a non-string value in build_config.%s', (field, method, mutate) => {
      const input = wizard(method);
      mutate(input);
      expect(rejected(input)).toEqual({
        [`manifest.build_config.${field}.A`]: 'must be a string',
      });
    });

    it('rejects environment names containing "="', () => {
      expect(rejected({ ...wizard('kaniko'), environment: { 'A=B': 'x' } })).toEqual({
        'manifest.environment': 'key "A=B" must be non-empty, without "=" or whitespace',
      });
    });

    it('keeps a "__proto__" key as data rather than a prototype', () => {
      const input = JSON.parse(
        JSON.stringify({ ...wizard('kaniko'), environment: { A: '1' } }).replace(
          '"A":"1"',
          '"A":"1","__proto__":"x"',
        ),
      );
      const environment = accepted(input).environment;
      expect(Object.keys(environment)).toEqual(['A', '__proto__']);
      expect(Object.getPrototypeOf(environment)).toBe(Object.prototype);
    });
  });

  describe('enums and types', () => {
    it('rejects input that is not an object', () => {
      for (const input of [null, [], 'manifest', 42]) {
        expect(rejected(input)).toEqual({ manifest: 'must be an object' });
      }
    });

    it('rejects an unknown build method', () => {
      expect(rejected({ ...wizard('kaniko'), type: 'docker' })['manifest.type']).toBe(
        'must be one of: kaniko, buildx, container, paketo, packer',
      );
    });

    it('rejects a missing build_config', () => {
      const input = wizard('kaniko');
      delete input.build_config;
      expect(rejected(input)).toEqual({ 'manifest.build_config': 'must be an object' });
    });

    it.each([
      ['sbom_tool', 'must be one of: syft, grype, trivy'],
      ['scan_tool', 'must be one of: trivy, clair, grype, snyk'],
      ['registry_type', 'must be one of: s3, harbor, quay, artifactory'],
      ['secret_manager_type', 'must be one of: vault, aws_secretsmanager, azure_keyvault'],
      ['build_type', 'must be one of: kaniko, buildx, container, paketo, packer'],
    ])('rejects an unknown %s, listing the allowed values', (field, message) => {
      const input = wizard('container');
      input.build_config[field] = 'other';
      expect(rejected(input)).toEqual({ [`manifest.build_config.${field}`]: message });
    });

    it.each(['sbom_tool', 'scan_tool', 'registry_type', 'secret_manager_type', 'build_type'])(
      'requires build_config.%s',
      (field) => {
        const input = wizard('container');
        delete input.build_config[field];
        expect(Object.keys(rejected(input))).toEqual([`manifest.build_config.${field}`]);
      },
    );

    it('reports a wrongly typed dockerfile as a type error, not as missing', () => {
      const input = wizard('kaniko');
      input.build_config.dockerfile = 42;
      expect(rejected(input)).toEqual({ 'manifest.build_config.dockerfile': 'must be a string' });
    });

    it('rejects a build_type that differs from the manifest type', () => {
      const input = wizard('kaniko');
      input.build_config.build_type = 'buildx';
      expect(rejected(input)).toEqual({
        'manifest.build_config.build_type': 'build_type must equal manifest.type',
      });
    });

    it('rejects a name longer than 255 characters', () => {
      expect(rejected({ ...wizard('kaniko'), name: 'n'.repeat(256) })).toEqual({
        'manifest.name': 'must be at most 255 characters',
      });
    });

    it('rejects a description longer than 4096 characters', () => {
      expect(rejected({ ...wizard('kaniko'), description: 'd'.repeat(4097) })).toEqual({
        'manifest.description': 'must be at most 4096 characters',
      });
    });

    it('rejects metadata that is not an object', () => {
      expect(rejected({ ...wizard('kaniko'), metadata: ['a'] })).toEqual({
        'manifest.metadata': 'must be an object',
      });
    });

    it('rejects a base image containing whitespace, which would break the generated FROM', () => {
      expect(Object.keys(rejected({ ...wizard('container'), base_image: 'node\nRUN x' }))).toEqual([
        'manifest.base_image',
      ]);
    });

    it('collects every problem instead of stopping at the first', () => {
      const input = wizard('kaniko');
      input.tags = [];
      input.extra = true;
      input.build_config.dockerfile = '';
      input.build_config.sbom_tool = 'other';
      expect(Object.keys(rejected(input)).sort()).toEqual([
        'manifest.build_config.dockerfile',
        'manifest.build_config.sbom_tool',
        'manifest.extra',
        'manifest.tags',
      ]);
    });
  });

  describe('unknown keys', () => {
    it('rejects an unknown key in the manifest', () => {
      expect(rejected({ ...wizard('kaniko'), service_account: 'admin' })).toEqual({
        'manifest.service_account': 'is not allowed',
      });
    });

    it('rejects an unknown key in build_config', () => {
      const input = wizard('kaniko');
      input.build_config.privileged = true;
      expect(rejected(input)).toEqual({ 'manifest.build_config.privileged': 'is not allowed' });
    });

    it('rejects an unknown key in paketo_config', () => {
      const input = wizard('paketo');
      input.build_config.paketo_config.run_image = 'x';
      expect(rejected(input)).toEqual({
        'manifest.build_config.paketo_config.run_image': 'is not allowed',
      });
    });

    it('accepts any keys inside metadata and variables', () => {
      const input = wizard('packer');
      input.metadata = { anything: { nested: [1, 'two', null] } };
      input.build_config.variables = { any_name: { deep: true } };
      const manifest = accepted(input);
      expect(manifest.metadata).toEqual({ anything: { nested: [1, 'two', null] } });
      expect(manifest.build_config.variables).toEqual({ any_name: { deep: true } });
    });
  });

  describe('secret references (docs/adr/0021-secret-references.md)', () => {
    const buildx = wizard('buildx') as { build_config: Record<string, unknown> };

    it("accepts buildx secrets that reference the build's manager, stored as written", () => {
      const manifest = accepted({
        ...buildx,
        build_config: { ...buildx.build_config, secrets: { npm: 'vault:kv/data/team/npm#token' } },
      });
      expect(manifest.build_config.secrets).toEqual({ npm: 'vault:kv/data/team/npm#token' });
    });

    it('names the secret whose reference does not parse', () => {
      const details = rejected({
        ...buildx,
        build_config: { ...buildx.build_config, secrets: { npm: 'vault:kv/team/npm#token' } },
      });
      expect(details).toEqual({
        'manifest.build_config.secrets.npm': expect.stringContaining('/data/'),
      });
    });

    it('refuses a reference to a manager the build did not choose', () => {
      const details = rejected({
        ...buildx,
        build_config: { ...buildx.build_config, secrets: { npm: 'azure:npm-token' } },
      });
      expect(details['manifest.build_config.secrets.npm']).toBe(
        "references azure_keyvault, but this build's secret_manager_type is vault",
      );
    });

    it('takes references in environment for packer builds', () => {
      const manifest = accepted({
        ...wizard('packer'),
        environment: { AWS_SECRET_ACCESS_KEY: 'vault:kv/data/ci/aws#secret' },
      });
      expect(manifest.environment).toEqual({
        AWS_SECRET_ACCESS_KEY: 'vault:kv/data/ci/aws#secret',
      });
    });

    it.each(['kaniko', 'buildx', 'container', 'paketo'] as const)(
      'refuses a reference in environment for %s builds, which would write it into the image',
      (method) => {
        const details = rejected({
          ...wizard(method),
          environment: { TOKEN: 'vault:kv/data/ci/token#value' },
        });
        expect(details).toEqual({
          'manifest.environment.TOKEN': expect.stringContaining('would be written into the image'),
        });
      },
    );

    it('accepts a kaniko manifest with no repository when its registry is s3 (ADR 0022)', () => {
      const kaniko = wizard('kaniko') as { build_config: Record<string, unknown>; tags: string[] };
      const config = { ...kaniko.build_config };
      delete config['registry_repository'];
      expect(
        accepted({ ...kaniko, tags: ['v1'], build_config: { ...config, registry_type: 's3' } })
          .build_config.registry_type,
      ).toBe('s3');
    });

    it('leaves plain values alone', () => {
      expect(
        accepted({ ...wizard('kaniko'), environment: { MODE: 'vaulted' } }).environment,
      ).toEqual({
        MODE: 'vaulted',
      });
    });
  });

  describe('scan_policy', () => {
    it.each(['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const)(
      'keeps a scan policy of a %s build as sent',
      (method) => {
        const input = wizard(method);
        input.build_config.scan_policy = { fail_on: 'high', ignore: ['CVE-2024-0727'] };
        expect(accepted(input).build_config.scan_policy).toEqual({
          fail_on: 'high',
          ignore: ['CVE-2024-0727'],
        });
      },
    );

    it('leaves it out when not sent: findings never fail such a build', () => {
      expect(accepted(wizard('kaniko')).build_config).not.toHaveProperty('scan_policy');
    });

    it.each([
      [{ fail_on: 'severe' }, 'manifest.build_config.scan_policy.fail_on'],
      [{ ignore: 'CVE-1' }, 'manifest.build_config.scan_policy.ignore'],
      [{ block: true }, 'manifest.build_config.scan_policy.block'],
      ['high', 'manifest.build_config.scan_policy'],
    ])('refuses %j, naming %s', (policy, path) => {
      const input = wizard('kaniko');
      input.build_config.scan_policy = policy;
      expect(Object.keys(rejected(input))).toEqual([path]);
    });
  });

  describe('buildx platforms and buildx-only fields', () => {
    it('accepts os/arch and os/arch/variant platforms', () => {
      const input = wizard('buildx');
      input.build_config.platforms = ['linux/amd64', 'linux/arm/v7', 'windows/amd64', 'linux/386'];
      expect(accepted(input).build_config.platforms).toEqual(input.build_config.platforms);
    });

    it.each(['amd64', 'linux', 'linux/arm64/v8/extra', 'linux /amd64', 'linux/', ''])(
      'rejects the platform "%s"',
      (platform) => {
        const input = wizard('buildx');
        input.build_config.platforms = ['linux/amd64', platform];
        expect(rejected(input)).toEqual({
          'manifest.build_config.platforms.1': `"${platform}" must look like os/arch[/variant], for example linux/amd64 or linux/arm64/v8`,
        });
      },
    );

    it.each([
      ['platforms', ['linux/amd64']],
      ['cache_to', 'type=inline'],
      ['cache_from', ['type=registry,ref=x']],
      ['secrets', { token: 'x' }],
    ])('rejects %s on a kaniko build', (field, value) => {
      const input = wizard('kaniko');
      input.build_config[field] = value;
      expect(rejected(input)).toEqual({
        [`manifest.build_config.${field}`]: 'only for buildx builds',
      });
    });

    it('drops empty buildx-only fields a form sends for another method', () => {
      const input = wizard('kaniko');
      Object.assign(input.build_config, {
        platforms: [],
        cache_to: '',
        cache_from: [],
        secrets: {},
      });
      const config = accepted(input).build_config;
      expect(config).not.toHaveProperty('platforms');
      expect(config).not.toHaveProperty('cache_to');
      expect(config).not.toHaveProperty('cache_from');
      expect(config).not.toHaveProperty('secrets');
    });
  });

  describe('packer templates', () => {
    it('rejects builders whose type the JSON template does not declare', () => {
      const input = wizard('packer');
      input.build_config.builders = [{ type: 'amazon-ebs' }, { type: 'googlecompute' }];
      expect(rejected(input)).toEqual({
        'manifest.build_config.builders':
          'entry 1: no builder of type "googlecompute" (the template declares amazon-ebs, docker)',
      });
    });

    it('rejects a builder without a type when the JSON template can be checked', () => {
      const input = wizard('packer');
      input.build_config.builders = [{ region: 'eu-west-1' }];
      expect(rejected(input)['manifest.build_config.builders']).toContain('entry 0 has no type');
    });

    it('leaves an HCL2 template to the asynchronous check', () => {
      const input = wizard('packer');
      input.build_config.packer_template = HCL_PACKER_TEMPLATE;
      input.build_config.builders = [{ type: 'anything' }];
      expect(accepted(input).build_config.builders).toEqual([{ type: 'anything' }]);
    });

    it('refuses HCL2 in JSON syntax, which packer would read as a legacy JSON template', () => {
      const input = wizard('packer');
      input.build_config.packer_template = JSON.stringify({
        source: { 'amazon-ebs': { base: { region: 'eu-west-1' } } },
        build: { sources: ['source.amazon-ebs.base'] },
      });
      expect(rejected(input)).toEqual({
        'manifest.build_config.packer_template': expect.stringContaining(
          'needs a "builders" array',
        ),
      });
    });

    it('rejects builders that are not an array', () => {
      const input = wizard('packer');
      input.build_config.builders = { type: 'amazon-ebs' };
      expect(rejected(input)).toEqual({ 'manifest.build_config.builders': 'must be an array' });
    });
  });
});

describe(validateManifestAsync.name, () => {
  it.each(METHOD_NAMES)(
    'gives the same manifest as validateManifest for a %s manifest',
    async (method) => {
      expect(await validateManifestAsync(wizard(method))).toEqual(validateManifest(wizard(method)));
    },
  );

  it('accepts builders, provisioners and post-processors an HCL2 template declares', async () => {
    const input = wizard('packer');
    input.build_config.packer_template = HCL_PACKER_TEMPLATE;
    input.build_config.builders = ['source.amazon-ebs.base'];
    input.build_config.provisioners = [];
    const result = await validateManifestAsync(input);
    expect(result).toMatchObject({
      ok: true,
      manifest: { build_config: { builders: ['source.amazon-ebs.base'] } },
    });
  });

  it('rejects a builder the HCL2 template does not declare, with the rest of the problems', async () => {
    const input = wizard('packer');
    input.build_config.packer_template = HCL_PACKER_TEMPLATE;
    input.build_config.builders = [{ type: 'googlecompute' }];
    input.tags = [];
    expect(await validateManifestAsync(input)).toEqual({
      ok: false,
      details: {
        'manifest.tags': 'At least one tag is required',
        'manifest.build_config.builders':
          'entry 0: no builder of type "googlecompute" (the template declares source.amazon-ebs.base)',
        'manifest.build_config.provisioners':
          'entry 0: no provisioner of type "shell" (the template declares none)',
      },
    });
  });

  it('rejects a template that is neither JSON nor HCL2, naming the line and column', async () => {
    const input = wizard('packer');
    input.build_config.packer_template = 'source "amazon-ebs" "base" {\n  region = \n}\n';
    expect(await validateManifestAsync(input)).toEqual({
      ok: false,
      details: {
        'manifest.build_config.packer_template': expect.stringMatching(
          /^is neither JSON nor valid HCL2: template\.pkr\.hcl:2,\d+/,
        ),
      },
    });
  });
});

describe(paketoBuilderImage.name, () => {
  it.each([
    ['paketobuildpacks/builder:base', 'paketobuildpacks/builder-jammy-base:latest'],
    ['paketobuildpacks/builder:full', 'paketobuildpacks/builder-jammy-full:latest'],
    ['paketobuildpacks/builder:tiny', 'paketobuildpacks/builder-jammy-tiny:latest'],
    [
      'registry.example.com/mirror/builder:full',
      'registry.example.com/mirror/builder-jammy-full:latest',
    ],
  ])('maps the deprecated builder %s to %s', (builder, image) => {
    expect(paketoBuilderImage(builder)).toEqual({ image, mapped: true });
  });

  it.each([
    'paketobuildpacks/builder-jammy-base:latest',
    'paketobuildpacks/builder:0.3.0',
    'heroku/builder:24',
    'registry.example.com/team/custom-builder:base',
  ])('uses %s as given', (builder) => {
    expect(paketoBuilderImage(builder)).toEqual({ image: builder, mapped: false });
  });
});

describe(outputRepository.name, () => {
  it.each<[string | undefined, string[], string | undefined, string | undefined]>([
    ['reg.io/team/app', ['reg.io/other/x:1'], 'def.io', 'reg.io/team/app'],
    [undefined, ['v1', 'reg.io:5000/other/x:1'], 'def.io', 'reg.io:5000/other/x'],
    [undefined, ['v1', 'library:2'], 'def.io/kiln', 'def.io/kiln/my-web'],
    [undefined, ['v1'], undefined, undefined],
  ])(
    'repository %s, tags %j, default %s → %s',
    (registryRepository, tags, defaultRegistry, expected) => {
      expect(outputRepository(registryRepository, tags, defaultRegistry, 'My Web')).toBe(expected);
    },
  );
});
