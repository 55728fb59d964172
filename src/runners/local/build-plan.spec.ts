import type { LocalPlan } from '../../build-methods/method.js';
import { packArgs, packerArgs, toolOf } from './build-plan.js';

const pack: Extract<LocalPlan, { kind: 'pack' }> = {
  kind: 'pack',
  builder: 'paketobuildpacks/builder-jammy-base:latest',
  requestedBuilder: 'paketobuildpacks/builder:base',
  buildpacks: ['paketo/nodejs'],
  env: { CI: 'true', BP_X: '1' },
};

const packer = (templateFile: 'template.json' | 'template.pkr.hcl') =>
  ({
    kind: 'packer',
    template: '',
    templateFile,
    variables: { region: 'eu', n: '2' },
    env: {},
  }) as const;

describe(packArgs.name, () => {
  it('passes the builder, the buildpacks and the environment to pack, and publishes', () => {
    expect(packArgs(pack, 'reg/app:v1', '/src', true)).toEqual([
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

  it('does not publish without a registry', () => {
    expect(packArgs(pack, 'kiln/x:build', '/src', false)).not.toContain('--publish');
  });
});

describe(packerArgs.name, () => {
  it('builds with the variables and no colour, and inits an HCL2 template', () => {
    expect(packerArgs('build', packer('template.json'))).toEqual([
      'build',
      '-color=false',
      '-var',
      'region=eu',
      '-var',
      'n=2',
      'template.json',
    ]);
    expect(packerArgs('validate', packer('template.json'))).toEqual([
      'validate',
      '-var',
      'region=eu',
      '-var',
      'n=2',
      'template.json',
    ]);
    expect(packerArgs('init', packer('template.pkr.hcl'))).toEqual(['init', 'template.pkr.hcl']);
  });
});

describe(toolOf.name, () => {
  it('names the CLI a plan needs besides buildah', () => {
    expect(toolOf(pack)).toBe('pack');
    expect(toolOf(packer('template.json'))).toBe('packer');
  });
});
