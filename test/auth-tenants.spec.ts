import { permissionsOf } from '../src/auth/permissions.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const NIL = '00000000-0000-0000-0000-000000000000';

describe('GET /api/v1/auth/tenants', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let tenancy: TenancyService;
  let serial = 0;

  beforeAll(async () => {
    kiln = await startTestApp();
    seeded = await seedTenancy(kiln);
    tenancy = kiln.app.get(TenancyService);
  });

  afterAll(async () => {
    await kiln.close();
  });

  function tenantsOf(token: string | undefined, headers: Record<string, string> = {}) {
    return fetch(`${kiln.baseUrl}/api/v1/auth/tenants`, {
      headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...headers },
    });
  }

  /** A new user, with its token, already in the given tenants (added in this order). */
  async function userIn(...memberships: Array<[string, string]>) {
    const user = await tenancy.createUser(`tenants-${serial++}@example.com`, PASSWORD);
    for (const [tenantId, role] of memberships) await tenancy.addMember(tenantId, user.email, role);
    return { id: user.id, email: user.email, token: await tokenFor(kiln.baseUrl, user.email) };
  }

  it('lists both tenants of a member of two, ordered by name, with its role in each', async () => {
    const user = await userIn([seeded.tenantB, 'developer'], [seeded.tenantA, 'viewer']);

    const response = await tenantsOf(user.token);

    expect(response.status).toBe(200);
    expect(await jsonOf(response)).toEqual({
      tenants: [
        {
          id: seeded.tenantA,
          name: 'tenant-a',
          role: 'viewer',
          permissions: ['build:list', 'build:read', 'token:manage'],
        },
        {
          id: seeded.tenantB,
          name: 'tenant-b',
          role: 'developer',
          permissions: ['build:create', 'build:list', 'build:read', 'build:cancel', 'token:manage'],
        },
      ],
    });
  });

  it.each(['admin', 'developer', 'viewer'] as const)(
    'answers a member of one tenant as %s with that tenant alone, never another',
    async (role) => {
      const token = await tokenFor(kiln.baseUrl, seeded.users[role].email);

      const response = await tenantsOf(token);

      expect(await jsonOf(response)).toEqual({
        tenants: [{ id: seeded.tenantA, name: 'tenant-a', role, permissions: permissionsOf(role) }],
      });
    },
  );

  it("shows tenant B's admin only tenant B, and a user of no tenant an empty list", async () => {
    const adminB = await tokenFor(kiln.baseUrl, seeded.users.adminB.email);
    const outsider = await tokenFor(kiln.baseUrl, seeded.users.outsider.email);

    expect(await jsonOf(await tenantsOf(adminB))).toEqual({
      tenants: [
        {
          id: seeded.tenantB,
          name: 'tenant-b',
          role: 'admin',
          permissions: [
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
          ],
        },
      ],
    });
    expect(await jsonOf(await tenantsOf(outsider))).toEqual({ tenants: [] });
  });

  it.each([
    ['another tenant', 'TENANT_B'],
    ['a malformed id', 'not-a-uuid'],
    ['the nil UUID', NIL],
    ['an empty value', ''],
  ])('ignores an X-Tenant-ID of %s', async (_name, value) => {
    const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    const tenantId = value === 'TENANT_B' ? seeded.tenantB : value;

    const response = await tenantsOf(token, { 'x-tenant-id': tenantId });

    expect(response.status).toBe(200);
    expect(await jsonOf(response)).toEqual(await jsonOf(await tenantsOf(token)));
  });

  it.each([
    ['no token', undefined, 'A bearer access token is required'],
    ['a token that is not kiln’s', 'x.y.z', 'Invalid or expired access token'],
  ])('answers %s with 401 and the Error body', async (_name, token, error) => {
    const response = await tenantsOf(token);

    expect(response.status).toBe(401);
    expect(await jsonOf(response)).toEqual({
      error,
      code: 'UNAUTHORIZED',
      timestamp: expect.any(String),
      trace_id: response.headers.get('x-request-id'),
    });
  });

  it('answers a query string PostgreSQL cannot store with 400, its one documented 400', async () => {
    const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);

    const response = await fetch(`${kiln.baseUrl}/api/v1/auth/tenants?q=%00`, {
      headers: { authorization: `Bearer ${token}` },
    });

    expect(response.status).toBe(400);
    expect(await jsonOf(response)).toMatchObject({ code: 'INVALID_REQUEST' });
  });

  it('refuses a disabled user as every other route does (401, same Error body)', async () => {
    const user = await userIn([seeded.tenantA, 'admin']);
    await kiln.dataSource.query('UPDATE users SET disabled = true WHERE id = $1', [user.id]);

    const response = await tenantsOf(user.token);
    const projects = await fetch(`${kiln.baseUrl}/api/v1/projects`, {
      headers: { authorization: `Bearer ${user.token}`, 'x-tenant-id': seeded.tenantA },
    });

    expect(response.status).toBe(401);
    expect(projects.status).toBe(401);
    const comparable = (body: any) => ({ ...body, timestamp: 0, trace_id: 0 });
    expect(comparable(await jsonOf(response))).toEqual(comparable(await jsonOf(projects)));
  });

  it('shows a membership `kiln member add` makes, and drops one removed in SQL, on the next request', async () => {
    const user = await userIn([seeded.tenantA, 'viewer']);
    expect((await jsonOf(await tenantsOf(user.token))).tenants).toHaveLength(1);

    await tenancy.addMember(seeded.tenantB, user.email, 'admin');
    const added = await jsonOf(await tenantsOf(user.token));
    await kiln.dataSource.query('DELETE FROM memberships WHERE user_id = $1 AND tenant_id = $2', [
      user.id,
      seeded.tenantA,
    ]);
    const removed = await jsonOf(await tenantsOf(user.token));

    expect(added.tenants.map((t: any) => [t.id, t.role])).toEqual([
      [seeded.tenantA, 'viewer'],
      [seeded.tenantB, 'admin'],
    ]);
    expect(removed.tenants.map((t: any) => [t.id, t.role])).toEqual([[seeded.tenantB, 'admin']]);
  });

  it('counts against the caller’s rate limit like every /api/v1 route', async () => {
    const token = await tokenFor(kiln.baseUrl, seeded.users.viewer.email);

    const response = await tenantsOf(token);

    for (const header of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'])
      expect({ header, value: response.headers.get(header) }).toEqual({
        header,
        value: expect.stringMatching(/^\d+$/),
      });
  });
});
