import { manifestSpec } from '../../test/support/build-specs.js';
import {
  type BuildSpec,
  pushTargets,
  type SpecContext,
  specOfManifest,
  specOfReference,
} from '../manifest/build-spec.js';
import { BUILD_METHODS, localPlanOf } from './methods.js';
import { METHOD_NAMES, type MethodName } from '../manifest/types.js';

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
  ctx: SpecContext = context,
): BuildSpec {
  return manifestSpec(ctx, type, buildConfig, extra);
}

describe('BUILD_METHODS', () => {
  it('has one entry per method, each under its own name', () => {
    expect(Object.keys(BUILD_METHODS).sort()).toEqual([...METHOD_NAMES].sort());
    for (const [name, method] of Object.entries(BUILD_METHODS)) expect(method.name).toBe(name);
  });
});

describe(localPlanOf.name, () => {
  it.each<[string, BuildSpec, object]>([
    [
      'kaniko: the inline Dockerfile, environment then build args as build args',
      specOf('kaniko', {
        dockerfile: 'FROM scratch\n',
        build_args: { A: '1', CI: 'override' },
        target: 'run',
        registry_repository: 'reg.io/team/app',
      }),
      {
        kind: 'dockerfile',
        dockerfile: 'FROM scratch\n',
        buildArgs: { CI: 'override', A: '1' },
        target: 'run',
        platforms: [],
        layerCache: true,
      },
    ],
    [
      'kaniko: cache: false keeps the local runner off the layer cache',
      specOf('kaniko', {
        dockerfile: 'FROM scratch\n',
        cache: false,
        registry_repository: 'reg.io/team/app',
      }),
      { kind: 'dockerfile', layerCache: false },
    ],
    [
      'buildx: cache: true is the layer cache too',
      specOf('buildx', { dockerfile: 'FROM scratch\n', cache: true }),
      { kind: 'dockerfile', layerCache: true },
    ],
    [
      'buildx: platforms pass through',
      specOf('buildx', { dockerfile: 'FROM scratch\n', platforms: ['linux/amd64'] }),
      { kind: 'dockerfile', dockerfile: 'FROM scratch\n', platforms: ['linux/amd64'] },
    ],
    [
      'container: a generated Containerfile, environment as ARG lines, not as build args',
      specOf(
        'container',
        { build_args: { A: '1' } },
        { base_image: 'alpine:3', instructions: ['RUN true'] },
      ),
      {
        kind: 'dockerfile',
        dockerfile: 'FROM alpine:3\nARG CI="true"\nRUN true\n',
        buildArgs: { A: '1' },
      },
    ],
    [
      'paketo: the deprecated builder mapped, environment and platform env merged',
      specOf('paketo', {
        paketo_config: {
          builder: 'paketobuildpacks/builder:base',
          buildpacks: ['paketo/nodejs'],
          env: { BP_X: '1' },
        },
      }),
      {
        kind: 'pack',
        builder: 'paketobuildpacks/builder-jammy-base:latest',
        requestedBuilder: 'paketobuildpacks/builder:base',
        buildpacks: ['paketo/nodejs'],
        env: { CI: 'true', BP_X: '1' },
      },
    ],
    [
      'packer: a JSON template with variables as strings, environment and build args declared',
      specOf('packer', {
        packer_template: '{"builders":[{"type":"null"}]}',
        variables: { region: 'eu', n: 2 },
        build_args: { B: '2' },
      }),
      {
        kind: 'packer',
        templateFile: 'template.json',
        variables: { region: 'eu', n: '2' },
        env: { CI: 'true', B: '2' },
      },
    ],
    [
      'packer: an HCL2 template goes to template.pkr.hcl',
      specOf('packer', { packer_template: 'source "null" "x" {}' }),
      { kind: 'packer', templateFile: 'template.pkr.hcl' },
    ],
    [
      'a reference-form build: the repository Dockerfile with its build args',
      specOfReference({ branch: 'main', commit: null, buildArgs: { A: '1' } }, context),
      {
        kind: 'dockerfile',
        dockerfile: undefined,
        dockerfilePath: 'Dockerfile',
        buildArgs: { A: '1' },
        layerCache: true,
      },
    ],
  ])('%s', (_name, spec, plan) => {
    expect(localPlanOf(spec)).toMatchObject(plan);
  });
});

describe(specOfManifest.name, () => {
  it('captures the source, the output and the choices a runner needs, and nothing shared twice', () => {
    const spec = specOf('kaniko', {
      dockerfile: 'FROM scratch\n',
      build_context: 'app',
      build_args: { A: '1' },
      registry_repository: 'reg.io/team/app',
    });

    expect(spec).toEqual({
      version: 1,
      form: 'wizard',
      method: 'kaniko',
      config: { dockerfile: 'FROM scratch\n' },
      source: {
        repository: 'https://git.example.com/web.git',
        branch: null,
        commit: null,
        context: 'app',
      },
      output: { repository: 'reg.io/team/app', tags: ['v1'], registryType: 'harbor' },
      sbomTool: 'syft',
      scanTool: 'trivy',
      scanPolicy: null,
      secretManager: 'vault',
      env: { CI: 'true' },
      buildArgs: { A: '1' },
      timeoutSeconds: 900,
    });
  });

  it("prefers the project's default registry to kiln's", () => {
    const spec = specOf(
      'buildx',
      { dockerfile: 'FROM scratch\n' },
      {},
      {
        ...context,
        project: { ...context.project, defaultRegistry: 'harbor.example.com/team' },
      },
    );

    expect(spec.output.repository).toBe('harbor.example.com/team/my-web');
  });
});

describe(pushTargets.name, () => {
  const output = (tags: string[], repository: string | null) => ({
    tags,
    repository,
    registryType: null,
  });

  it('pushes full references as given and bare tags under the output repository', () => {
    expect(pushTargets(output(['reg.io/a/b:1', 'v2'], 'reg.io/team/app'), 7)).toEqual([
      'reg.io/a/b:1',
      'reg.io/team/app:v2',
    ]);
  });

  it('tags with the build number when no tag was given', () => {
    expect(pushTargets(output([], '127.0.0.1:5000/kiln/my-web'), 7)).toEqual([
      '127.0.0.1:5000/kiln/my-web:7',
    ]);
  });

  it('pushes no bare tag when there is no output repository', () => {
    expect(pushTargets(output(['v1'], null), 7)).toEqual([]);
  });

  it('puts bare tags under the repository of a full tag when the manifest names none', () => {
    const spec = specOf(
      'buildx',
      {
        dockerfile: 'FROM scratch\n',
      },
      { tags: ['v1', 'reg.io:5000/team/app:2'] },
    );

    expect(pushTargets(spec.output, 7)).toEqual([
      'reg.io:5000/team/app:v1',
      'reg.io:5000/team/app:2',
    ]);
  });
});
