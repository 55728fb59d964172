import type { BuildConfigSnapshot } from '../../lifecycle/build.entity.js';
import { packArgs, packerArgs, planBuild, pushTargets } from './build-plan.js';

function wizard(
  type: string,
  buildConfig: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): BuildConfigSnapshot {
  return {
    form: 'wizard',
    manifest: {
      type,
      base_image: '',
      instructions: [],
      environment: { CI: 'true' },
      tags: ['v1'],
      build_config: { build_type: type, build_context: '.', ...buildConfig },
      ...extra,
    },
  };
}

describe(planBuild.name, () => {
  it('builds the repository Dockerfile for a reference-form build', () => {
    expect(planBuild({ form: 'reference', build_args: { A: '1' } })).toMatchObject({
      kind: 'dockerfile',
      dockerfile: undefined,
      dockerfilePath: 'Dockerfile',
      buildArgs: { A: '1' },
      needsRepository: true,
    });
  });

  it('generates the Containerfile of a container build', () => {
    const plan = planBuild(
      wizard('container', {}, { base_image: 'alpine:3', instructions: ['RUN true'] }),
    );

    expect(plan).toMatchObject({
      kind: 'dockerfile',
      dockerfile: 'FROM alpine:3\nARG CI="true"\nRUN true\n',
    });
  });

  it('maps a deprecated paketo builder and passes buildpacks and environment to pack', () => {
    const plan = planBuild(
      wizard('paketo', {
        paketo_config: {
          builder: 'paketobuildpacks/builder:base',
          buildpacks: ['paketo/nodejs'],
          env: { BP_X: '1' },
        },
      }),
    );
    if (plan.kind !== 'pack') throw new Error(`expected a pack plan, got ${plan.kind}`);

    expect(plan.builder).toBe('paketobuildpacks/builder-jammy-base:latest');
    expect(packArgs(plan, 'reg/app:v1', '/src', true)).toEqual([
      'build',
      'reg/app:v1',
      '--builder',
      'paketobuildpacks/builder-jammy-base:latest',
      '--path',
      '/src',
      '--buildpack',
      'paketo/nodejs',
      '--env',
      'CI=true',
      '--env',
      'BP_X=1',
      '--publish',
    ]);
  });

  it('validates then builds a JSON packer template, and inits an HCL2 one first', () => {
    const json = planBuild(
      wizard('packer', {
        packer_template: '{"builders":[{"type":"null"}]}',
        variables: { region: 'eu', n: 2 },
      }),
    );
    const hcl = planBuild(wizard('packer', { packer_template: 'source "null" "x" {}' }));
    if (json.kind !== 'packer' || hcl.kind !== 'packer') throw new Error('expected packer plans');

    expect(json.templateFile).toBe('template.json');
    expect(hcl.templateFile).toBe('template.pkr.hcl');
    expect(packerArgs('build', json)).toEqual([
      'build',
      '-color=false',
      '-var',
      'region=eu',
      '-var',
      'n=2',
      'template.json',
    ]);
    expect(packerArgs('init', hcl)).toEqual(['init', 'template.pkr.hcl']);
  });
});

describe(pushTargets.name, () => {
  it('pushes full references as given and bare tags under the registry repository or the local registry', () => {
    expect(pushTargets(['reg.io/a/b:1', 'v2'], 'reg.io/team/app', undefined, 'web', 7)).toEqual([
      'reg.io/a/b:1',
      'reg.io/team/app:v2',
    ]);
    expect(pushTargets([], undefined, '127.0.0.1:5000/kiln', 'My Web', 7)).toEqual([
      '127.0.0.1:5000/kiln/my-web:7',
    ]);
    expect(pushTargets(['v1'], undefined, undefined, 'web', 7)).toEqual([]);
  });

  it('pushes bare tags under the repository of a full tag when the manifest names none', () => {
    expect(pushTargets(['v1', 'reg.io:5000/team/app:2'], undefined, 'other.io', 'web', 7)).toEqual([
      'reg.io:5000/team/app:v1',
      'reg.io:5000/team/app:2',
    ]);
  });
});
