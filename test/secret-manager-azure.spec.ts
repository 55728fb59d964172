import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AzureKeyVault } from '../src/secret-managers/azure-key-vault.js';
import {
  type ResolveLimits,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from '../src/secret-managers/secret-manager.js';
import { type AzureReference } from '../src/manifest/secret-reference.js';
import type { AzureKeyVaultSettings } from '../src/secret-managers/settings.js';
import { FakeAzureKeyVault } from './support/fake-azure-key-vault.js';

// The real @azure/keyvault-secrets and @azure/identity, pointed at FakeAzureKeyVault over HTTPS:
// Key Vault's 401 challenge, Entra ID's OpenID configuration and the workload identity's
// client-assertion token exchange all run as they would against Azure.

const TENANT = '3f1c8a52-7d2e-4b7a-9c1e-5a6b7c8d9e0f';
const CLIENT = '6a0e4b7c-1d2f-4e3a-8b9c-0d1e2f3a4b5c';
const FEDERATED_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.kiln-service-account.signature';
const VALUE = 'hunter2-s3cr3t-value';
const SMALL: ResolveLimits = { timeoutMs: 200, attempts: 2 };

function reference(name: string, extra: { version?: string; key?: string } = {}): AzureReference {
  const text = `azure:${name}${extra.version === undefined ? '' : `/${extra.version}`}${extra.key === undefined ? '' : `#${extra.key}`}`;
  return { manager: 'azure_keyvault', text, name, ...extra };
}

describe(AzureKeyVault.name, () => {
  let fake: FakeAzureKeyVault;
  let dir: string;
  let tokenFile: string;

  beforeEach(async () => {
    fake = await FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
    });
    dir = mkdtempSync(join(tmpdir(), 'kiln-azure-'));
    tokenFile = join(dir, 'azure-identity-token');
    writeFileSync(tokenFile, `${FEDERATED_TOKEN}\n`);
  });

  afterEach(async () => {
    await fake.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const settings = (overrides: Partial<AzureKeyVaultSettings> = {}): AzureKeyVaultSettings => ({
    vaultUrl: fake.vaultUrl,
    tenantId: TENANT,
    clientId: CLIENT,
    federatedTokenFile: tokenFile,
    authorityHost: fake.authorityHost,
    ...overrides,
  });

  const adapter = (
    limits?: ResolveLimits,
    overrides: Partial<AzureKeyVaultSettings> = {},
  ): AzureKeyVault => new AzureKeyVault(settings(overrides), limits, { agent: fake.agent() });

  /** The error `promise` rejects with (failing the test when it resolves). */
  const rejection = async (promise: Promise<unknown>): Promise<Error> => {
    try {
      await promise;
    } catch (error) {
      return error as Error;
    }
    throw new Error('expected a rejection');
  };

  it('resolves the newest version of a secret', async () => {
    fake.put('db-password', 'older');
    fake.put('db-password', VALUE);

    await expect(adapter().resolve(reference('db-password'))).resolves.toBe(VALUE);
  });

  it('resolves the version the reference names', async () => {
    const older = fake.put('db-password', 'older');
    fake.put('db-password', VALUE);

    await expect(adapter().resolve(reference('db-password', { version: older }))).resolves.toBe(
      'older',
    );
  });

  it('resolves one key of a JSON value', async () => {
    fake.put('db', JSON.stringify({ user: 'kiln', password: VALUE }));

    await expect(adapter().resolve(reference('db', { key: 'password' }))).resolves.toBe(VALUE);
  });

  it('signs in with the federated token as client assertion for the vault scope, once for many reads', async () => {
    fake.put('db-password', VALUE);
    const manager = adapter();

    await manager.resolve(reference('db-password'));
    await manager.resolve(reference('db-password'));

    const tokenRequests = fake.requestsTo('token');
    expect(tokenRequests).toHaveLength(1);
    const form = new URLSearchParams(tokenRequests[0]!.body);
    expect(tokenRequests[0]!.path).toMatch(new RegExp(`^/${TENANT}/oauth2/v2.0/token`));
    expect(form.get('client_id')).toBe(CLIENT);
    expect(form.get('client_assertion')).toBe(FEDERATED_TOKEN);
    expect(form.get('scope')).toBe('https://vault.azure.net/.default');
    const reads = fake.requestsTo('vault').filter((r) => r.headers.authorization !== undefined);
    expect(reads).toHaveLength(2);
  });

  it('a missing secret is SecretNotFoundError naming the reference', async () => {
    const error = await rejection(adapter().resolve(reference('nothing-here')));

    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain('azure:nothing-here');
  });

  it('a missing version is SecretNotFoundError naming the reference', async () => {
    fake.put('db-password', VALUE);
    const ref = reference('db-password', { version: '0'.repeat(32) });

    const error = await rejection(adapter().resolve(ref));

    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain(ref.text);
  });

  it('a secret the identity may not read is SecretNotFoundError', async () => {
    fake.put('db-password', VALUE);
    fake.deny('db-password');

    const error = await rejection(adapter().resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain('azure:db-password');
  });

  it('a key missing from the JSON value is SecretNotFoundError', async () => {
    fake.put('db', JSON.stringify({ user: 'kiln' }));

    const error = await rejection(adapter().resolve(reference('db', { key: 'password' })));

    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).toContain('azure:db#password');
  });

  it('a key asked of a value that is not JSON is SecretNotFoundError that does not quote the value', async () => {
    fake.put('db-password', VALUE);

    const error = await rejection(adapter().resolve(reference('db-password', { key: 'password' })));

    expect(error).toBeInstanceOf(SecretNotFoundError);
    expect(error.message).not.toContain(VALUE);
  });

  it("a federated token Entra ID does not accept is SecretManagerUnavailableError: Azure refused kiln's workload identity", async () => {
    fake.put('db-password', VALUE);
    writeFileSync(tokenFile, 'a-token-of-another-service-account');

    const error = await rejection(adapter().resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("Azure refused kiln's workload identity");
    expect(error.message).toContain('invalid_client');
  });

  it('a client id Entra ID does not know is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);

    const error = await rejection(
      adapter(undefined, { clientId: '00000000-0000-0000-0000-000000000000' }).resolve(
        reference('db-password'),
      ),
    );

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("Azure refused kiln's workload identity");
  });

  it('an access token Key Vault does not accept is SecretManagerUnavailableError', async () => {
    await fake.stop();
    fake = await FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
      tokenLifetimeSeconds: 0,
    });
    fake.put('db-password', VALUE);

    const error = await rejection(adapter().resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain("refused kiln's access token");
  });

  it('a vault that never answers is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);
    fake.hang = true;

    const error = await rejection(adapter(SMALL).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(fake.requestsTo('vault').length).toBeGreaterThanOrEqual(1);
  });

  it('an Entra ID that never answers is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);
    fake.hangLogin = true;

    const error = await rejection(adapter(SMALL).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(fake.requestsTo('openid').length).toBeGreaterThanOrEqual(1);
  });

  it('an attempt that times out is tried again', async () => {
    fake.put('db-password', VALUE);
    fake.hangNext(1);

    await expect(
      adapter({ timeoutMs: 500, attempts: 3 }).resolve(reference('db-password')),
    ).resolves.toBe(VALUE);
    expect(fake.requestsTo('vault').length).toBeGreaterThanOrEqual(3);
  });

  it('a vault 5xx followed by an answer resolves', async () => {
    fake.put('db-password', VALUE);
    fake.failNext(503, 2);

    await expect(
      adapter({ timeoutMs: 2_000, attempts: 3 }).resolve(reference('db-password')),
    ).resolves.toBe(VALUE);
  });

  it.each(['openid', 'token'] as const)(
    'an Entra ID 5xx from the %s endpoint followed by an answer resolves',
    async (endpoint) => {
      fake.put('db-password', VALUE);
      fake.failNext(500, 1, endpoint);

      await expect(
        adapter({ timeoutMs: 2_000, attempts: 3 }).resolve(reference('db-password')),
      ).resolves.toBe(VALUE);
      expect(fake.requestsTo(endpoint)).toHaveLength(2);
    },
  );

  it('an Entra ID token endpoint that answers 5xx to every attempt is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);
    fake.failNext(503, 10, 'token');
    // Time enough for every answer to come back on a loaded machine: this is about 5xx answers,
    // and a timeout would end it with another message ("did not answer within").
    const limits: ResolveLimits = { timeoutMs: 5_000, attempts: 2 };

    const error = await rejection(adapter(limits).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('Microsoft Entra ID is unavailable');
    expect(fake.requestsTo('token')).toHaveLength(limits.attempts);
  });

  it('an Entra ID that cannot give its OpenID configuration is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);
    fake.failNext(503, 10, 'openid');

    const error = await rejection(adapter(SMALL).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('OpenID configuration');
  });

  it('a vault that answers 5xx to every attempt is SecretManagerUnavailableError', async () => {
    fake.put('db-password', VALUE);
    fake.failNext(503, 10);

    const error = await rejection(adapter(SMALL).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('503');
    expect(fake.requestsTo('vault')).toHaveLength(SMALL.attempts);
  });

  it('a vault nobody listens at is SecretManagerUnavailableError', async () => {
    const closed = await FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
    });
    const vaultUrl = closed.vaultUrl;
    await closed.stop();

    const error = await rejection(adapter(SMALL, { vaultUrl }).resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(error.message).toContain('cannot reach Key Vault');
  });

  it("without a federated token file it asks DefaultAzureCredential's chain: one with nothing to offer is SecretManagerUnavailableError", async () => {
    fake.put('db-password', VALUE);
    const manager = new AzureKeyVault({ vaultUrl: fake.vaultUrl }, SMALL, { agent: fake.agent() });

    const error = await rejection(manager.resolve(reference('db-password')));

    expect(error).toBeInstanceOf(SecretManagerUnavailableError);
    expect(fake.requestsTo('token')).toHaveLength(0);
  });

  it("an abort of the caller's signal rejects with its reason", async () => {
    fake.hang = true;
    const controller = new AbortController();
    const reason = new Error('the build was cancelled');

    const resolving = adapter().resolve(reference('db-password'), controller.signal);
    controller.abort(reason);

    await expect(resolving).rejects.toBe(reason);
  });

  it('puts neither a value nor the federated token in any error it raises', async () => {
    fake.put('db-password', VALUE);
    fake.put('db', JSON.stringify({ password: VALUE }));
    const errors = [
      await rejection(adapter().resolve(reference('db-password', { key: 'password' }))),
      await rejection(adapter().resolve(reference('db', { key: 'user' }))),
      await rejection(adapter().resolve(reference('nothing-here'))),
    ];
    fake.hang = true;
    errors.push(await rejection(adapter(SMALL).resolve(reference('db-password'))));
    fake.hang = false;
    writeFileSync(tokenFile, 'a-token-of-another-service-account');
    errors.push(await rejection(adapter().resolve(reference('db-password'))));

    for (const error of errors) {
      const printed = `${String(error)} ${JSON.stringify(error)} ${String(error.cause)}`;
      expect(printed).not.toContain(VALUE);
      expect(printed).not.toContain(FEDERATED_TOKEN);
      expect(printed).not.toContain('a-token-of-another-service-account');
    }
  });
});
