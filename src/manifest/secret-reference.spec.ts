import { isSecretReference, parseSecretReference, secretValueProblem } from './secret-reference.js';

describe('parseSecretReference', () => {
  it.each([
    [
      'vault:kv/data/team/app#token',
      { manager: 'vault', mount: 'kv', path: 'team/app', key: 'token' },
    ],
    [
      'vault:secret/team/data/app/db?version=3#password',
      { manager: 'vault', mount: 'secret/team', path: 'app/db', key: 'password', version: 3 },
    ],
    [
      'aws:prod/registry#password',
      { manager: 'aws_secretsmanager', secretId: 'prod/registry', key: 'password' },
    ],
    ['aws:prod/plain-token', { manager: 'aws_secretsmanager', secretId: 'prod/plain-token' }],
    [
      'aws:arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/registry-AbCdEf#user',
      {
        manager: 'aws_secretsmanager',
        secretId: 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/registry-AbCdEf',
        key: 'user',
      },
    ],
    ['azure:registry-password', { manager: 'azure_keyvault', name: 'registry-password' }],
    [
      'azure:db/0123456789abcdef0123456789abcdef#password',
      {
        manager: 'azure_keyvault',
        name: 'db',
        version: '0123456789abcdef0123456789abcdef',
        key: 'password',
      },
    ],
  ])('reads %s', (text, expected) => {
    expect(parseSecretReference(text)).toEqual({ reference: { text, ...expected } });
  });

  it.each([
    ['vault:kv/team/app#token', '/data/'],
    ['vault:kv/data/team/app', 'one key'],
    ['vault:kv/data/team/app#a#b', 'one key'],
    ['vault:kv/data/#token', '/data/'],
    ['vault:kv/data/app?v=2#token', '?version='],
    ['vault:kv/data/te am/app#token', 'path segments'],
    ['aws:', 'a name is'],
    ['aws:prod/x#a#b', 'at most one #'],
    ['aws:arn:aws:s3:::bucket', 'a name is'],
    ['azure:under_score', 'a name is'],
    ['azure:name/NOTAVERSION', 'a version is'],
    ['azure:name/0123456789abcdef0123456789abcdef/extra', 'a version is'],
  ])('refuses %s, saying what is wrong', (text, words) => {
    const parsed = parseSecretReference(text);
    expect(parsed).toEqual({ problem: expect.stringContaining(words) });
  });

  it('refuses a reference longer than 1024 characters', () => {
    expect(parseSecretReference(`aws:${'a'.repeat(1100)}`)).toEqual({
      problem: expect.stringContaining('at most 1024'),
    });
  });
});

describe('secretValueProblem', () => {
  it('has nothing to say of a plain value', () => {
    expect(isSecretReference('s3cr3t')).toBe(false);
    expect(secretValueProblem('s3cr3t', 'vault')).toBeUndefined();
  });

  it("refuses a reference to another manager than the build's", () => {
    expect(secretValueProblem('aws:prod/x#y', 'vault')).toBe(
      "references aws_secretsmanager, but this build's secret_manager_type is vault",
    );
  });

  it("accepts a well-formed reference to the build's manager", () => {
    expect(secretValueProblem('azure:registry-password', 'azure_keyvault')).toBeUndefined();
  });
});
