import { createHash } from 'node:crypto';
import { LogSink } from '../src/logs/log-sink.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { login, PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { FakeRunner } from './support/fake-runner.js';
import { type ApiReply, callApi } from './support/http.js';
import { LogStreamClient, refusal } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * API tokens and password changes (docs/adr/0044-api-tokens.md), against two replicas on one
 * database whose access caches live ten minutes: a change seen by the other replica was announced
 * by Postgres, not waited out.
 */
const ENV = { KILN_ACCESS_CACHE_TTL_MS: '600000', KILN_API_TOKEN_MAX_DAYS: '90' };
const TOKEN_FORMAT = /^kiln_[A-Za-z0-9_-]{43}$/;

describe('API tokens and password changes', () => {
  let database: TestDatabase;
  let kiln: TestApp;
  let replica: TestApp;
  let seeded: Seeded;
  let tenancy: TenancyService;
  let serial = 0;
  /** Every token this suite saw, to look for in the logs at the end. */
  const minted: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    kiln = await startTestApp({ runner: FakeRunner, database, env: ENV });
    replica = await startTestApp({ runner: FakeRunner, database, env: ENV });
    seeded = await seedTenancy(kiln);
    tenancy = kiln.app.get(TenancyService);
  });

  afterAll(async () => {
    await replica.close();
    await kiln.close();
    await database.drop();
  });

  /** `method path` on `app` with this bearer (and X-Tenant-ID when given): status and body. */
  const call = (
    app: TestApp,
    bearer: string,
    method: string,
    path: string,
    options: { tenant?: string; body?: unknown } = {},
  ): Promise<ApiReply> => callApi(app.baseUrl, bearer, method, path, options);

  /** A new user with `role` in tenant A, and its access token. */
  async function member(role: 'admin' | 'developer' | 'viewer') {
    const user = await tenancy.createUser(`tokens-${serial++}@example.com`, PASSWORD);
    await tenancy.addMember(seeded.tenantA, user.email, role);
    return { id: user.id, email: user.email, jwt: await tokenFor(kiln.baseUrl, user.email) };
  }

  async function createToken(
    jwt: string,
    body: Record<string, unknown> = { name: 'ci' },
  ): Promise<Record<string, any>> {
    const created = await call(kiln, jwt, 'POST', '/tokens', { tenant: seeded.tenantA, body });
    expect(created.status).toBe(201);
    minted.push(created.body.token);
    return created.body;
  }

  /** The stored tokens, but when each was last used (using one is not changing it). */
  const tokenRows = () =>
    kiln.dataSource.query(
      'SELECT id, user_id, tenant_id, name, token_hash, permissions, created_at, expires_at FROM api_tokens ORDER BY id',
    );

  /** Asks until the status is `expected` or 20 s pass; the last status. */
  async function eventually(expected: number, ask: () => Promise<number>): Promise<number> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const status = await ask();
      if (status === expected || Date.now() > deadline) return status;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  it('shows a new token once, keeps only its SHA-256, and gives it the role by default but token:manage', async () => {
    const developer = await member('developer');
    const created = await createToken(developer.jwt, { name: '  release pipeline ' });

    expect(created).toEqual({
      id: expect.any(String),
      name: 'release pipeline',
      token: expect.stringMatching(TOKEN_FORMAT),
      tenant_id: seeded.tenantA,
      permissions: ['build:create', 'build:list', 'build:read', 'build:cancel'],
      created_at: expect.any(String),
      expires_at: expect.any(String),
      last_used_at: null,
    });
    const days = (Date.parse(created.expires_at) - Date.parse(created.created_at)) / 86_400_000;
    expect(Math.round(days)).toBe(30);
    const rows = await kiln.dataSource.query<Array<Record<string, unknown>>>(
      "SELECT encode(token_hash, 'hex') AS hash, row_to_json(t)::text AS whole FROM api_tokens t WHERE id = $1",
      [created.id],
    );
    expect(rows[0]!.hash).toBe(createHash('sha256').update(created.token).digest('hex'));
    expect(rows[0]!.whole).not.toContain(created.token.slice('kiln_'.length));

    const listed = await call(kiln, developer.jwt, 'GET', '/tokens', { tenant: seeded.tenantA });
    expect(listed.status).toBe(200);
    expect(listed.body.tokens).toEqual([{ ...created, token: undefined }]);
    expect(JSON.stringify(listed.body)).not.toContain(created.token);
  });

  it('acts in its own tenant with X-Tenant-ID left out, in no other, and records its use', async () => {
    const developer = await member('developer');
    const { token, id } = await createToken(developer.jwt);

    expect((await call(kiln, token, 'GET', '/builds')).status).toBe(200);
    expect((await call(kiln, token, 'GET', '/builds', { tenant: seeded.tenantA })).status).toBe(
      200,
    );
    const elsewhere = await call(kiln, token, 'GET', '/builds', { tenant: seeded.tenantB });
    expect(elsewhere).toEqual({
      status: 403,
      body: expect.objectContaining({ error: 'This API token acts in another tenant' }),
    });
    expect(await call(kiln, token, 'GET', '/auth/me')).toEqual({
      status: 200,
      body: {
        user_id: developer.id,
        email: developer.email,
        system_admin: false,
        token: {
          id,
          name: 'ci',
          tenant_id: seeded.tenantA,
          permissions: ['build:create', 'build:list', 'build:read', 'build:cancel'],
          expires_at: expect.any(String),
        },
      },
    });
    const tenants = await call(kiln, token, 'GET', '/auth/tenants');
    expect(tenants.body.tenants).toEqual([
      {
        id: seeded.tenantA,
        name: 'tenant-a',
        role: 'developer',
        permissions: ['build:create', 'build:list', 'build:read', 'build:cancel'],
      },
    ]);
    const used = await eventually(1, async () => {
      const rows = await kiln.dataSource.query<unknown[]>(
        'SELECT 1 FROM api_tokens WHERE id = $1 AND last_used_at IS NOT NULL',
        [id],
      );
      return rows.length;
    });
    expect(used).toBe(1);
  });

  it('does what both its scope and its user’s role allow, and nothing more', async () => {
    const developer = await member('developer');
    const { token } = await createToken(developer.jwt, {
      name: 'reader',
      permissions: ['build:read', 'build:list'],
    });
    const before = await kiln.dataSource.query('SELECT * FROM builds ORDER BY id');
    const refused = await call(kiln, token, 'POST', '/builds', {
      body: { project_id: seeded.projectA, git_branch: 'main' },
    });
    expect(refused).toEqual({
      status: 403,
      body: expect.objectContaining({
        error: 'This API token lacks the permission build:create',
        code: 'FORBIDDEN',
      }),
    });
    expect(await kiln.dataSource.query('SELECT * FROM builds ORDER BY id')).toEqual(before);

    // The role shrinks: so does every token of the member, on the other replica too.
    const writer = await createToken(developer.jwt, { name: 'writer' });
    const body = { project_id: seeded.projectA, git_branch: `scope-${serial}` };
    expect((await call(replica, writer.token, 'POST', '/builds', { body })).status).toBe(201);
    await tenancy.addMember(seeded.tenantA, developer.email, 'viewer');
    const demoted = await eventually(403, async () => {
      const answer = await call(replica, writer.token, 'POST', '/builds', {
        body: { ...body, git_branch: `scope-${serial}-again` },
      });
      return answer.status;
    });
    expect(demoted).toBe(403);
  });

  it('never gets more than its creator holds, nor token:manage, nor a longer life than allowed; a refusal stores nothing', async () => {
    const viewer = await member('viewer');
    const before = await tokenRows();
    const ask = (body: unknown) =>
      call(kiln, viewer.jwt, 'POST', '/tokens', { tenant: seeded.tenantA, body });

    expect(await ask({ name: 'x', permissions: ['build:read', 'build:create'] })).toEqual({
      status: 403,
      body: expect.objectContaining({
        error: 'Your role in this tenant lacks build:create: a token gets at most what you hold',
      }),
    });
    expect(await ask({ name: 'x', permissions: ['token:manage'] })).toEqual({
      status: 400,
      body: expect.objectContaining({
        error: 'An API token cannot hold token:manage',
        details: { permissions: 'must not include token:manage' },
      }),
    });
    for (const body of [
      { name: 'x', permissions: ['system:admin'] },
      { name: 'x', permissions: ['build:read', 'build:read'] },
      { name: 'x', permissions: [] },
      { name: 'x', expires_in_days: 91 },
      { name: 'x', expires_in_days: 0 },
      { name: 'x', expires_in_days: 1.5 },
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(101) },
      { permissions: ['build:read'] },
      { name: 'x', user_id: seeded.users.admin.id, tenant_id: seeded.tenantB },
    ]) {
      const answer = await ask(body);
      expect({ body, status: answer.status }).toEqual({ body, status: 400 });
      expect(answer.body).toEqual(
        expect.objectContaining({ code: expect.any(String), error: expect.any(String) }),
      );
    }
    expect(await tokenRows()).toEqual(before);
  });

  it('cannot manage tokens, administer the installation or change its user’s password', async () => {
    const admin = await member('admin');
    await tenancy.setSystemAdmin(admin.email, true);
    const { token } = await createToken(admin.jwt, { name: 'everything' });
    const before = await tokenRows();

    expect((await call(kiln, token, 'POST', '/tokens', { body: { name: 'more' } })).status).toBe(
      403,
    );
    expect((await call(kiln, token, 'GET', '/tokens')).status).toBe(403);
    expect((await call(kiln, token, 'GET', '/tenants')).body).toEqual(
      expect.objectContaining({
        error: 'An API token cannot use system:admin: sign in as its user',
      }),
    );
    const password = await call(kiln, token, 'POST', '/auth/password', {
      body: { current_password: PASSWORD, new_password: 'a new password for me' },
    });
    expect(password.status).toBe(403);
    expect(await tokenRows()).toEqual(before);
    expect((await login(kiln.baseUrl, admin.email)).status).toBe(200);
    await tenancy.setSystemAdmin(admin.email, false);
  });

  it('is refused on both replicas once revoked, and once expired, however long the caches keep access', async () => {
    const developer = await member('developer');
    const { token, id } = await createToken(developer.jwt);
    const other = await createToken(developer.jwt, { name: 'kept' });
    for (const app of [kiln, replica])
      expect((await call(app, token, 'GET', '/builds')).status).toBe(200);

    const revoked = await call(kiln, developer.jwt, 'DELETE', `/tokens/${id}`, {
      tenant: seeded.tenantA,
    });
    expect(revoked.status).toBe(204);
    expect((await call(kiln, token, 'GET', '/builds')).status).toBe(401);
    expect(
      await eventually(401, async () => (await call(replica, token, 'GET', '/builds')).status),
    ).toBe(401);
    expect((await call(replica, token, 'GET', '/builds')).body).toEqual(
      expect.objectContaining({ error: expect.any(String), code: 'UNAUTHORIZED' }),
    );
    expect((await call(replica, other.token, 'GET', '/builds')).status).toBe(200);
    const again = await call(kiln, developer.jwt, 'DELETE', `/tokens/${id}`, {
      tenant: seeded.tenantA,
    });
    expect(again.status).toBe(404);

    // Another member cannot revoke it.
    const stranger = await member('admin');
    const foreign = await call(kiln, stranger.jwt, 'DELETE', `/tokens/${other.id}`, {
      tenant: seeded.tenantA,
    });
    expect(foreign.status).toBe(404);

    // Expiry is checked on every request, whatever the caches hold.
    await kiln.dataSource.query(
      "UPDATE api_tokens SET expires_at = now() + interval '1 second' WHERE id = $1",
      [other.id],
    );
    expect(
      await eventually(
        401,
        async () => (await call(replica, other.token, 'GET', '/builds')).status,
      ),
    ).toBe(401);
  });

  it('opens a log stream over the WebSocket, and only with build:read', async () => {
    const developer = await member('developer');
    const { token } = await createToken(developer.jwt);
    const { token: listOnly } = await createToken(developer.jwt, {
      name: 'lists',
      permissions: ['build:list'],
    });
    const client = new ApiClient(kiln, developer.jwt, seeded.tenantA);
    const build = await client.createBuild(seeded.projectA, `ws-${serial++}`);
    await client.request('POST', `/builds/${build.id}/start`);
    await kiln.app.get(LogSink).append(build.id as string, [{ text: 'hello from the build' }]);
    await kiln.app.get<BuildRunner, FakeRunner>(BuildRunner).succeed(build.id as string);

    const url = `${replica.baseUrl.replace('http', 'ws')}/api/v1/builds/${build.id}/logs/stream`;
    const stream = new LogStreamClient(url, { headers: { authorization: `Bearer ${token}` } });
    expect(await stream.closed).toEqual({ code: 1000, reason: 'success' });
    expect(stream.messages.map((m) => m.message)).toEqual(['hello from the build']);

    const refused = new LogStreamClient(url, { headers: { authorization: `Bearer ${listOnly}` } });
    expect(await refusal(refused)).toEqual({
      status: 403,
      body: expect.objectContaining({ error: 'This API token lacks the permission build:read' }),
    });
  });

  it('closes an open log stream on the other replica once its token is revoked, or its member removed', async () => {
    const developer = await member('developer');
    const { token, id } = await createToken(developer.jwt);
    const client = new ApiClient(kiln, developer.jwt, seeded.tenantA);
    const build = await client.createBuild(seeded.projectA, `revoked-${serial++}`);
    await client.request('POST', `/builds/${build.id}/start`);
    const url = `${replica.baseUrl.replace('http', 'ws')}/api/v1/builds/${build.id}/logs/stream`;

    const byToken = new LogStreamClient(url, { headers: { authorization: `Bearer ${token}` } });
    await byToken.opened;
    const byJwt = new LogStreamClient(url, {
      headers: { authorization: `Bearer ${developer.jwt}`, 'x-tenant-id': seeded.tenantA },
    });
    await byJwt.opened;

    expect(
      (await call(kiln, developer.jwt, 'DELETE', `/tokens/${id}`, { tenant: seeded.tenantA }))
        .status,
    ).toBe(204);
    expect(await byToken.closed).toEqual({ code: 1008, reason: 'access revoked' });

    await tenancy.removeMemberById(seeded.tenantA, developer.id);
    expect(await byJwt.closed).toEqual({ code: 1008, reason: 'access revoked' });
    await kiln.app.get<BuildRunner, FakeRunner>(BuildRunner).succeed(build.id as string);
  });

  it('never writes a token in a log line', () => {
    expect(minted.length).toBeGreaterThan(5);
    for (const app of [kiln, replica]) {
      const logged = app.logs.raw.join('\n');
      // Every request is logged (at debug), the token routes' too.
      expect(logged).toContain('"path":"/api/v1/builds"');
      for (const token of minted) expect(logged).not.toContain(token.slice('kiln_'.length));
    }
  });

  describe('changing your password', () => {
    const change = (app: TestApp, jwt: string, body: unknown) =>
      fetch(`${app.baseUrl}/api/v1/auth/password`, {
        method: 'POST',
        headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const builds = (app: TestApp, bearer: string) =>
      fetch(`${app.baseUrl}/api/v1/builds`, {
        headers: { authorization: `Bearer ${bearer}`, 'x-tenant-id': seeded.tenantA },
      }).then((response) => response.status);
    const hashOf = async (email: string) =>
      (
        await kiln.dataSource.query<Array<{ password_hash: string }>>(
          'SELECT password_hash FROM users WHERE email = $1',
          [email],
        )
      )[0]!.password_hash;

    it('refuses a wrong current password or a short new one, changing nothing', async () => {
      const { email } = seeded.users.viewer;
      const jwt = await tokenFor(kiln.baseUrl, email);
      const before = await hashOf(email);
      const wrong = await change(kiln, jwt, {
        current_password: 'not the password',
        new_password: 'a long enough new password',
      });
      expect(wrong.status).toBe(400);
      expect(await wrong.json()).toEqual(
        expect.objectContaining({
          error: 'The current password is not right',
          details: { current_password: 'is not the current password' },
        }),
      );
      const short = await change(kiln, jwt, { current_password: PASSWORD, new_password: 'short' });
      expect(short.status).toBe(400);
      expect((await change(kiln, jwt, { new_password: 'a long enough new password' })).status).toBe(
        400,
      );
      expect(await hashOf(email)).toBe(before);
      expect(await builds(kiln, jwt)).toBe(200);
    });

    it('cuts off access tokens issued before it, even a moment before, on both replicas, answers a new one, and leaves API tokens', async () => {
      const { email } = seeded.users.developer;
      const old = await tokenFor(kiln.baseUrl, email);
      const created = await fetch(`${kiln.baseUrl}/api/v1/tokens`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${old}`,
          'x-tenant-id': seeded.tenantA,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ name: 'ci' }),
      });
      const { token: apiToken } = (await created.json()) as { token: string };
      expect(await builds(replica, old)).toBe(200);

      const changed = await change(kiln, old, {
        current_password: PASSWORD,
        new_password: 'a brand new password, long',
      });
      expect(changed.status).toBe(200);
      const { access_token: fresh } = (await changed.json()) as { access_token: string };

      expect(await builds(kiln, old)).toBe(401);
      const deadline = Date.now() + 20_000;
      while ((await builds(replica, old)) !== 401 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 25));
      expect(await builds(replica, old)).toBe(401);
      expect(await builds(replica, fresh)).toBe(200);
      expect(await builds(replica, apiToken)).toBe(200);
      expect((await login(kiln.baseUrl, email)).status).toBe(401);
      expect((await login(kiln.baseUrl, email, 'a brand new password, long')).status).toBe(200);
      await tenancy.createUser('unrelated@example.com', PASSWORD); // the users table still works
    });
  });
});
