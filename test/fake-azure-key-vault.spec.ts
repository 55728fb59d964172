import { get } from 'node:https';
import { Agent, fetch, type Response } from 'undici';
import { FAKE_VAULT_HOST, FakeAzureKeyVault } from './support/fake-azure-key-vault.js';

// Pins the wire shapes FakeAzureKeyVault serves (and @azure/keyvault-secrets and @azure/identity
// rely on) by talking to it with plain fetch: if the fake drifts from Key Vault's and Entra ID's
// documented protocol, this fails.

const TENANT = '3f1c8a52-7d2e-4b7a-9c1e-5a6b7c8d9e0f';
const CLIENT = '6a0e4b7c-1d2f-4e3a-8b9c-0d1e2f3a4b5c';
const FEDERATED_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.service-account.token';
const API = 'api-version=7.6';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

describe(FakeAzureKeyVault.name, () => {
  let fake: FakeAzureKeyVault;
  let dispatcher: Agent;

  beforeEach(async () => {
    fake = await FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
    });
    dispatcher = new Agent({ connect: { ca: fake.ca } });
  });

  afterEach(async () => {
    await dispatcher.close();
    await fake.stop();
  });

  const send = (
    path: string,
    init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  ): Promise<Response> => fetch(`${fake.url}${path}`, { ...init, dispatcher });

  const tokenRequest = (fields: Record<string, string> = {}): Promise<Response> =>
    send(`/${TENANT}/oauth2/v2.0/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: CLIENT,
        scope: 'https://vault.azure.net/.default',
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: FEDERATED_TOKEN,
        ...fields,
      }).toString(),
    });

  const accessToken = async (): Promise<string> => {
    const response = await tokenRequest();
    expect(response.status).toBe(200);
    return ((await response.json()) as { access_token: string }).access_token;
  };

  const getSecret = async (path: string, token?: string): Promise<Response> =>
    send(path, { headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } });

  it('publishes an OpenID configuration whose issuer and token endpoint are on its authority', async () => {
    const response = await send(`/${TENANT}/v2.0/.well-known/openid-configuration`);

    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      issuer: `${fake.authorityHost}/${TENANT}/v2.0`,
      token_endpoint: `${fake.authorityHost}/${TENANT}/oauth2/v2.0/token`,
      authorization_endpoint: `${fake.authorityHost}/${TENANT}/oauth2/v2.0/authorize`,
    });
    expect(typeof body.jwks_uri).toBe('string');
  });

  it('answers an OpenID configuration or token request for another tenant with invalid_tenant', async () => {
    const other = '00000000-0000-0000-0000-000000000000';
    const config = await send(`/${other}/v2.0/.well-known/openid-configuration`);
    const token = await send(`/${other}/oauth2/v2.0/token`, { method: 'POST', body: '' });

    for (const response of [config, token]) {
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({
        error: 'invalid_tenant',
        error_codes: [90002],
      });
    }
  });

  it('exchanges the federated token, as client assertion, for a bearer token with a lifetime', async () => {
    const response = await tokenRequest();

    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 3600 });
    expect(body.access_token).toEqual(expect.any(String));
  });

  it.each([
    ['another assertion', { client_assertion: 'someone-else' }, 401, 'invalid_client'],
    ['another assertion type', { client_assertion_type: 'jwt' }, 401, 'invalid_client'],
    ['an unknown client id', { client_id: 'unknown-app' }, 400, 'unauthorized_client'],
    ['another grant type', { grant_type: 'password' }, 400, 'unsupported_grant_type'],
    [
      'a scope other than the vault',
      { scope: 'https://graph.microsoft.com/.default' },
      400,
      'invalid_scope',
    ],
  ])('refuses a token request with %s', async (_case, fields, status, error) => {
    const response = await tokenRequest(fields);

    expect(response.status).toBe(status);
    const body = (await response.json()) as { error: string; error_description: string };
    expect(body.error).toBe(error);
    expect(body.error_description).toMatch(/^AADSTS\d+: /);
  });

  it('refuses a token request that is not form-encoded', async () => {
    const response = await send(`/${TENANT}/oauth2/v2.0/token`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: CLIENT }),
    });

    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'invalid_request' });
  });

  it('challenges a vault request without a bearer token with the tenant and the vault resource', async () => {
    const response = await getSecret(`/secrets/db-password/?${API}`);

    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer authorization="https://login.microsoftonline.com/${TENANT}", resource="https://vault.azure.net"`,
    );
    expect(await response.json()).toMatchObject({ error: { code: 'Unauthorized' } });
  });

  it('challenges a bearer token it did not issue, and one that has expired', async () => {
    const foreign = await getSecret(`/secrets/db-password?${API}`, 'not-a-token-it-issued');
    await fake.stop();
    fake = await FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
      tokenLifetimeSeconds: 0,
    });
    const expired = await getSecret(`/secrets/db-password?${API}`, await accessToken());

    for (const response of [foreign, expired]) {
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toContain(
        'resource="https://vault.azure.net"',
      );
    }
  });

  it('refuses a vault request without an api-version or with one Key Vault does not know', async () => {
    const token = await accessToken();
    const missing = await getSecret('/secrets/db-password', token);
    const unknown = await getSecret('/secrets/db-password?api-version=1999-01-01', token);

    for (const response of [missing, unknown]) {
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: { code: 'BadParameter' } });
    }
  });

  it('answers the newest version of a secret, with or without a trailing slash', async () => {
    fake.put('db-password', 'first');
    const newest = fake.put('db-password', 'second');
    const token = await accessToken();

    for (const path of [`/secrets/db-password?${API}`, `/secrets/db-password/?api%2Dversion=7.6`]) {
      const response = await getSecret(path, token);
      expect(response.status).toBe(200);
      const body = (await response.json()) as Record<string, unknown>;
      expect(body).toMatchObject({
        value: 'second',
        id: `https://127.0.0.1:${fake.port}/secrets/db-password/${newest}`,
        attributes: { enabled: true },
      });
    }
  });

  it('answers an older version by its id', async () => {
    const first = fake.put('db-password', 'first');
    fake.put('db-password', 'second');

    const response = await getSecret(`/secrets/db-password/${first}?${API}`, await accessToken());

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ value: 'first' });
  });

  it('answers 404 SecretNotFound for an unknown secret or version', async () => {
    fake.put('db-password', 'first');
    const token = await accessToken();
    const unknownName = await getSecret(`/secrets/nothing-here?${API}`, token);
    const unknownVersion = await getSecret(`/secrets/db-password/${'0'.repeat(32)}?${API}`, token);

    for (const response of [unknownName, unknownVersion]) {
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: 'SecretNotFound' } });
    }
  });

  it('answers 403 Forbidden for a secret the identity was denied', async () => {
    fake.put('db-password', 'first');
    fake.deny('db-password');

    const response = await getSecret(`/secrets/db-password?${API}`, await accessToken());

    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({
      error: { code: 'Forbidden', innererror: { code: 'ForbiddenByRbac' } },
    });
  });

  it('fails the next requests to one endpoint with the status it was told, then serves again', async () => {
    fake.put('db-password', 'first');
    const token = await accessToken();
    fake.failNext(503, 2);

    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await getSecret(`/secrets/db-password?${API}`, token)).status);
    const login = await tokenRequest();

    expect(statuses).toEqual([503, 503, 200]);
    expect(login.status).toBe(200);
  });

  it('fails the OpenID configuration or the token endpoint alone, with an OAuth error body', async () => {
    fake.failNext(500, 1, 'openid');
    const config = await send(`/${TENANT}/v2.0/.well-known/openid-configuration`);
    const tokenAfterConfigFault = await tokenRequest();
    fake.failNext(503, 1, 'token');
    const token = await tokenRequest();
    const configAfterTokenFault = await send(`/${TENANT}/v2.0/.well-known/openid-configuration`);

    expect([config.status, tokenAfterConfigFault.status]).toEqual([500, 200]);
    expect([token.status, configAfterTokenFault.status]).toEqual([503, 200]);
    for (const response of [config, token]) {
      expect(await response.json()).toMatchObject({ error: 'temporarily_unavailable' });
    }
  });

  it('leaves vault requests unanswered while hanging, and still answers Entra ID', async () => {
    const token = await accessToken();
    fake.hang = true;

    await expect(
      fetch(`${fake.url}/secrets/db-password?${API}`, {
        headers: { Authorization: `Bearer ${token}` },
        dispatcher,
        signal: AbortSignal.timeout(300),
      }),
    ).rejects.toThrow();
    expect((await tokenRequest()).status).toBe(200);
  });

  it('leaves only the next request unanswered after hangNext', async () => {
    fake.put('db-password', 'first');
    const token = await accessToken();
    fake.hangNext(1);

    await expect(
      fetch(`${fake.url}/secrets/db-password?${API}`, {
        headers: { Authorization: `Bearer ${token}` },
        dispatcher,
        signal: AbortSignal.timeout(300),
      }),
    ).rejects.toThrow();
    expect((await getSecret(`/secrets/db-password?${API}`, token)).status).toBe(200);
  });

  it('leaves Entra ID requests unanswered while hanging login', async () => {
    fake.hangLogin = true;

    await expect(
      fetch(`${fake.url}/${TENANT}/v2.0/.well-known/openid-configuration`, {
        dispatcher,
        signal: AbortSignal.timeout(300),
      }),
    ).rejects.toThrow();
  });

  it('records each request with its endpoint, method, path, headers and body', async () => {
    await tokenRequest();
    await getSecret(`/secrets/db-password?${API}`);

    expect(fake.requests).toEqual([
      expect.objectContaining({
        endpoint: 'token',
        method: 'POST',
        path: `/${TENANT}/oauth2/v2.0/token`,
        headers: expect.objectContaining({ 'content-type': 'application/x-www-form-urlencoded' }),
        body: expect.stringContaining('grant_type=client_credentials'),
      }),
      expect.objectContaining({
        endpoint: 'vault',
        method: 'GET',
        path: `/secrets/db-password?${API}`,
      }),
    ]);
    expect(fake.requestsTo('vault')).toHaveLength(1);
  });

  it("gives an https agent that reaches the vault by name with the fake's CA and resolves no other name", async () => {
    const agent = fake.agent();
    const status = (url: string): Promise<number> =>
      new Promise((done, fail) => {
        get(url, { agent }, (response) => {
          response.resume();
          done(response.statusCode ?? 0);
        }).on('error', fail);
      });

    expect(new URL(fake.vaultUrl).hostname).toBe(FAKE_VAULT_HOST);
    await expect(status(`${fake.vaultUrl}/secrets/db-password?${API}`)).resolves.toBe(401);
    await expect(status(`https://login.microsoftonline.com:${fake.port}/`)).rejects.toMatchObject({
      code: 'ENOTFOUND',
    });
    agent.destroy();
  });
});
