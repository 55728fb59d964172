import { setTimeout as sleep } from 'node:timers/promises';
import { FakeVault } from './support/fake-vault.js';
import { jsonOf } from './support/http.js';

/**
 * Pins the wire shapes FakeVault answers with, as Vault documents them, by talking to it with
 * plain fetch: if the fake drifts from Vault's API, this fails before the adapter's spec can
 * pass against a wrong fake.
 */
describe(FakeVault.name, () => {
  let vault: FakeVault;
  const get = (path: string, headers: Record<string, string> = {}): Promise<Response> =>
    fetch(`${vault.url}${path}`, { headers });
  const login = (mount: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${vault.url}/v1/auth/${mount}/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  beforeEach(async () => {
    vault = await FakeVault.start();
    vault.addToken('root-ish', { policies: ['kv/data/'] });
  });

  afterEach(async () => {
    await vault.stop();
  });

  it('answers a KV v2 read with data.data and data.metadata of the latest version', async () => {
    vault.put('kv', 'app/db', { password: 'first' });
    vault.put('kv', 'app/db', { password: 'second' });

    const response = await get('/v1/kv/data/app/db', { 'X-Vault-Token': 'root-ish' });

    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    const body = await jsonOf(response);
    expect(body).toMatchObject({
      lease_id: '',
      renewable: false,
      lease_duration: 0,
      data: {
        data: { password: 'second' },
        metadata: { deletion_time: '', destroyed: false, version: 2, custom_metadata: null },
      },
    });
    expect(typeof body.request_id).toBe('string');
    expect(Number.isNaN(Date.parse(body.data.metadata.created_time))).toBe(false);
  });

  it('answers the version asked for with ?version=N, and version=0 with the latest', async () => {
    vault.put('kv', 'app', { k: 'one' });
    vault.put('kv', 'app', { k: 'two' });
    const token = { 'X-Vault-Token': 'root-ish' };

    const first = await jsonOf(await get('/v1/kv/data/app?version=1', token));
    const latest = await jsonOf(await get('/v1/kv/data/app?version=0', token));

    expect(first.data).toMatchObject({ data: { k: 'one' }, metadata: { version: 1 } });
    expect(latest.data).toMatchObject({ data: { k: 'two' }, metadata: { version: 2 } });
  });

  it('answers a mount path with slashes in it', async () => {
    vault.put('secret/team', 'app', { k: 'v' });
    vault.addToken('team', { policies: ['secret/team/data/'] });

    const response = await get('/v1/secret/team/data/app', { 'X-Vault-Token': 'team' });

    expect(response.status).toBe(200);
    expect((await jsonOf(response)).data.data).toEqual({ k: 'v' });
  });

  it('answers 404 with an empty errors list for a missing secret or a version past the latest', async () => {
    vault.put('kv', 'app', { k: 'v' });
    const token = { 'X-Vault-Token': 'root-ish' };

    const missing = await get('/v1/kv/data/other', token);
    const future = await get('/v1/kv/data/app?version=7', token);

    expect(missing.status).toBe(404);
    expect(await jsonOf(missing)).toEqual({ errors: [] });
    expect(future.status).toBe(404);
    expect(await jsonOf(future)).toEqual({ errors: [] });
  });

  it('answers 404 with the metadata and null data for a deleted or a destroyed version', async () => {
    vault.put('kv', 'app', { k: 'one' });
    vault.put('kv', 'app', { k: 'two' });
    vault.deleteVersion('kv', 'app', 1);
    vault.destroy('kv', 'app', 2);
    const token = { 'X-Vault-Token': 'root-ish' };

    const deleted = await get('/v1/kv/data/app?version=1', token);
    const destroyed = await get('/v1/kv/data/app', token);

    expect(deleted.status).toBe(404);
    const deletedBody = await jsonOf(deleted);
    expect(deletedBody.data.data).toBeNull();
    expect(deletedBody.data.metadata).toMatchObject({ destroyed: false, version: 1 });
    expect(deletedBody.data.metadata.deletion_time).not.toBe('');
    expect(destroyed.status).toBe(404);
    expect((await jsonOf(destroyed)).data).toMatchObject({
      data: null,
      metadata: { destroyed: true, deletion_time: '', version: 2 },
    });
  });

  it('answers 403 permission denied without a token, with an unknown token, or outside the policies', async () => {
    vault.put('kv', 'app', { k: 'v' });
    vault.put('other', 'app', { k: 'v' });

    const answers = await Promise.all([
      get('/v1/kv/data/app'),
      get('/v1/kv/data/app', { 'X-Vault-Token': 'nope' }),
      get('/v1/other/data/app', { 'X-Vault-Token': 'root-ish' }),
      get('/v1/other/data/missing', { 'X-Vault-Token': 'root-ish' }),
    ]);

    for (const answer of answers) {
      expect(answer.status).toBe(403);
      expect(await jsonOf(answer)).toEqual({ errors: ['permission denied'] });
    }
  });

  it('answers 405 to a write on a data path', async () => {
    vault.put('kv', 'app', { k: 'v' });

    const response = await fetch(`${vault.url}/v1/kv/data/app`, {
      method: 'POST',
      headers: { 'X-Vault-Token': 'root-ish' },
      body: '{}',
    });

    expect(response.status).toBe(405);
    expect((await jsonOf(response)).errors).toHaveLength(1);
  });

  it('shows a namespace secret only to a token of that namespace sent with X-Vault-Namespace', async () => {
    vault.put('kv', 'app', { k: 'in-team' }, 'team');
    vault.addToken('team-token', { namespace: 'team', policies: ['kv/data/'] });

    const inNamespace = await get('/v1/kv/data/app', {
      'X-Vault-Token': 'team-token',
      'X-Vault-Namespace': 'team/',
    });
    const withoutHeader = await get('/v1/kv/data/app', { 'X-Vault-Token': 'team-token' });
    const rootToken = await get('/v1/kv/data/app', {
      'X-Vault-Token': 'root-ish',
      'X-Vault-Namespace': 'team',
    });
    const rootNamespace = await get('/v1/kv/data/app', { 'X-Vault-Token': 'root-ish' });

    expect(inNamespace.status).toBe(200);
    expect((await jsonOf(inNamespace)).data.data).toEqual({ k: 'in-team' });
    expect(withoutHeader.status).toBe(403);
    expect(rootToken.status).toBe(403);
    expect(rootNamespace.status).toBe(404);
  });

  it('logs a Kubernetes service account in and answers auth.client_token and auth.lease_duration', async () => {
    vault.put('kv', 'app', { k: 'v' });
    vault.addKubernetesRole('kubernetes', 'kiln', {
      jwt: 'sa-jwt',
      policies: ['kv/data/app'],
      ttlSeconds: 3600,
    });

    const response = await login('kubernetes', { role: 'kiln', jwt: 'sa-jwt' });

    expect(response.status).toBe(200);
    const body = await jsonOf(response);
    expect(body).toMatchObject({
      data: null,
      auth: { lease_duration: 3600, renewable: true, policies: ['default', 'kv/data/app'] },
    });
    expect(body.auth.client_token).toMatch(/^hvs\./);
    expect(vault.logins).toBe(1);
    const read = await get('/v1/kv/data/app', { 'X-Vault-Token': body.auth.client_token });
    expect(read.status).toBe(200);
  });

  it('refuses a login with a wrong JWT (403), an unknown role or a missing field (400)', async () => {
    vault.addKubernetesRole('k8s', 'kiln', { jwt: 'sa-jwt', policies: [], ttlSeconds: 60 });

    const wrongJwt = await login('k8s', { role: 'kiln', jwt: 'other' });
    const unknownRole = await login('k8s', { role: 'nobody', jwt: 'sa-jwt' });
    const noJwt = await login('k8s', { role: 'kiln' });
    const otherMount = await login('kubernetes', { role: 'kiln', jwt: 'sa-jwt' });

    expect(wrongJwt.status).toBe(403);
    expect(await jsonOf(wrongJwt)).toEqual({ errors: ['permission denied'] });
    expect(unknownRole.status).toBe(400);
    expect(await jsonOf(unknownRole)).toEqual({ errors: ['invalid role name "nobody"'] });
    expect(noJwt.status).toBe(400);
    expect(await jsonOf(noJwt)).toEqual({ errors: ['missing jwt'] });
    expect(otherMount.status).toBe(400);
    expect(vault.logins).toBe(0);
  });

  it('finds a role only in the namespace it was made in, and scopes its token to it', async () => {
    vault.put('kv', 'app', { k: 'v' }, 'team');
    vault.addKubernetesRole('kubernetes', 'kiln', {
      jwt: 'sa-jwt',
      policies: ['kv/data/'],
      ttlSeconds: 60,
      namespace: 'team',
    });

    const root = await login('kubernetes', { role: 'kiln', jwt: 'sa-jwt' });
    const team = await login(
      'kubernetes',
      { role: 'kiln', jwt: 'sa-jwt' },
      { 'X-Vault-Namespace': 'team' },
    );

    expect(root.status).toBe(400);
    expect(team.status).toBe(200);
    const token = (await jsonOf(team)).auth.client_token;
    const read = await get('/v1/kv/data/app', {
      'X-Vault-Token': token,
      'X-Vault-Namespace': 'team',
    });
    expect(read.status).toBe(200);
  });

  it('stops honouring a login token after its TTL or once login tokens are revoked', async () => {
    vault.put('kv', 'app', { k: 'v' });
    vault.addKubernetesRole('kubernetes', 'short', {
      jwt: 'sa-jwt',
      policies: ['kv/data/'],
      ttlSeconds: 0.05,
    });
    vault.addKubernetesRole('kubernetes', 'long', {
      jwt: 'sa-jwt',
      policies: ['kv/data/'],
      ttlSeconds: 3600,
    });
    const tokenOf = async (role: string): Promise<string> =>
      (await jsonOf(await login('kubernetes', { role, jwt: 'sa-jwt' }))).auth.client_token;
    const short = await tokenOf('short');
    const long = await tokenOf('long');

    await sleep(100);
    const expired = await get('/v1/kv/data/app', { 'X-Vault-Token': short });
    const beforeRevoke = await get('/v1/kv/data/app', { 'X-Vault-Token': long });
    vault.revokeLoginTokens();
    const revoked = await get('/v1/kv/data/app', { 'X-Vault-Token': long });
    const staticToken = await get('/v1/kv/data/app', { 'X-Vault-Token': 'root-ish' });

    expect(expired.status).toBe(403);
    expect(beforeRevoke.status).toBe(200);
    expect(revoked.status).toBe(403);
    expect(staticToken.status).toBe(200);
  });

  it('answers 503 "Vault is sealed" to everything while sealed', async () => {
    vault.put('kv', 'app', { k: 'v' });
    vault.sealed = true;

    const read = await get('/v1/kv/data/app', { 'X-Vault-Token': 'root-ish' });
    const loginAnswer = await login('kubernetes', { role: 'kiln', jwt: 'x' });

    expect(read.status).toBe(503);
    expect(await jsonOf(read)).toEqual({ errors: ['Vault is sealed'] });
    expect(loginAnswer.status).toBe(503);
  });

  it('answers the next n requests with the status failNext was given, then normally', async () => {
    vault.put('kv', 'app', { k: 'v' });
    vault.failNext(500, 2);
    const token = { 'X-Vault-Token': 'root-ish' };

    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get('/v1/kv/data/app', token)).status);

    expect(statuses).toEqual([500, 500, 200]);
  });

  it('leaves requests unanswered while hanging, records them, and ends them on stop', async () => {
    vault.hang = true;

    const timedOut = fetch(`${vault.url}/v1/kv/data/app`, { signal: AbortSignal.timeout(200) });
    const pending = get('/v1/kv/data/app', { 'X-Vault-Token': 'root-ish' });

    await expect(timedOut).rejects.toMatchObject({ name: 'TimeoutError' });
    while (vault.requests.length < 2) await sleep(10);
    await vault.stop();
    await expect(pending).rejects.toThrow();
    vault = await FakeVault.start();
  });

  it('records each request with its method, URL and headers', async () => {
    vault.put('kv', 'app', { k: 'v' }, 'team');

    await get('/v1/kv/data/app?version=1', { 'X-Vault-Token': 't', 'X-Vault-Namespace': 'team' });

    expect(vault.requests).toEqual([
      expect.objectContaining({
        method: 'GET',
        url: '/v1/kv/data/app?version=1',
        headers: expect.objectContaining({ 'x-vault-token': 't', 'x-vault-namespace': 'team' }),
      }),
    ]);
  });
});
