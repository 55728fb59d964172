import { type BuildSpec, specDigest } from './build-spec.js';

const plain = (value: string): string => `fp(${value})`;

function spec(overrides: Partial<BuildSpec> = {}): BuildSpec {
  return {
    version: 1,
    form: 'wizard',
    method: 'buildx',
    config: {
      dockerfile: 'FROM scratch\n',
      platforms: ['linux/amd64'],
      secrets: { npm: 'sealed-1' },
    },
    source: {
      repository: 'https://git.example.com/mono.git',
      branch: 'main',
      commit: 'abc1234',
      context: '.',
    },
    output: { repository: 'registry.example.com/team/api', tags: ['v1'], registryType: 'harbor' },
    sbomTool: 'syft',
    scanTool: 'trivy',
    scanPolicy: null,
    secretManager: 'vault',
    env: { CI: 'true' },
    buildArgs: { SERVICE: 'api' },
    timeoutSeconds: 3600,
    ...overrides,
  };
}

describe(specDigest.name, () => {
  const base = spec();

  it.each<[string, Partial<BuildSpec>]>([
    ['the method', { method: 'kaniko' }],
    ['the method config', { config: { ...base.config, target: 'release' } }],
    ['a secret value', { config: { ...base.config, secrets: { npm: 'sealed-2' } } }],
    ['a secret id', { config: { ...base.config, secrets: { yarn: 'sealed-1' } } }],
    ['the commit', { source: { ...base.source, commit: 'def5678' } }],
    ['the branch', { source: { ...base.source, branch: 'release' } }],
    ['the build context', { source: { ...base.source, context: 'services/worker' } }],
    [
      'the output repository',
      { output: { ...base.output, repository: 'registry.example.com/team/worker' } },
    ],
    ['the tags', { output: { ...base.output, tags: ['v2'] } }],
    ['the registry type', { output: { ...base.output, registryType: 'quay' } }],
    ['the environment', { env: { CI: 'false' } }],
    ['the build args', { buildArgs: { SERVICE: 'worker' } }],
  ])('changes with %s', (_what, change) => {
    expect(specDigest(spec(change), plain)).not.toBe(specDigest(base, plain));
  });

  it.each<[string, Partial<BuildSpec>]>([
    ['the form', { form: 'reference' }],
    ['the SBOM tool', { sbomTool: 'trivy' }],
    ['the scan tool', { scanTool: 'grype' }],
    ['the scan policy', { scanPolicy: { fail_on: 'critical' } }],
    ['the secret manager', { secretManager: 'aws_secretsmanager' }],
    ['the timeout', { timeoutSeconds: 60 }],
  ])('does not change with %s, which does not decide the image', (_what, change) => {
    expect(specDigest(spec(change), plain)).toBe(specDigest(base, plain));
  });

  it('does not depend on the order of keys', () => {
    const reordered = spec({
      buildArgs: { B: '2', A: '1' },
      env: { Y: 'y', X: 'x' },
    });
    const ordered = spec({
      buildArgs: { A: '1', B: '2' },
      env: { X: 'x', Y: 'y' },
    });

    expect(specDigest(reordered, plain)).toBe(specDigest(ordered, plain));
  });

  it('sees secret values only through the fingerprint', () => {
    const seen: string[] = [];
    const digest = specDigest(base, (value) => {
      seen.push(value);
      return 'same';
    });

    expect(seen).toEqual(['sealed-1']);
    expect(
      specDigest(spec({ config: { ...base.config, secrets: { npm: 'other' } } }), () => 'same'),
    ).toBe(digest);
  });
});
