import { readRegistrySettings, readSecretManagerSettings } from './settings-validation.js';

describe(readSecretManagerSettings.name, () => {
  it('reads Vault settings with Kubernetes auth, leaving out what was not given', () => {
    expect(
      readSecretManagerSettings('vault', {
        address: 'https://vault.example.com:8200',
        auth: { method: 'kubernetes', role: 'kiln' },
      }),
    ).toEqual({
      settings: {
        address: 'https://vault.example.com:8200',
        auth: { method: 'kubernetes', role: 'kiln' },
      },
    });
  });

  it('names every problem by its path, nested ones included', () => {
    expect(
      readSecretManagerSettings('vault', {
        address: 'vault.example.com',
        auth: { method: 'token', tokenFile: 'relative/token', extra: 1 },
        token: 'hvs.plain',
      }),
    ).toEqual({
      details: {
        'settings.address': 'must be an http(s) URL',
        'settings.auth.tokenFile': 'must be an absolute file path',
        'settings.auth.extra': 'is not a setting of this type',
        'settings.token': 'is not a setting of this type',
      },
    });
  });

  it.each([
    ['aws_secretsmanager', { region: 'eu-west-1', endpoint: 'https://vpce.example.com' }],
    ['azure_keyvault', { vaultUrl: 'https://acme.vault.azure.net', caFile: '/etc/kiln/ca.pem' }],
  ] as const)('reads %s settings', (type, settings) => {
    expect(readSecretManagerSettings(type, settings)).toEqual({ settings });
  });

  it('refuses an Azure vault URL that is not https or has a path', () => {
    expect(
      readSecretManagerSettings('azure_keyvault', { vaultUrl: 'http://acme.vault.azure.net/x' }),
    ).toEqual({ details: { 'settings.vaultUrl': 'must be an https URL with no path' } });
  });
});

describe('credentials inside URLs', () => {
  it.each([
    [
      'vault',
      { address: 'http://kiln:PASSWORD@vault:8200', auth: { method: 'kubernetes', role: 'r' } },
      'settings.address',
      'auth',
    ],
    [
      'aws_secretsmanager',
      { region: 'eu-west-1', endpoint: 'https://AKIA:SECRET@vpce.example.com' },
      'settings.endpoint',
      'credentialsFile',
    ],
    [
      'azure_keyvault',
      { vaultUrl: 'https://app:SECRET@acme.vault.azure.net' },
      'settings.vaultUrl',
      'federatedTokenFile',
    ],
    [
      'azure_keyvault',
      {
        vaultUrl: 'https://acme.vault.azure.net',
        authorityHost: 'https://token@login.example.com',
      },
      'settings.authorityHost',
      'federatedTokenFile',
    ],
  ] as const)(
    'refuses them in %s settings, naming the field and where credentials go',
    (type, settings, field, instead) => {
      const read = readSecretManagerSettings(type, settings);

      expect(read).toEqual({
        details: { [field]: expect.stringContaining('must not carry credentials') },
      });
      expect((read as { details: Record<string, string> }).details[field]).toContain(instead);
      expect(JSON.stringify(read)).not.toContain('SECRET');
      expect(JSON.stringify(read)).not.toContain('PASSWORD');
    },
  );

  it('refuses them in an S3 registry endpoint, pointing to the key references', () => {
    const read = readRegistrySettings('s3', {
      bucket: 'images',
      region: 'eu-west-1',
      endpoint: 'http://minio:minio-secret@minio.example.com:9000',
    });

    expect(read).toEqual({
      details: { 'settings.endpoint': expect.stringContaining('accessKeyId and secretAccessKey') },
    });
  });
});

describe(readRegistrySettings.name, () => {
  it('reads Harbor settings whose password is a reference', () => {
    const settings = {
      address: 'harbor.example.com:8443',
      namespace: 'team',
      username: 'robot$team+ci',
      password: 'vault:kv/data/registry/harbor#secret',
    };
    expect(readRegistrySettings('harbor', settings)).toEqual({ settings });
  });

  it('refuses a plain password: kiln stores no credential', () => {
    const read = readRegistrySettings('quay', {
      address: 'quay.io',
      username: 'org+robot',
      password: 'plain-token',
    });
    expect(read).toEqual({
      details: { 'settings.password': expect.stringContaining('must be a secret reference') },
    });
  });

  it('wants a username and a password together', () => {
    expect(
      readRegistrySettings('artifactory', { address: 'acme.jfrog.io', username: 'ci' }),
    ).toEqual({ details: { 'settings.password': 'username and password go together' } });
  });

  it('reads S3 settings and refuses a prefix the object keys cannot hold', () => {
    const good = {
      bucket: 'acme-images',
      prefix: 'builds/ci',
      region: 'eu-west-1',
      accessKeyId: 'aws:ci/s3#id',
      secretAccessKey: 'aws:ci/s3#secret',
    };
    expect(readRegistrySettings('s3', good)).toEqual({ settings: good });
    expect(readRegistrySettings('s3', { ...good, prefix: '/builds/ci' })).toEqual({
      details: { 'settings.prefix': expect.stringContaining('segments') },
    });
    expect(readRegistrySettings('s3', { ...good, prefix: 'builds/$x' })).toEqual({
      details: { 'settings.prefix': expect.stringContaining('segments') },
    });
  });

  it('refuses settings that are not an object', () => {
    expect(readRegistrySettings('harbor', [])).toEqual({
      details: { settings: 'must be a JSON object' },
    });
  });
});
