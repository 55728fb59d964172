import {
  carriesCredentials,
  withoutCredentials,
  withoutCredentialsDeep,
} from './url-credentials.js';

describe(withoutCredentials.name, () => {
  it.each([
    ['http://kiln:PASSWORD@vault.example.com:8200', 'http://vault.example.com:8200'],
    ['https://ghp_token123@github.com/org/repo.git', 'https://github.com/org/repo.git'],
    ['https://user:p@ss@host/x', 'https://host/x'],
    ['HTTPS://u:p@host', 'HTTPS://host'],
    ['git://user:pw@git.example.com/repo', 'git://git.example.com/repo'],
    ['ssh://git:secret@host/repo', 'ssh://host/repo'],
    [
      'cannot reach Vault at http://kiln:PASSWORD@vault:8200 (ECONNREFUSED); also s3 http://AKIA:SECRET@minio:9000/bucket',
      'cannot reach Vault at http://vault:8200 (ECONNREFUSED); also s3 http://minio:9000/bucket',
    ],
  ])('removes the credentials of %s', (text, expected) => {
    expect(withoutCredentials(text)).toBe(expected);
    expect(carriesCredentials(text)).toBe(true);
    expect(carriesCredentials(expected)).toBe(false);
  });

  it.each([
    'https://github.com/org/repo.git',
    'ssh://git@github.com/org/repo.git',
    'git@github.com:org/repo.git',
    'mailto:someone@example.com',
    'https://host/path?email=a@b.c',
    'https://host/a@b',
    'no URL here, user:pw@host',
    '{"endpoint":"https://minio:9000","username":"robot@team"}',
  ])('leaves %s as it is', (text) => {
    expect(withoutCredentials(text)).toBe(text);
    expect(carriesCredentials(text)).toBe(false);
  });
});

describe('withoutCredentials on hostile text', () => {
  it('reads a 1 MiB line built to make a naive pattern backtrack, and leaves it as it is', () => {
    const line = `${'a.'.repeat(512 * 1024)}://`;

    expect(withoutCredentials(line)).toBe(line);
  });
});

describe(withoutCredentialsDeep.name, () => {
  it('cleans every string of a settings object, nested ones included, and keeps the rest', () => {
    expect(
      withoutCredentialsDeep({
        address: 'http://kiln:PASSWORD@vault:8200',
        auth: { method: 'token', urls: ['https://t0ken@a.example.com'] },
        insecure: true,
        port: 8200,
      }),
    ).toEqual({
      address: 'http://vault:8200',
      auth: { method: 'token', urls: ['https://a.example.com'] },
      insecure: true,
      port: 8200,
    });
  });
});
