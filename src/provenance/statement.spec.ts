import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { provenanceSchemas } from '../../test/support/provenance.js';
import { validateManifest } from '../build-methods/manifest.js';
import { GIT_IMAGE, BUILDKIT_IMAGE, KANIKO_IMAGE, PACKER_IMAGE } from '../build-methods/images.js';
import type { BuildConfigSnapshot } from '../lifecycle/build.entity.js';
import {
  type BuildSpec,
  type SpecContext,
  specOfManifest,
  specOfReference,
} from '../manifest/build-spec.js';
import type { PushedImages } from '../manifest/formats.js';
import type { BuildManifest, MethodName } from '../manifest/types.js';
import { SecretSealer, SEALED_PREFIX } from '../secrets/secret-sealer.js';
import {
  buildTypeOf,
  imageDependency,
  type ImageDependency,
  type InTotoStatement,
  hasSubject,
  NoSubjectError,
  type PackerOutput,
  type ProvenanceInput,
  provenanceStatement,
  type ResourceDescriptor,
  sbomStatement,
  SLSA_PROVENANCE_V1,
  type SlsaProvenance,
} from './statement.js';
import { isSecretName, REDACTED, redactJson, redactPackerTemplate } from './statement-redaction.js';
import { gitUrl } from './statement-resources.js';

const ARTIFACTS = join(__dirname, '..', 'artifacts', 'fixtures');

const { statement: statementSchema, provenance: provenanceSchema } = provenanceSchemas();

/** The schema's complaints about `value`, empty when it is valid (so a failure shows them). */
function problems(validate: ValidateFunction, value: unknown): string[] {
  return validate(value)
    ? []
    : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message ?? ''}`);
}

const sha256 = (text: string): string =>
  `sha256:${createHash('sha256').update(text).digest('hex')}`;

const sealer = new SecretSealer('a key of at least thirty-two bytes, for tests');
const REPOSITORY = 'https://git.example.com/team/app.git';
const COMMIT = '4f2b8e1c9a7d3b5f6e0a1c2d3e4f5a6b7c8d9e0f';
const context: SpecContext = {
  project: { name: 'App', gitRepositoryUrl: REPOSITORY, defaultRegistry: null },
  defaultRegistry: 'registry.example.com/kiln',
  timeoutSeconds: 3600,
};

/** A build as POST /builds stores it: validated, buildx secrets sealed, the spec captured. */
function wizard(
  type: MethodName,
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
  specContext: SpecContext = context,
): { spec: BuildSpec; config: BuildConfigSnapshot; manifest: BuildManifest } {
  const result = validateManifest(
    {
      name: 'app',
      type,
      base_image: '',
      instructions: [],
      environment: { CI: 'true' },
      tags: ['v1', 'latest'],
      metadata: { team: 'platform' },
      build_config: {
        sbom_tool: 'syft',
        scan_tool: 'trivy',
        registry_type: 'harbor',
        secret_manager_type: 'vault',
        build_type: type,
        ...buildConfig,
      },
      ...extra,
    },
    { defaultRegistry: specContext.defaultRegistry },
  );
  if (!result.ok) throw new Error(`manifest refused: ${JSON.stringify(result.details)}`);
  const manifest = result.manifest;
  const { secrets } = manifest.build_config;
  if (secrets !== undefined) manifest.build_config.secrets = sealer.sealAll(secrets);
  return {
    spec: specOfManifest(manifest, specContext),
    config: { form: 'wizard', manifest },
    manifest,
  };
}

const IMAGE_DIGEST = sha256('the image');

function pushedTo(...names: string[]): PushedImages {
  return { digest: IMAGE_DIGEST, images: names.map((name) => `${name}@${IMAGE_DIGEST}`) };
}

const BUILD_ID = '0b7e4f7c-2f55-4c1e-9f3a-2d6f1b9c8e01';

/** What the caller gathers for a build that ran `spec` and pushed `pushed`. */
function input(
  build: { spec: BuildSpec; config: BuildConfigSnapshot },
  outputs: { pushed?: PushedImages; packer?: PackerOutput },
  images: ProvenanceInput['images'] = [imageDependency('git', GIT_IMAGE)],
): ProvenanceInput {
  return {
    build: {
      id: BUILD_ID,
      tenantId: '11111111-2222-4333-8444-555555555555',
      projectId: '66666666-7777-4888-9999-aaaaaaaaaaaa',
      buildNumber: 42,
      spec: build.spec,
      config: build.config,
      gitCommit: COMMIT,
      gitBranch: 'main',
      createdBy: '99999999-8888-4777-8666-555555555555',
      trigger: null,
      startedAt: new Date('2026-11-27T10:00:00.123Z'),
      finishedAt: new Date('2026-11-27T10:04:31.456Z'),
    },
    ...outputs,
    installation: {
      builderId: 'https://kiln.example.com',
      version: '0.1.0',
      runner: 'kubernetes',
      namespace: 'kiln-builds',
    },
    images,
    byproducts: {
      log: {
        digest: sha256('the log'),
        lines: 1234,
        uri: `https://kiln.example.com/api/v1/builds/${BUILD_ID}/logs`,
      },
      documents: [
        { name: 'sbom', mediaType: 'application/spdx+json', digest: sha256('the sbom') },
        { name: 'scan', mediaType: 'application/json', digest: sha256('the scan') },
      ],
    },
  };
}

/** A statement whose only subject is `dependency`, to check its URI against the schema. */
function statementFor(dependency: ImageDependency): object {
  return {
    _type: 'https://in-toto.io/Statement/v1',
    subject: [{ uri: dependency.uri, digest: { sha256: sha256('x').slice(7) } }],
    predicateType: SLSA_PROVENANCE_V1,
  };
}

/** The statement, checked against both vendored schemas. */
function valid(statement: InTotoStatement<SlsaProvenance>): InTotoStatement<SlsaProvenance> {
  expect(problems(statementSchema, statement)).toEqual([]);
  expect(statement.predicateType).toBe(SLSA_PROVENANCE_V1);
  expect(problems(provenanceSchema, statement.predicate)).toEqual([]);
  return statement;
}

const HCL_TEMPLATE = `variable "region" {
  type    = string
  default = "eu-west-1"
}

variable "db_admin" {
  type      = string
  default   = "hcl-sensitive-default"
  sensitive = true
}

source "amazon-ebs" "base" {
  region     = var.region
  access_key = "\${var.access_key}"
  password   = "hcl-plain-password"
}

build {
  sources = ["source.amazon-ebs.base"]
}
`;

const JSON_TEMPLATE = JSON.stringify({
  variables: { region: 'eu-west-1', winrm_pass: 'json-template-default' },
  'sensitive-variables': ['winrm_pass'],
  builders: [
    {
      type: 'amazon-ebs',
      region: '{{user `region`}}',
      secret_key: '{{user `aws_secret`}}',
      ssh_password: 'json-builder-password',
    },
  ],
});

const METHODS: ReadonlyArray<{
  method: MethodName;
  build: () => { spec: BuildSpec; config: BuildConfigSnapshot };
  images: ProvenanceInput['images'];
}> = [
  {
    method: 'kaniko',
    build: () =>
      wizard('kaniko', {
        dockerfile: 'FROM alpine:3.20\nARG VERSION\nRUN echo $VERSION > /version\n',
        build_args: { VERSION: '1.2.3' },
        registry_repository: 'registry.example.com/team/app',
      }),
    images: [imageDependency('git', GIT_IMAGE), imageDependency('kaniko', KANIKO_IMAGE)],
  },
  {
    method: 'buildx',
    build: () =>
      wizard('buildx', {
        dockerfile: 'FROM alpine:3.20\nRUN --mount=type=secret,id=npmrc cat /run/secrets/npmrc\n',
        platforms: ['linux/amd64', 'linux/arm64'],
        secrets: { npmrc: '//registry.npmjs.org/:_authToken=npm_plainvalue' },
        registry_repository: 'registry.example.com/team/app',
      }),
    images: [imageDependency('git', GIT_IMAGE), imageDependency('buildkit', BUILDKIT_IMAGE)],
  },
  {
    method: 'paketo',
    build: () =>
      wizard('paketo', {
        paketo_config: {
          builder: 'paketobuildpacks/builder-jammy-base:0.4.300',
          env: { BP_NODE_VERSION: '20' },
        },
        registry_repository: 'registry.example.com/team/app',
      }),
    images: [imageDependency('git', GIT_IMAGE)],
  },
  {
    method: 'container',
    build: () =>
      wizard(
        'container',
        { registry_repository: 'registry.example.com/team/app' },
        {
          base_image: `docker.io/library/alpine:3.20@${sha256('alpine')}`,
          instructions: ['RUN apk add --no-cache curl', 'CMD ["curl", "--version"]'],
        },
      ),
    images: [imageDependency('git', GIT_IMAGE), imageDependency('kaniko', KANIKO_IMAGE)],
  },
];

describe(provenanceStatement.name, () => {
  describe.each(METHODS)('a $method build', ({ method, build, images }) => {
    const pushed = pushedTo(
      'registry.example.com/team/app:v1',
      'registry.example.com/team/app:latest',
    );
    const statement = provenanceStatement(input(build(), { pushed }, images));

    it('is valid against the in-toto Statement and SLSA Provenance v1 schemas', () => {
      valid(statement);
    });

    it('names each pushed reference with the pushed digest', () => {
      expect(statement.subject).toEqual([
        { name: 'registry.example.com/team/app:v1', digest: { sha256: IMAGE_DIGEST.slice(7) } },
        { name: 'registry.example.com/team/app:latest', digest: { sha256: IMAGE_DIGEST.slice(7) } },
      ]);
    });

    it("carries the method's build type and builder id", () => {
      expect(statement.predicate.buildDefinition.buildType).toBe(buildTypeOf(method));
      expect(statement.predicate.runDetails.builder.id).toBe(
        `https://kiln.example.com/builders/${method}`,
      );
    });

    it('lists the repository at the built commit and every image the build ran', () => {
      const dependencies = statement.predicate.buildDefinition.resolvedDependencies;
      expect(dependencies[0]).toEqual({
        name: 'source',
        uri: 'git+https://git.example.com/team/app.git@main',
        digest: { gitCommit: COMMIT },
      });
      for (const image of images) {
        expect(dependencies).toContainEqual({
          name: image.name,
          uri: image.uri,
          digest: { sha256: image.digest!.slice(7) },
        });
      }
    });
  });

  it('names a paketo build’s builder and a container build’s base image as dependencies', () => {
    const [, , paketo, container] = METHODS.map(({ build, images }) =>
      provenanceStatement(
        input(build(), { pushed: pushedTo('registry.example.com/team/app:v1') }, images),
      ),
    );
    expect(paketo!.predicate.buildDefinition.resolvedDependencies).toContainEqual({
      name: 'paketo-builder',
      uri: 'pkg:docker/paketobuildpacks/builder-jammy-base@0.4.300',
    });
    expect(container!.predicate.buildDefinition.resolvedDependencies).toContainEqual({
      name: 'base-image',
      uri: 'pkg:docker/library/alpine@3.20',
      digest: { sha256: sha256('alpine').slice(7) },
    });
  });

  it('records the run: invocation id, start and finish, kiln and the runner', () => {
    const statement = valid(
      provenanceStatement(
        input(METHODS[0]!.build(), { pushed: pushedTo('registry.example.com/team/app:v1') }),
      ),
    );
    expect(statement.predicate.runDetails.metadata).toEqual({
      invocationId: BUILD_ID,
      startedOn: '2026-11-27T10:00:00.123Z',
      finishedOn: '2026-11-27T10:04:31.456Z',
    });
    expect(statement.predicate.runDetails.builder.version).toEqual({ kiln: '0.1.0' });
    expect(statement.predicate.buildDefinition.internalParameters).toMatchObject({
      version: '0.1.0',
      runner: 'kubernetes',
      namespace: 'kiln-builds',
      buildNumber: 42,
    });
  });

  it('records the log, SBOM and scan digests as byproducts', () => {
    const statement = provenanceStatement(
      input(METHODS[0]!.build(), { pushed: pushedTo('registry.example.com/team/app:v1') }),
    );
    expect(statement.predicate.runDetails.byproducts).toEqual([
      {
        name: 'build-log',
        uri: `https://kiln.example.com/api/v1/builds/${BUILD_ID}/logs`,
        digest: { sha256: sha256('the log').slice(7) },
        annotations: { lines: 1234 },
      },
      {
        name: 'sbom',
        mediaType: 'application/spdx+json',
        digest: { sha256: sha256('the sbom').slice(7) },
      },
      {
        name: 'scan',
        mediaType: 'application/json',
        digest: { sha256: sha256('the scan').slice(7) },
      },
    ]);
  });

  it('names each packer artifact with the digest of the packer manifest', () => {
    const build = wizard('packer', {
      packer_template: JSON_TEMPLATE,
      variables: { region: 'eu-west-1' },
    });
    const manifestDigest = sha256('{"builds":[…]}');
    const packer: PackerOutput = {
      manifestDigest,
      artifacts: [
        { name: 'base', builderType: 'amazon-ebs', artifactId: 'eu-west-1:ami-0a1b2c3d4e5f60718' },
        { name: 'base', builderType: 'amazon-ebs', artifactId: 'us-east-1:ami-0f9e8d7c6b5a40312' },
      ],
    };
    const statement = valid(
      provenanceStatement(input(build, { packer }, [imageDependency('packer', PACKER_IMAGE)])),
    );
    expect(statement.subject).toEqual([
      {
        name: 'amazon-ebs:eu-west-1:ami-0a1b2c3d4e5f60718',
        digest: { sha256: manifestDigest.slice(7) },
        annotations: { packerBuild: 'base' },
      },
      {
        name: 'amazon-ebs:us-east-1:ami-0f9e8d7c6b5a40312',
        digest: { sha256: manifestDigest.slice(7) },
        annotations: { packerBuild: 'base' },
      },
    ]);
    expect(statement.predicate.buildDefinition.buildType).toBe(buildTypeOf('packer'));
  });

  it('names an S3 build’s object by its address with the layout’s digest', () => {
    const build = wizard('kaniko', {
      dockerfile: 'FROM alpine:3.20\n',
      registry_type: 's3',
    });
    const address = 's3://kiln-images/team/app/42.tar';
    const statement = valid(
      provenanceStatement(input(build, { pushed: { digest: IMAGE_DIGEST, images: [address] } })),
    );
    expect(statement.subject).toEqual([
      { name: address, uri: address, digest: { sha256: IMAGE_DIGEST.slice(7) } },
    ]);
  });

  it('gives a reference-form build’s request: repository, branch, commit and build args', () => {
    const spec = specOfReference(
      { branch: 'main', commit: null, buildArgs: { VERSION: '1.2.3' } },
      context,
    );
    const statement = valid(
      provenanceStatement(
        input(
          { spec, config: { form: 'reference', build_args: { VERSION: '1.2.3' } } },
          { pushed: pushedTo('registry.example.com/kiln/app:42') },
        ),
      ),
    );
    expect(statement.predicate.buildDefinition.externalParameters).toEqual({
      form: 'reference',
      repository: REPOSITORY,
      branch: 'main',
      commit: null,
      build_args: { VERSION: '1.2.3' },
    });
    expect(statement.predicate.buildDefinition.buildType).toBe(buildTypeOf('kaniko'));
  });

  it('gives a wizard build’s manifest as submitted', () => {
    const build = wizard('kaniko', {
      dockerfile: 'FROM alpine:3.20\n',
      registry_repository: 'registry.example.com/team/app',
    });
    const statement = provenanceStatement(
      input(build, { pushed: pushedTo('registry.example.com/team/app:v1') }),
    );
    expect(statement.predicate.buildDefinition.externalParameters).toEqual({
      form: 'wizard',
      repository: REPOSITORY,
      branch: null,
      commit: null,
      manifest: JSON.parse(JSON.stringify(build.manifest)) as unknown,
    });
  });

  it('drops the credentials of a git URL wherever it appears', () => {
    const withToken = 'https://oauth2:glpat-Zx9SecretToken@GitLab.Example.com/group/app.git';
    const spec = specOfReference(
      { branch: 'main', commit: COMMIT, buildArgs: null },
      { ...context, project: { ...context.project, gitRepositoryUrl: withToken } },
    );
    const statement = valid(
      provenanceStatement(
        input(
          { spec, config: { form: 'reference', build_args: null } },
          { pushed: pushedTo('registry.example.com/kiln/app:42') },
        ),
      ),
    );
    const text = JSON.stringify(statement);
    expect(text).not.toContain('glpat-Zx9SecretToken');
    expect(text).not.toContain('oauth2');
    expect(statement.predicate.buildDefinition.resolvedDependencies[0]!.uri).toBe(
      'git+https://gitlab.example.com/group/app.git@main',
    );
    expect(statement.predicate.buildDefinition.externalParameters.repository).toBe(
      'https://GitLab.Example.com/group/app.git',
    );
  });

  it('is the same text for the same build, whatever order its maps were written in', () => {
    const build = (order: 'ab' | 'ba') =>
      wizard('kaniko', {
        dockerfile: 'FROM alpine:3.20\n',
        registry_repository: 'registry.example.com/team/app',
        build_args: order === 'ab' ? { A: '1', B: '2' } : { B: '2', A: '1' },
      });
    const pushed = pushedTo('registry.example.com/team/app:v1');
    expect(JSON.stringify(provenanceStatement(input(build('ba'), { pushed })))).toBe(
      JSON.stringify(provenanceStatement(input(build('ab'), { pushed }))),
    );
  });

  it('refuses a build that left nothing to attest', () => {
    expect(() => provenanceStatement(input(METHODS[0]!.build(), {}))).toThrow(NoSubjectError);
    expect(hasSubject(undefined, undefined)).toBe(false);
    expect(hasSubject(pushedTo(), undefined)).toBe(false);
    expect(hasSubject(pushedTo('registry.example.com/team/app:v1'), undefined)).toBe(true);
  });
});

describe('secrets in a provenance statement', () => {
  const PLAIN = [
    'npm_plainvalue-for-buildx',
    'hunter2-plain-db-password',
    'ghp_plainBuildArgToken',
    'paketo-plain-auth',
    'var-plain-admin-password',
    'json-template-default',
    'json-builder-password',
    'hcl-sensitive-default',
    'hcl-plain-password',
    'resource-plain-secret',
  ] as const;
  // Stored sealed with the other buildx secrets: visible only when the caller unseals them.
  const SEALED_REFERENCE = 'vault:kv/data/ci#npm_token';
  // A packer environment's and a Build resource's references are stored as written.
  const REFERENCES = [
    'vault:kv/data/aws#secret_access_key',
    'vault:kv/data/ci#resource_token',
  ] as const;

  const buildx = wizard('buildx', {
    dockerfile: 'FROM alpine:3.20\nRUN --mount=type=secret,id=npmrc true\n',
    secrets: { npmrc: PLAIN[0], token: SEALED_REFERENCE },
    build_args: { GITHUB_TOKEN: PLAIN[2], VERSION: '1.2.3' },
    registry_repository: 'registry.example.com/team/app',
  });
  const paketo = wizard('paketo', {
    paketo_config: {
      builder: 'paketobuildpacks/builder-jammy-base:0.4.300',
      env: { BP_NODE_VERSION: '20', NPM_AUTH: PLAIN[3] },
    },
    registry_repository: 'registry.example.com/team/app',
  });
  const packerJson = wizard(
    'packer',
    {
      packer_template: JSON_TEMPLATE,
      variables: {
        region: 'eu-west-1',
        admin_password: PLAIN[4],
        winrm_pass: 'sensitive-by-template',
      },
    },
    {
      environment: {
        AWS_SECRET_ACCESS_KEY: REFERENCES[0],
        DB_PASSWORD: PLAIN[1],
        AWS_REGION: 'eu-west-1',
      },
    },
  );
  const packerHcl = wizard('packer', {
    packer_template: HCL_TEMPLATE,
    variables: { region: 'eu-west-1' },
  });
  // A Build resource's spec holds buildx secrets as written: plain values and references.
  const resourceSpec: BuildSpec = {
    ...buildx.spec,
    config: { ...buildx.spec.config, secrets: { plain: PLAIN[9], ref: REFERENCES[1] } },
  };
  const resource = {
    spec: resourceSpec,
    config: {
      form: 'resource',
      namespace: 'team-a',
      name: 'app-42',
      uid: 'd3b0c442-98fc-4c1c-b9e4-6f1f4f1b2c3d',
    },
  } as const;

  const statements = [
    provenanceStatement(input(buildx, { pushed: pushedTo('registry.example.com/team/app:v1') })),
    provenanceStatement(input(paketo, { pushed: pushedTo('registry.example.com/team/app:v1') })),
    provenanceStatement(
      input(packerJson, {
        packer: {
          manifestDigest: sha256('m'),
          artifacts: [{ name: 'b', builderType: 'amazon-ebs', artifactId: 'eu-west-1:ami-1' }],
        },
      }),
    ),
    provenanceStatement(
      input(packerHcl, {
        packer: {
          manifestDigest: sha256('m'),
          artifacts: [{ name: 'b', builderType: 'amazon-ebs', artifactId: 'eu-west-1:ami-1' }],
        },
      }),
    ),
    provenanceStatement(input(resource, { pushed: pushedTo('registry.example.com/team/app:v1') })),
  ];
  const text = statements.map((statement) => JSON.stringify(statement)).join('\n');

  it('stores the fixtures’ buildx secrets sealed, as kiln does', () => {
    expect(
      Object.values(buildx.manifest.build_config.secrets!).every((v) =>
        v.startsWith(SEALED_PREFIX),
      ),
    ).toBe(true);
    expect(
      Object.values(buildx.spec.config.secrets!).every((v) => v.startsWith(SEALED_PREFIX)),
    ).toBe(true);
  });

  it('are valid statements all the same', () => {
    for (const statement of statements) valid(statement);
  });

  it.each(PLAIN)('shows no plain secret value (%s)', (value) => {
    expect(text).not.toContain(value);
  });

  it('shows no sealed value', () => {
    expect(text).not.toContain(SEALED_PREFIX);
    expect(text).not.toContain('kiln-sealed');
  });

  it.each(REFERENCES)('shows a secret reference as written (%s)', (reference) => {
    expect(text).toContain(JSON.stringify(reference));
  });

  it('shows a buildx secret reference when the caller passes the secrets unsealed', () => {
    const unsealed = {
      ...buildx,
      spec: {
        ...buildx.spec,
        config: { ...buildx.spec.config, secrets: sealer.unsealAll(buildx.spec.config.secrets!) },
      },
      config: {
        form: 'wizard',
        manifest: {
          ...buildx.manifest,
          build_config: {
            ...buildx.manifest.build_config,
            secrets: sealer.unsealAll(buildx.manifest.build_config.secrets!),
          },
        },
      } as const,
    };
    const statement = provenanceStatement(
      input(unsealed, { pushed: pushedTo('registry.example.com/team/app:v1') }),
    );
    const manifest = statement.predicate.buildDefinition.externalParameters.manifest as {
      build_config: { secrets: Record<string, string> };
    };
    expect(manifest.build_config.secrets).toEqual({ npmrc: REDACTED, token: SEALED_REFERENCE });
  });

  it('keeps what is no secret: plain build args, variables and template expressions', () => {
    const [buildxStatement, , packerStatement] = statements;
    const buildxManifest = buildxStatement!.predicate.buildDefinition.externalParameters
      .manifest as {
      build_config: { build_args: Record<string, string> };
    };
    expect(buildxManifest.build_config.build_args).toEqual({
      GITHUB_TOKEN: REDACTED,
      VERSION: '1.2.3',
    });
    const packerManifest = packerStatement!.predicate.buildDefinition.externalParameters
      .manifest as {
      environment: Record<string, string>;
      build_config: { variables: Record<string, string>; packer_template: string };
    };
    expect(packerManifest.environment).toEqual({
      AWS_SECRET_ACCESS_KEY: REFERENCES[0],
      AWS_REGION: 'eu-west-1',
      DB_PASSWORD: REDACTED,
    });
    expect(packerManifest.build_config.variables).toEqual({
      admin_password: REDACTED,
      region: 'eu-west-1',
      winrm_pass: REDACTED,
    });
    expect(JSON.parse(packerManifest.build_config.packer_template)).toMatchObject({
      builders: [
        {
          secret_key: '{{user `aws_secret`}}',
          ssh_password: REDACTED,
          region: '{{user `region`}}',
        },
      ],
    });
  });
});

describe(redactJson.name, () => {
  it('hides a sealed value wherever it stands, and keeps what stands beside it', () => {
    const sealed = sealer.seal('a value sealed outside any secret field');
    expect(redactJson({ note: sealed, list: [sealed, 'plain'], CI: 'true' })).toEqual({
      note: REDACTED,
      list: [REDACTED, 'plain'],
      CI: 'true',
    });
  });

  it('drops the credentials of a URL in any field', () => {
    expect(redactJson({ cache_repo: 'https://robot:s3cr3t@registry.example.com/cache' })).toEqual({
      cache_repo: 'https://registry.example.com/cache',
    });
  });
});

describe(redactPackerTemplate.name, () => {
  it('replaces the literals of a sensitive HCL variable and of secret attributes, nothing else', () => {
    const { template, sensitive } = redactPackerTemplate(HCL_TEMPLATE);
    expect([...sensitive]).toEqual(['db_admin']);
    expect(template).toBe(
      HCL_TEMPLATE.replace('"hcl-sensitive-default"', `"${REDACTED}"`).replace(
        '"hcl-plain-password"',
        `"${REDACTED}"`,
      ),
    );
  });

  it('leaves a JSON template without secrets byte for byte as written', () => {
    const text = '{\n  "builders": [ { "type": "amazon-ebs", "region": "eu-west-1" } ]\n}';
    expect(redactPackerTemplate(text).template).toBe(text);
  });
});

describe(imageDependency.name, () => {
  it.each([
    ['hashicorp/packer:1.16.1', 'pkg:docker/hashicorp/packer@1.16.1'],
    ['docker.io/library/alpine:3.20', 'pkg:docker/library/alpine@3.20'],
    [
      'Registry.Example.com:5000/team/app:v1',
      'pkg:docker/team/app@v1?repository_url=registry.example.com%3A5000',
    ],
    ['localhost/app', 'pkg:docker/app?repository_url=localhost'],
  ])('names %s by its Package URL', (reference, uri) => {
    const dependency = imageDependency('image', reference);
    expect(dependency).toEqual({ name: 'image', uri });
    expect(problems(statementSchema, statementFor(dependency))).toEqual([]);
  });

  it('keeps the digest a reference pins', () => {
    expect(imageDependency('git', GIT_IMAGE).digest).toBe(
      GIT_IMAGE.slice(GIT_IMAGE.indexOf('@') + 1),
    );
  });
});

describe(gitUrl.name, () => {
  it.each([
    ['https://Git.Example.com/Team/App.git', 'git+https://git.example.com/Team/App.git'],
    ['git@github.com:org/repo.git', 'git+ssh://git@github.com/org/repo.git'],
    [
      'ssh://git@git.example.com:2222/org/repo.git',
      'git+ssh://git@git.example.com:2222/org/repo.git',
    ],
    ['git+https://git.example.com/app.git', 'git+https://git.example.com/app.git'],
    ['/srv/git/app.git', 'git+file:///srv/git/app.git'],
  ])('writes %s as %s', (repository, url) => {
    expect(gitUrl(repository)).toBe(url);
  });
});

describe(isSecretName.name, () => {
  it.each([
    'NPM_TOKEN',
    'db_password',
    'AWS_SECRET_ACCESS_KEY',
    'clientSecret',
    'API_KEY',
    'secrets',
    'SECRET_KEY_BASE',
  ])('takes %s for a secret', (name) => expect(isSecretName(name)).toBe(true));
  it.each([
    'secret_manager_type',
    'kms_key_id',
    'TOKEN_URL',
    'VERSION',
    'region',
    'author',
    'keypair_name',
  ])('takes %s for no secret', (name) => expect(isSecretName(name)).toBe(false));
});

describe(sbomStatement.name, () => {
  it.each([
    ['spdx-json', 'sbom-syft.spdx.json', 'https://spdx.dev/Document'],
    ['cyclonedx-json', 'sbom-trivy.cdx.json', 'https://cyclonedx.org/bom'],
  ] as const)('attests a %s SBOM about the pushed image', (format, file, predicateType) => {
    const document = JSON.parse(readFileSync(join(ARTIFACTS, file), 'utf8')) as unknown;
    const pushed = pushedTo('registry.example.com/team/app:v1');
    const statement = sbomStatement({ pushed, format, document });
    expect(problems(statementSchema, statement)).toEqual([]);
    expect(statement.predicateType).toBe(predicateType);
    expect(statement.predicate).toEqual(document);
    expect(statement.subject).toEqual<ResourceDescriptor[]>([
      { name: 'registry.example.com/team/app:v1', digest: { sha256: IMAGE_DIGEST.slice(7) } },
    ]);
  });
});

describe('the vendored schemas', () => {
  const statement = provenanceStatement(
    input(METHODS[0]!.build(), { pushed: pushedTo('registry.example.com/team/app:v1') }),
  );
  const edit = (change: (copy: any) => void): any => {
    const copy = JSON.parse(JSON.stringify(statement));
    change(copy);
    return copy;
  };

  it.each<[string, (copy: any) => void]>([
    ['a subject without a digest', (s) => delete s.subject[0].digest],
    ['no subject', (s) => (s.subject = [])],
    ['a sha256 that is not 64 hex digits', (s) => (s.subject[0].digest.sha256 = 'abc')],
    ['another _type', (s) => (s._type = 'https://in-toto.io/Statement/v0.1')],
    [
      'a predicateType with an upper-case host',
      (s) => (s.predicateType = 'https://SLSA.dev/provenance/v1'),
    ],
  ])('refuse a statement with %s', (_what, change) => {
    expect(problems(statementSchema, edit(change))).not.toEqual([]);
  });

  it.each<[string, (copy: any) => void]>([
    ['no builder id', (s) => delete s.predicate.runDetails.builder.id],
    ['empty externalParameters', (s) => (s.predicate.buildDefinition.externalParameters = {})],
    [
      'a local start time',
      (s) => (s.predicate.runDetails.metadata.startedOn = '2026-11-27T10:00:00+01:00'),
    ],
    [
      'a dependency with neither uri nor digest',
      (s) => s.predicate.buildDefinition.resolvedDependencies.push({ name: 'x' }),
    ],
    [
      'a gitCommit that is no commit',
      (s) => (s.predicate.buildDefinition.resolvedDependencies[0].digest.gitCommit = 'main'),
    ],
  ])('refuse a predicate with %s', (_what, change) => {
    expect(problems(provenanceSchema, edit(change).predicate)).not.toEqual([]);
  });
});
