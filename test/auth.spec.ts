import { Controller, Delete, Get, Module } from '@nestjs/common';
import argon2 from 'argon2';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { RequirePermission } from '../src/auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../src/auth/tenant-context.js';
import {
  craftToken,
  login,
  PASSWORD,
  type Seeded,
  seedTenancy,
  tokenFor,
  validClaims,
} from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

// A route needing a permission only admins have, to see a valid token refused for its role.
@Controller('permission-probe')
class PermissionProbeController {
  @Delete()
  @RequirePermission('build:delete')
  remove(@CurrentTenant() tenant: TenantContext): TenantContext {
    return tenant;
  }

  @Get()
  @RequirePermission('build:read')
  read(@CurrentTenant() tenant: TenantContext): TenantContext {
    return tenant;
  }
}

@Module({ controllers: [PermissionProbeController] })
class PermissionProbeModule {}

const NIL = '00000000-0000-0000-0000-000000000000';

describe('authentication and tenancy', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let adminToken: string;

  beforeAll(async () => {
    kiln = await startTestApp({
      env: { KILN_LOGIN_MAX_FAILURES: '3', KILN_LOGIN_WINDOW_SECONDS: '600' },
      apiModules: [PermissionProbeModule],
    });
    seeded = await seedTenancy(kiln);
    adminToken = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
  });

  afterAll(async () => {
    await kiln.close();
  });

  function projects(headers: Record<string, string>): Promise<Response> {
    return fetch(`${kiln.baseUrl}/api/v1/projects`, { headers });
  }

  describe('POST /api/v1/auth/login', () => {
    it('returns a bearer token with its lifetime', async () => {
      const response = await login(kiln.baseUrl, seeded.users.developer.email);

      expect(response.status).toBe(200);
      const body = await jsonOf(response);
      expect(body).toEqual({
        access_token: expect.any(String),
        token_type: 'Bearer',
        expires_in: 900,
      });
      const claims = JSON.parse(
        Buffer.from(body.access_token.split('.')[1], 'base64url').toString(),
      );
      expect(claims).toMatchObject({
        sub: seeded.users.developer.id,
        iss: 'kiln',
        aud: 'kiln-api',
      });
      expect(claims.exp - claims.iat).toBe(900);
      expect(
        JSON.parse(Buffer.from(body.access_token.split('.')[0], 'base64url').toString()).alg,
      ).toBe('HS256');
    });

    it('accepts the e-mail in any letter case', async () => {
      expect((await login(kiln.baseUrl, seeded.users.viewer.email.toUpperCase())).status).toBe(200);
    });

    it('answers a wrong password and an unknown e-mail with the same 401 body', async () => {
      const wrong = await login(kiln.baseUrl, seeded.users.viewer.email, 'not the password');
      const unknown = await login(kiln.baseUrl, 'nobody@example.com', PASSWORD);

      expect(wrong.status).toBe(401);
      expect(unknown.status).toBe(401);
      const [a, b] = [await jsonOf(wrong), await jsonOf(unknown)];
      expect(a).toMatchObject({ code: 'UNAUTHORIZED', error: 'Invalid email or password' });
      expect({ ...a, timestamp: 0, trace_id: 0 }).toEqual({ ...b, timestamp: 0, trace_id: 0 });
    });

    it.each([
      ['no body', undefined],
      ['a missing password', { email: 'a@example.com' }],
      ['a malformed e-mail', { email: 'not-an-email', password: 'x' }],
      ['a non-string password', { email: 'a@example.com', password: 42 }],
      ['an unknown field', { email: 'a@example.com', password: 'x', admin: true }],
    ])('answers %s with 400 INVALID_REQUEST', async (_name, body) => {
      const response = await fetch(`${kiln.baseUrl}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });

      expect(response.status).toBe(400);
      expect(await jsonOf(response)).toMatchObject({
        code: 'INVALID_REQUEST',
        details: expect.any(Object),
      });
    });

    it('slows guessing: past the failure limit for an e-mail, even the right password gets 429 until the window ends', async () => {
      const email = seeded.users.outsider.email;
      for (let i = 0; i < 3; i++)
        expect((await login(kiln.baseUrl, email, `guess-${i}`)).status).toBe(401);

      const refused = await login(kiln.baseUrl, email, PASSWORD);
      const otherUser = await login(kiln.baseUrl, seeded.users.adminB.email);

      expect(refused.status).toBe(429);
      expect(await jsonOf(refused)).toMatchObject({ code: 'INVALID_REQUEST' });
      const retryAfter = Number(refused.headers.get('retry-after'));
      const reset = Number(refused.headers.get('x-ratelimit-reset'));
      expect(retryAfter).toBeGreaterThan(590);
      expect(retryAfter).toBeLessThanOrEqual(600);
      expect(Math.abs(reset - (Math.floor(Date.now() / 1000) + retryAfter))).toBeLessThanOrEqual(2);
      expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      expect(otherUser.status).toBe(200);
    });

    it('does not let a client reset the count by sending X-Forwarded-For (no proxy trusted by default)', async () => {
      const { email } = await kiln.app
        .get(TenancyService)
        .createUser('spoofer@example.com', PASSWORD);
      const attempt = (password: string, forwardedFor: string) =>
        fetch(`${kiln.baseUrl}/api/v1/auth/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
          body: JSON.stringify({ email, password }),
        });
      for (let i = 0; i < 3; i++)
        expect((await attempt(`guess-${i}`, `10.0.0.${i}`)).status).toBe(401);

      expect((await attempt(PASSWORD, '10.9.9.9')).status).toBe(429);
    });

    it('stores passwords as argon2id with m >= 19 MiB and t >= 2', async () => {
      const [row] = await kiln.dataSource.query(
        'SELECT password_hash FROM users WHERE email = $1',
        [seeded.users.admin.email],
      );
      const match = /^\$argon2id\$v=19\$([a-z0-9=,]+)\$/.exec(row.password_hash);
      const params = Object.fromEntries(match![1]!.split(',').map((kv: string) => kv.split('=')));

      expect(Number(params.m)).toBeGreaterThanOrEqual(19 * 1024);
      expect(Number(params.t)).toBeGreaterThanOrEqual(2);
    });
  });

  it('rehashes a password stored with weaker parameters on the next login', async () => {
    const weak = await argon2.hash(PASSWORD, {
      type: argon2.argon2id,
      memoryCost: 4096,
      timeCost: 1,
    });
    await kiln.dataSource.query('UPDATE users SET password_hash = $1 WHERE email = $2', [
      weak,
      seeded.users.viewer.email,
    ]);

    expect((await login(kiln.baseUrl, seeded.users.viewer.email)).status).toBe(200);

    const [row] = await kiln.dataSource.query('SELECT password_hash FROM users WHERE email = $1', [
      seeded.users.viewer.email,
    ]);
    expect(row.password_hash).not.toBe(weak);
    expect(row.password_hash).toContain('m=19456');
  });

  describe('a protected route', () => {
    it('serves a member with a valid token and tenant', async () => {
      const response = await projects({
        authorization: `Bearer ${adminToken}`,
        'x-tenant-id': seeded.tenantA,
      });

      expect(response.status).toBe(200);
      const body = await jsonOf(response);
      expect(body.projects.map((p: { id: string }) => p.id)).toEqual([seeded.projectA]);
      expect(JSON.stringify(body)).not.toContain(seeded.projectB);
    });

    it.each([
      ['no Authorization header', () => ({})],
      [
        'a non-bearer scheme',
        () => ({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }),
      ],
      ['a malformed token', () => ({ authorization: 'Bearer not.a.jwt' })],
      [
        'a token signed with another key',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id), { secret: 'x'.repeat(40) })}`,
        }),
      ],
      [
        'an alg:none token',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id), { alg: 'none' })}`,
        }),
      ],
      [
        'an expired token (61 s ago)',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id, { exp: Math.floor(Date.now() / 1000) - 61 }))}`,
        }),
      ],
      [
        'a token without exp',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id, { exp: undefined }))}`,
        }),
      ],
      [
        'a token of another issuer',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id, { iss: 'evil' }))}`,
        }),
      ],
      [
        'a token for another audience',
        (s: Seeded) => ({
          authorization: `Bearer ${craftToken(validClaims(s.users.admin.id, { aud: 'other' }))}`,
        }),
      ],
      [
        'a token whose subject is not a user id',
        () => ({ authorization: `Bearer ${craftToken(validClaims('root'))}` }),
      ],
    ])('answers %s with 401 UNAUTHORIZED', async (_name, headers) => {
      const response = await projects({ ...headers(seeded), 'x-tenant-id': seeded.tenantA });

      expect(response.status).toBe(401);
      expect(await jsonOf(response)).toMatchObject({ code: 'UNAUTHORIZED' });
    });

    it.each([
      ['a missing X-Tenant-ID', undefined],
      ['an X-Tenant-ID that is not a UUID', 'tenant-a'],
      ['the nil UUID', NIL],
    ])('answers %s with 400 INVALID_REQUEST, admins included', async (_name, tenant) => {
      const response = await projects({
        authorization: `Bearer ${adminToken}`,
        ...(tenant === undefined ? {} : { 'x-tenant-id': tenant }),
      });

      expect(response.status).toBe(400);
      expect(await jsonOf(response)).toMatchObject({
        code: 'INVALID_REQUEST',
        details: { 'X-Tenant-ID': expect.any(String) },
      });
    });

    it('answers 403 for a tenant the user is not a member of, and for a random tenant id', async () => {
      const other = await projects({
        authorization: `Bearer ${adminToken}`,
        'x-tenant-id': seeded.tenantB,
      });
      const random = await projects({
        authorization: `Bearer ${adminToken}`,
        'x-tenant-id': crypto.randomUUID(),
      });

      expect(other.status).toBe(403);
      expect(random.status).toBe(403);
      expect(await jsonOf(other)).toMatchObject({ code: 'FORBIDDEN' });
    });

    it('answers 403 when the role lacks the route permission, and serves the permitted route', async () => {
      const developer = await tokenFor(kiln.baseUrl, seeded.users.developer.email);
      const headers = { authorization: `Bearer ${developer}`, 'x-tenant-id': seeded.tenantA };

      const refused = await fetch(`${kiln.baseUrl}/api/v1/permission-probe`, {
        method: 'DELETE',
        headers,
      });
      const allowed = await fetch(`${kiln.baseUrl}/api/v1/permission-probe`, { headers });

      expect(refused.status).toBe(403);
      expect(await jsonOf(refused)).toMatchObject({
        code: 'FORBIDDEN',
        error: expect.stringContaining('build:delete'),
      });
      expect(allowed.status).toBe(200);
      expect(await jsonOf(allowed)).toEqual({
        userId: seeded.users.developer.id,
        tenantId: seeded.tenantA,
        role: 'developer',
        permissions: ['build:create', 'build:list', 'build:read', 'build:cancel', 'token:manage'],
      });
    });

    it("gives the admin role the spec's five permissions, the admin API's three, its own tokens and the audit log", async () => {
      const response = await fetch(`${kiln.baseUrl}/api/v1/permission-probe`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${adminToken}`, 'x-tenant-id': seeded.tenantA },
      });

      expect(response.status).toBe(200);
      expect((await jsonOf(response)).permissions).toEqual([
        'build:create',
        'build:list',
        'build:read',
        'build:delete',
        'build:cancel',
        'member:manage',
        'project:manage',
        'settings:manage',
        'token:manage',
        'audit:read',
        'trigger:manage',
      ]);
    });
  });
});
