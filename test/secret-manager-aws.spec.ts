import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { AwsSecretsManager } from '../src/secret-managers/aws-secrets-manager.js';
import {
  type ResolveLimits,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from '../src/secret-managers/secret-manager.js';
import { type AwsReference } from '../src/manifest/secret-reference.js';
import { FakeAwsSecretsManager } from './support/fake-aws-secrets-manager.js';

/** The real AWS SDK pointed at test/support/fake-aws-secrets-manager.ts by endpoint. */

const REGION = 'eu-west-1';
const ACCESS_KEY_ID = 'AKIAKILNTESTKEY00001';
const SECRET_ACCESS_KEY = 'kiln/test+secret-access-key-0123456789';
const PLAIN = 'plain-secret-value-7d1f';
const PASSWORD = 'json-password-value-93ab';
const USERNAME = 'json-username-value-51c2';
const JSON_SECRET = JSON.stringify({ username: USERNAME, password: PASSWORD, port: 5432 });
/** Every value and credential the tests hold: none may appear in an error. */
const NEVER_PRINTED = [PLAIN, PASSWORD, USERNAME, SECRET_ACCESS_KEY, 'binary-value-c0de'];
const FAST: ResolveLimits = { timeoutMs: 200, attempts: 2 };

const reference = (secretId: string, key?: string): AwsReference => ({
  manager: 'aws_secretsmanager',
  text: `aws:${secretId}${key === undefined ? '' : `#${key}`}`,
  secretId,
  ...(key !== undefined && { key }),
});

/** The error `promise` rejects with, after checking that no value or credential is in it. */
async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Error);
  const printed = `${inspect(error, { depth: 10 })}\n${JSON.stringify(error)}`;
  for (const secret of NEVER_PRINTED) expect(printed).not.toContain(secret);
  return error as Error;
}

describe(AwsSecretsManager.name, () => {
  let fake: FakeAwsSecretsManager;
  let dir: string;
  let credentialsFile: string;

  /** A credentials file with profile `kiln` holding `secretAccessKey` for the test key id. */
  const writeCredentials = (name: string, accessKeyId: string, secretAccessKey: string) => {
    const file = join(dir, name);
    writeFileSync(
      file,
      `[kiln]\naws_access_key_id = ${accessKeyId}\naws_secret_access_key = ${secretAccessKey}\n`,
    );
    return file;
  };

  const manager = (limits?: ResolveLimits, file = credentialsFile) =>
    new AwsSecretsManager(
      { region: REGION, endpoint: fake.url, credentialsFile: file, profile: 'kiln' },
      limits,
    );

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kiln-aws-sm-'));
    credentialsFile = writeCredentials('credentials', ACCESS_KEY_ID, SECRET_ACCESS_KEY);
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeEach(async () => {
    fake = await FakeAwsSecretsManager.start({ region: REGION });
    fake.addCredentials(ACCESS_KEY_ID, SECRET_ACCESS_KEY);
    fake.put('kiln/plain', PLAIN);
    fake.put('kiln/database', JSON_SECRET);
  });

  afterEach(() => fake.stop());

  it('resolves a plain SecretString by name', async () => {
    await expect(manager().resolve(reference('kiln/plain'))).resolves.toBe(PLAIN);
  });

  it('resolves one key of a JSON SecretString', async () => {
    await expect(manager().resolve(reference('kiln/database', 'password'))).resolves.toBe(PASSWORD);
  });

  it('resolves a secret by its ARN', async () => {
    const { arn } = fake.put('kiln/by-arn', PLAIN);
    await expect(manager().resolve(reference(arn))).resolves.toBe(PLAIN);
  });

  it('sends one signed GetSecretValue for the secret id over AWS JSON 1.1', async () => {
    await manager().resolve(reference('kiln/database', 'username'));
    expect(fake.requests).toHaveLength(1);
    const [request] = fake.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/' });
    expect(request!.headers['x-amz-target']).toBe('secretsmanager.GetSecretValue');
    expect(request!.headers['content-type']).toBe('application/x-amz-json-1.1');
    expect(request!.headers.authorization).toContain(
      `Credential=${ACCESS_KEY_ID}/${String(request!.headers['x-amz-date']).slice(0, 8)}/${REGION}/secretsmanager/aws4_request`,
    );
    expect(JSON.parse(request!.body)).toEqual({ SecretId: 'kiln/database' });
  });

  it('resolves a binary secret without a key as its UTF-8 text', async () => {
    fake.put('kiln/binary', { binary: Buffer.from('binary-value-c0de', 'utf8') });
    await expect(manager().resolve(reference('kiln/binary'))).resolves.toBe('binary-value-c0de');
  });

  it.each([
    ['a secret that does not exist', 'kiln/missing', undefined, 'ResourceNotFoundException'],
    ['a key the JSON secret lacks', 'kiln/database', 'token', 'no key "token"'],
    ['a key of a secret that is not JSON', 'kiln/plain', 'password', 'not a JSON object'],
    ['a key that holds no string', 'kiln/database', 'port', 'does not hold a string'],
    ['a key of a JSON array', 'kiln/array', '0', 'not a JSON object'],
    ['a key of a binary secret', 'kiln/binary', 'password', 'binary secrets'],
    ['a binary secret that is not UTF-8', 'kiln/not-utf8', undefined, 'not UTF-8'],
  ])('reports %s as not found', async (_case, secretId, key, detail) => {
    fake.put('kiln/array', JSON.stringify([PASSWORD]));
    fake.put('kiln/binary', { binary: Buffer.from('binary-value-c0de', 'utf8') });
    fake.put('kiln/not-utf8', { binary: Uint8Array.of(0xff, 0xfe, 0x00) });
    const ref = reference(secretId, key);
    const error = await failure(manager().resolve(ref));
    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect((error as SecretNotFoundError).reference).toBe(ref.text);
    expect(error.message).toContain(ref.text);
    expect(error.message).toContain(detail);
  });

  it('reports a secret kiln may not read as not found', async () => {
    fake.denyAccess('kiln/database');
    const ref = reference('kiln/database', 'password');
    const error = await failure(manager().resolve(ref));
    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain(ref.text);
    expect(error.message).toContain('AccessDeniedException');
  });

  it('reports a secret AWS cannot decrypt as not found', async () => {
    fake.failNext(400, 1, 'DecryptionFailure');
    const error = await failure(manager().resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain('DecryptionFailure');
  });

  it('reports a wrong secret access key as credentials AWS refused', async () => {
    const wrong = writeCredentials('wrong-secret', ACCESS_KEY_ID, 'not-the-secret-access-key');
    const error = await failure(manager(undefined, wrong).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("AWS refused kiln's credentials (InvalidSignatureException)");
    expect(error.message).not.toContain('not-the-secret-access-key');
  });

  it('reports an access key AWS does not know as credentials AWS refused', async () => {
    const unknown = writeCredentials('unknown-key', 'AKIAUNKNOWNKEY000000', SECRET_ACCESS_KEY);
    const error = await failure(manager(undefined, unknown).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("AWS refused kiln's credentials (UnrecognizedClientException)");
  });

  it('reports an expired session token as credentials AWS refused', async () => {
    fake.failNext(400, 1, 'ExpiredTokenException');
    const error = await failure(manager().resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("AWS refused kiln's credentials (ExpiredTokenException)");
  });

  it('reports a credentials file without the profile as no AWS credentials', async () => {
    const other = join(dir, 'other-profile');
    writeFileSync(
      other,
      `[other]\naws_access_key_id = ${ACCESS_KEY_ID}\naws_secret_access_key = ${SECRET_ACCESS_KEY}\n`,
    );
    const error = await failure(manager(undefined, other).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('no AWS credentials');
    expect(fake.requests).toHaveLength(0);
  });

  it('retries throttling and resolves once AWS answers', async () => {
    fake.failNext(400, 2, 'ThrottlingException');
    await expect(
      manager({ timeoutMs: 5_000, attempts: 3 }).resolve(reference('kiln/plain')),
    ).resolves.toBe(PLAIN);
    expect(fake.requests).toHaveLength(3);
  });

  it('reports throttling on every attempt as unavailable', async () => {
    fake.failNext(400, 5, 'ThrottlingException');
    const error = await failure(manager(FAST).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('ThrottlingException');
    expect(fake.requests).toHaveLength(FAST.attempts);
  });

  it('reports a server error on every attempt as unavailable', async () => {
    fake.failNext(500, 5, 'InternalServiceError');
    const error = await failure(manager(FAST).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('HTTP 500');
    expect(fake.requests).toHaveLength(FAST.attempts);
  });

  it('reports a server that never answers as unavailable', async () => {
    fake.hang = true;
    const error = await failure(manager(FAST).resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('TimeoutError');
    expect(fake.requests).toHaveLength(FAST.attempts);
  });

  it('reports an endpoint nobody listens on as unavailable', async () => {
    const adapter = manager(FAST);
    await fake.stop();
    const error = await failure(adapter.resolve(reference('kiln/plain')));
    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    // The SDK keeps ECONNREFUSED in production; under jest's VM Node's net errors come from
    // another realm and the SDK's retry middleware rewraps them without their code.
    expect(error.message).toContain('could not be asked for aws:kiln/plain');
  });

  it('rejects with the abort reason when the signal aborts', async () => {
    fake.hang = true;
    const controller = new AbortController();
    const reason = new Error('build cancelled');
    const resolving = manager({ timeoutMs: 30_000, attempts: 1 }).resolve(
      reference('kiln/plain'),
      controller.signal,
    );
    while (fake.requests.length === 0) await new Promise((tick) => setTimeout(tick, 10));
    controller.abort(reason);
    await expect(resolving).rejects.toBe(reason);
  });

  it('refuses a reference meant for another manager', async () => {
    await expect(
      manager().resolve({
        manager: 'vault',
        text: 'vault:kv/data/x#y',
        mount: 'kv',
        path: 'x',
        key: 'y',
      }),
    ).rejects.toThrow('cannot resolve a vault reference');
  });
});
