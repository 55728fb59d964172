import { manifestSpec } from '../../../test/support/build-specs.js';
import {
  type BuildSpec,
  type MethodConfig,
  type SpecContext,
  specOfReference,
} from '../../manifest/build-spec.js';
import {
  METHOD_NAMES,
  type MethodName,
  type RegistryType,
  type SbomTool,
  type ScanTool,
  type SecretManagerType,
} from '../../manifest/types.js';
import type { CustomObject } from '../../kubernetes/custom-resources.js';
import { BUILD_STATUSES } from '../../lifecycle/build-state.js';
import { FAILURE_REASONS } from '../../manifest/failure-reasons.js';
import {
  BUILD_FAILURE_REASONS,
  BUILD_RESOURCE_METHODS,
  BUILD_STATES,
  type BuildResource,
  type BuildResourceConfig,
  type BuildResourceMethod,
  type BuildResourceOutput,
  type BuildResourceSpec,
} from './build-resource.js';
import { buildResourceFor, buildSpecOf } from './projection.js';

// The CRD's types are generated from its YAML; these fail to compile (tsc, `make lint`) when they
// stop matching kiln's own vocabulary (the build_config fields, method names, tool choices).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const typesAgree: [
  Same<keyof MethodConfig, keyof BuildResourceConfig>,
  Same<MethodConfig, BuildResourceConfig>,
  Same<MethodName, BuildResourceMethod>,
  Same<RegistryType, NonNullable<BuildResourceOutput['registry']>>,
  Same<SbomTool, NonNullable<BuildResourceSpec['sbomTool']>>,
  Same<ScanTool, NonNullable<BuildResourceSpec['scanTool']>>,
  Same<SecretManagerType, NonNullable<BuildResourceSpec['secretManager']>>,
  Same<BuildSpec['form'], NonNullable<BuildResourceSpec['form']>>,
] = [true, true, true, true, true, true, true, true];
// What src/kubernetes/ CustomResources<T> asks of T.
const fitsCustomObject = (resource: BuildResource): CustomObject => resource;

const context: SpecContext = {
  project: {
    name: 'My Web',
    gitRepositoryUrl: 'https://git.example.com/web.git',
    defaultRegistry: null,
  },
  defaultRegistry: '127.0.0.1:5000/kiln',
  timeoutSeconds: 900,
};

/** The spec kiln stores for a manifest, through the same validation the API runs. */
function specOf(
  type: MethodName,
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): BuildSpec {
  return manifestSpec(context, type, buildConfig, {
    tags: ['v1', 'reg.io:5000/team/app:2'],
    ...extra,
  });
}

const build = (spec: BuildSpec) => ({
  id: '0b6f2f7e-4c1a-4b7e-9a55-3d2c1b0a9f8e',
  tenantId: '5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11',
  projectId: '0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22',
  spec,
});

/** One spec per method, each with every field its method takes, and two reference-form ones. */
const SPECS: [string, BuildSpec][] = [
  [
    'kaniko',
    specOf('kaniko', {
      dockerfile: 'FROM alpine:3.20\nRUN apk add curl\n',
      build_context: 'app',
      build_args: { VERSION: '1.2.3' },
      target: 'run',
      cache: true,
      cache_repo: 'reg.io/team/cache',
      registry_repository: 'reg.io/team/app',
    }),
  ],
  [
    'buildx',
    specOf('buildx', {
      dockerfile: 'FROM scratch\n',
      platforms: ['linux/amd64', 'linux/arm64/v8'],
      cache_to: 'type=registry,ref=reg.io/team/app:cache,mode=max',
      cache_from: ['type=registry,ref=reg.io/team/app:cache'],
      secrets: { npm_token: 'abc' },
    }),
  ],
  [
    'container',
    specOf(
      'container',
      { cache: false },
      { base_image: 'python:3.12-slim', instructions: ['RUN pip install flask', 'CMD ["flask"]'] },
    ),
  ],
  [
    'paketo',
    specOf('paketo', {
      paketo_config: {
        builder: 'paketobuildpacks/builder:base',
        buildpacks: ['paketo-buildpacks/nodejs'],
        env: { BP_NODE_VERSION: '20.*' },
        build_args: { A: '1' },
      },
    }),
  ],
  [
    'packer',
    specOf('packer', {
      packer_template: JSON.stringify({
        builders: [{ type: 'docker', image: 'ubuntu:24.04', commit: true }],
        provisioners: [{ type: 'shell', inline: ['apt-get update'] }],
        'post-processors': [[{ type: 'docker-tag', repository: 'reg.io/ops/base', tags: ['1'] }]],
      }),
      builders: [{ type: 'docker', image: 'ubuntu:24.04', commit: true }],
      provisioners: [{ type: 'shell', inline: ['apt-get update'] }],
      post_processors: [[{ type: 'docker-tag', repository: 'reg.io/ops/base', tags: ['1'] }]],
      variables: { region: 'eu-west-1', retries: 3, debug: false },
    }),
  ],
  [
    'reference, branch and commit',
    specOfReference({ branch: 'release/1.4', commit: '9fceb02', buildArgs: { A: '1' } }, context),
  ],
  [
    'reference, no repository and no registry anywhere',
    specOfReference(
      { branch: 'main', commit: null, buildArgs: null },
      {
        ...context,
        project: { ...context.project, gitRepositoryUrl: null },
        defaultRegistry: undefined,
      },
    ),
  ],
];

describe(buildResourceFor.name, () => {
  it("speaks kiln's vocabulary: methods, build states and failure reasons", () => {
    expect(typesAgree).toHaveLength(8);
    expect(BUILD_RESOURCE_METHODS).toEqual(METHOD_NAMES);
    expect(BUILD_STATES).toEqual(BUILD_STATUSES);
    expect(BUILD_FAILURE_REASONS).toEqual(expect.arrayContaining([...FAILURE_REASONS]));
  });

  it('names the resource after the build, labels it and projects the spec', () => {
    const spec = SPECS[0]![1];
    const resource = buildResourceFor(build(spec), 'kiln-builds', {
      suspend: true,
      credentialsSecret: 'harbor-push',
    });

    expect(fitsCustomObject(resource)).toStrictEqual({
      apiVersion: 'kiln.dev/v1alpha1',
      kind: 'Build',
      metadata: {
        name: '0b6f2f7e-4c1a-4b7e-9a55-3d2c1b0a9f8e',
        namespace: 'kiln-builds',
        labels: {
          'app.kubernetes.io/managed-by': 'kiln',
          'kiln.dev/build-id': '0b6f2f7e-4c1a-4b7e-9a55-3d2c1b0a9f8e',
          'kiln.dev/tenant-id': '5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11',
          'kiln.dev/project-id': '0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22',
        },
      },
      spec: {
        tenantId: '5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11',
        projectId: '0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22',
        form: 'wizard',
        method: 'kaniko',
        source: { repository: 'https://git.example.com/web.git', context: 'app' },
        config: {
          dockerfile: 'FROM alpine:3.20\nRUN apk add curl\n',
          target: 'run',
          cache: true,
          cache_repo: 'reg.io/team/cache',
        },
        output: {
          image: 'reg.io/team/app',
          tags: ['v1', 'reg.io:5000/team/app:2'],
          registry: 'harbor',
          credentialsSecret: 'harbor-push',
        },
        sbomTool: 'syft',
        scanTool: 'trivy',
        secretManager: 'vault',
        env: { CI: 'true' },
        buildArgs: { VERSION: '1.2.3' },
        timeoutSeconds: 900,
        suspend: true,
      },
    } satisfies BuildResource);
  });

  it('never writes secret values into the resource', () => {
    const spec = SPECS[1]![1];
    expect(spec.config.secrets).toEqual({ npm_token: 'abc' });

    const resource = buildResourceFor(build(spec), 'kiln-builds', { suspend: true });

    expect(resource.spec.config).not.toHaveProperty('secrets');
    expect(JSON.stringify(resource)).not.toContain('abc');
  });

  it('leaves out what the spec has as null, since the CRD has no nulls', () => {
    const spec = SPECS[6]![1];
    const resource = buildResourceFor(build(spec), 'kiln-builds', { suspend: false });

    expect(resource.spec.source).toStrictEqual({ branch: 'main', context: '.' });
    expect(resource.spec.output).toStrictEqual({ tags: [] });
    expect(resource.spec).not.toHaveProperty('sbomTool');
    expect(resource.spec).not.toHaveProperty('scanTool');
    expect(resource.spec).not.toHaveProperty('secretManager');
    expect(JSON.stringify(resource)).not.toContain('null');
  });

  it('carries the scan policy into the resource and back, in the CRD’s camelCase', () => {
    const spec: BuildSpec = {
      ...SPECS[0]![1],
      scanPolicy: { fail_on: 'high', ignore: ['CVE-2024-0001'] },
    };

    const resource = buildResourceFor(build(spec), 'kiln-builds', { suspend: false });

    expect(resource.spec.scanPolicy).toStrictEqual({ failOn: 'high', ignore: ['CVE-2024-0001'] });
    expect(buildSpecOf(resource).scanPolicy).toStrictEqual(spec.scanPolicy);
  });

  it('shares no object with the spec it projects', () => {
    const spec = SPECS[3]![1];
    const before = structuredClone(spec);
    const resource = buildResourceFor(build(spec), 'kiln-builds', { suspend: false });
    resource.spec.config!.paketo_config!.env!.BP_NODE_VERSION = '22.*';
    resource.spec.output!.tags!.push('x');
    resource.spec.env!.CI = 'false';

    expect(spec).toStrictEqual(before);
  });
});

describe(buildSpecOf.name, () => {
  it.each(SPECS)('reads back the spec it was projected from: %s', (_name, spec) => {
    const resource = buildResourceFor(build(spec), 'kiln-builds', { suspend: true });

    // Secret values stay in kiln's database (see buildResourceFor): the rest comes back as it was.
    const config = { ...spec.config };
    delete config.secrets;
    expect(buildSpecOf(resource)).toStrictEqual({ ...spec, config });
  });

  it('fills the defaults of a Build applied with only the required fields', () => {
    const spec = buildSpecOf({
      spec: {
        tenantId: '5b0d3a4e-8f0c-4a8e-9a53-2f1f6f0d2c11',
        projectId: '0c9a4f7e-2d4b-4a8c-b0e6-7d1e9b3f5a22',
        method: 'buildx',
      },
    });

    expect(spec).toStrictEqual({
      version: 1,
      form: 'wizard',
      method: 'buildx',
      config: {},
      source: { repository: null, branch: null, commit: null, context: '.' },
      output: { repository: null, tags: [], registryType: null },
      sbomTool: null,
      scanTool: null,
      scanPolicy: null,
      secretManager: null,
      env: {},
      buildArgs: {},
      timeoutSeconds: 3600,
    } satisfies BuildSpec);
  });

  it('shares no object with the resource it reads', () => {
    const resource = buildResourceFor(build(SPECS[4]![1]), 'kiln-builds', { suspend: false });
    const spec = buildSpecOf(resource);
    (spec.config.builders![0] as { type: string }).type = 'amazon-ebs';
    (spec.output.tags as string[]).push('x');

    expect(resource.spec.config!.builders![0]).toMatchObject({ type: 'docker' });
    expect(resource.spec.output!.tags).toStrictEqual(['v1', 'reg.io:5000/team/app:2']);
  });
});
