import { childEnvironment, environmentOf } from './child-env.js';

describe(childEnvironment.name, () => {
  const inherited = { PATH: '/usr/bin:/bin', HOME: '/home/kiln', https_proxy: 'http://proxy:3128' };

  it('gives git the inherited variables and a fixed locale', () => {
    expect(childEnvironment(inherited, 'git')).toEqual({ ...inherited, LC_ALL: 'C' });
  });

  it('runs buildah with chroot isolation', () => {
    expect(childEnvironment(inherited, 'buildah')).toEqual({
      ...inherited,
      LC_ALL: 'C',
      BUILDAH_ISOLATION: 'chroot',
    });
  });

  it.each(['pack', 'packer'] as const)('hands the declared variables to %s', (tool) => {
    expect(childEnvironment(inherited, tool, { CI: 'true', NODE_ENV: 'production' })).toEqual({
      CI: 'true',
      NODE_ENV: 'production',
      ...inherited,
      LC_ALL: 'C',
    });
  });

  it('keeps declared variables away from git and buildah, which do not read them', () => {
    expect(childEnvironment(inherited, 'buildah', { CI: 'true' })).not.toHaveProperty('CI');
    expect(childEnvironment(inherited, 'git', { CI: 'true' })).not.toHaveProperty('CI');
  });

  it("gives a tool kiln's own variables for one run, over the machine's", () => {
    const env = childEnvironment(inherited, 'git', { CI: 'true' }, { GIT_CONFIG_COUNT: '1' });
    expect(env).toMatchObject({ GIT_CONFIG_COUNT: '1', LC_ALL: 'C' });
    expect(env).not.toHaveProperty('CI');
  });

  it('never lets a declared variable replace the machine one or a fixed one', () => {
    const env = childEnvironment(inherited, 'packer', {
      PATH: '/tmp/evil',
      https_proxy: 'http://elsewhere:1',
      LC_ALL: 'de_DE.UTF-8',
    });

    expect(env).toMatchObject({
      PATH: '/usr/bin:/bin',
      https_proxy: 'http://proxy:3128',
      LC_ALL: 'C',
    });
  });
});

describe(environmentOf.name, () => {
  const inherited = { PATH: '/usr/bin:/bin', HOME: '/home/kiln' };

  it("builds a tool's environment as childEnvironment does", () => {
    expect(
      environmentOf(inherited, { tool: 'packer', declared: { CI: 'true' }, own: { A: '1' } }),
    ).toEqual(childEnvironment(inherited, 'packer', { CI: 'true' }, { A: '1' }));
  });

  it("gives a step CLI the machine's variables, a fixed locale and its own settings", () => {
    const env = environmentOf(inherited, { tool: 'step', settings: { TRIVY_INSECURE: 'true' } });

    expect(env).toEqual({ ...inherited, LC_ALL: 'C', TRIVY_INSECURE: 'true' });
  });
});
