import { TenancyService } from '../src/auth/tenancy.service.js';
import { login, PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { FakeRunner } from './support/fake-runner.js';
import { type ApiReply, callApi } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * The admin API's behaviour (docs/adr/0043-admin-api.md): installation administrators manage
 * tenants, a tenant's admins its members. Who may call which route is
 * test/authorization-matrix.spec.ts; here, what the routes do, what they refuse, and that a
 * refusal changes nothing.
 */
describe('admin API: tenants and members', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let tenancy: TenancyService;
  let serial = 0;
  const tokens = new Map<string, string>();

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    tenancy = kiln.app.get(TenancyService);
    await tenancy.createUser('root@example.com', PASSWORD);
    await tenancy.setSystemAdmin('root@example.com', true);
  });

  afterAll(async () => {
    await kiln.close();
  });

  async function tokenOf(email: string): Promise<string> {
    const known = tokens.get(email);
    if (known !== undefined) return known;
    const token = await tokenFor(kiln.baseUrl, email);
    tokens.set(email, token);
    return token;
  }

  /** A request as `email` (X-Tenant-ID `tenant`, if any); the answer's status and JSON body. */
  async function call(
    email: string,
    method: string,
    path: string,
    options: { tenant?: string; body?: unknown } = {},
  ): Promise<ApiReply> {
    return callApi(kiln.baseUrl, await tokenOf(email), method, path, options);
  }

  async function newUser(): Promise<string> {
    const user = await tenancy.createUser(`admin-api-${++serial}@example.com`, PASSWORD);
    return user.email;
  }

  /** What a refused request must leave as it was. */
  const snapshot = async () => ({
    tenants: await kiln.dataSource.query('SELECT * FROM tenants ORDER BY id'),
    memberships: await kiln.dataSource.query(
      'SELECT * FROM memberships ORDER BY tenant_id, user_id',
    ),
    users: await kiln.dataSource.query(
      'SELECT id, email, disabled, system_admin FROM users ORDER BY id',
    ),
  });

  describe('tenants (system:admin)', () => {
    it('creates a tenant whose first admin is the caller, who can then manage it', async () => {
      const created = await call('root@example.com', 'POST', '/tenants', {
        body: { name: '  platform  ' },
      });

      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.any(String),
        name: 'platform',
        created_at: expect.any(String),
      });
      const members = await call('root@example.com', 'GET', '/members', {
        tenant: created.body.id,
      });
      expect(members.status).toBe(200);
      expect(members.body.members).toEqual([
        expect.objectContaining({ email: 'root@example.com', role: 'admin', disabled: false }),
      ]);
    });

    it('makes the user named by admin_email the first admin instead', async () => {
      const lead = await newUser();

      const created = await call('root@example.com', 'POST', '/tenants', {
        body: { name: 'team-with-lead', admin_email: lead },
      });

      expect(created.status).toBe(201);
      const mine = await call(lead, 'GET', '/auth/tenants');
      expect(mine.body.tenants).toEqual([
        expect.objectContaining({ id: created.body.id, role: 'admin' }),
      ]);
      expect(
        (await call('root@example.com', 'GET', '/auth/tenants')).body.tenants,
      ).not.toContainEqual(expect.objectContaining({ id: created.body.id }));
    });

    it('lists every tenant by name, a page at a time', async () => {
      const all = await call('root@example.com', 'GET', '/tenants?limit=100');
      const names = all.body.tenants.map((t: { name: string }) => t.name);

      expect(all.status).toBe(200);
      expect(names).toEqual([...names].sort());
      expect(names).toEqual(expect.arrayContaining(['tenant-a', 'tenant-b']));
      expect(all.body.total).toBe(names.length);
      const second = await call('root@example.com', 'GET', '/tenants?limit=1&page=2');
      expect(second.body).toEqual({
        tenants: [all.body.tenants[1]],
        total: all.body.total,
        page: 2,
        limit: 1,
      });
    });

    it('renames a tenant, and refuses a name another tenant has', async () => {
      const { body } = await call('root@example.com', 'POST', '/tenants', {
        body: { name: 'to-rename' },
      });

      const renamed = await call('root@example.com', 'PATCH', `/tenants/${body.id}`, {
        body: { name: 'renamed' },
      });
      const before = await snapshot();
      const taken = await call('root@example.com', 'PATCH', `/tenants/${body.id}`, {
        body: { name: 'tenant-a' },
      });

      expect(renamed.status).toBe(200);
      expect(renamed.body.name).toBe('renamed');
      expect(taken.status).toBe(409);
      expect(taken.body.code).toBe('CONFLICT');
      expect(await snapshot()).toEqual(before);
    });

    it('deletes an empty tenant with its members and projects, and refuses one with builds', async () => {
      const { body } = await call('root@example.com', 'POST', '/tenants', {
        body: { name: 'short-lived' },
      });
      const build = await call('admin@example.com', 'POST', '/builds', {
        tenant: seeded.tenantA,
        body: { project_id: seeded.projectA, git_branch: 'keeps-the-tenant' },
      });
      expect(build.status).toBe(201);
      const before = await snapshot();

      const withBuilds = await call('root@example.com', 'DELETE', `/tenants/${seeded.tenantA}`);
      expect(withBuilds.status).toBe(409);
      expect(withBuilds.body.error).toMatch(/still has builds: delete them first/);
      expect(await snapshot()).toEqual(before);

      const deleted = await call('root@example.com', 'DELETE', `/tenants/${body.id}`);
      expect(deleted.status).toBe(204);
      expect(
        await kiln.dataSource.query('SELECT 1 FROM memberships WHERE tenant_id = $1', [body.id]),
      ).toEqual([]);
      expect((await call('root@example.com', 'DELETE', `/tenants/${body.id}`)).status).toBe(404);
    });

    it('refuses bad input with the Error body and changes nothing', async () => {
      const before = await snapshot();
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/tenants', { name: '' }],
        ['POST', '/tenants', { name: 'x'.repeat(101) }],
        ['POST', '/tenants', { name: 'tenant-a' }],
        ['POST', '/tenants', { name: 'mass', id: seeded.tenantA }],
        ['POST', '/tenants', { name: 'nobody', admin_email: 'nobody@example.com' }],
        ['POST', '/tenants', { name: 'bad-email', admin_email: 'not an e-mail' }],
        ['PATCH', `/tenants/${seeded.tenantB}`, { name: 'b2', created_at: '2000-01-01' }],
        ['PATCH', '/tenants/not-a-uuid', { name: 'b3' }],
        ['GET', '/tenants?limit=1000', undefined],
      ];

      const statuses = [];
      for (const [method, path, body] of cases) {
        const reply = await call('root@example.com', method, path, { body });
        expect(reply.body).toEqual(
          expect.objectContaining({ code: expect.any(String), error: expect.any(String) }),
        );
        statuses.push(reply.status);
      }

      expect(statuses).toEqual([400, 400, 409, 400, 404, 400, 400, 400, 400]);
      expect(await snapshot()).toEqual(before);
    });

    it('stops answering an administrator whose flag is taken back, on its next request', async () => {
      const email = await newUser();
      await tenancy.setSystemAdmin(email, true);
      expect((await call(email, 'GET', '/tenants')).status).toBe(200);

      await tenancy.setSystemAdmin(email, false);

      const refused = await call(email, 'GET', '/tenants');
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatch(/installation administrator/);
    });
  });

  describe('members (member:manage)', () => {
    const admin = 'admin@example.com';

    it("lists the tenant's members by e-mail with their roles", async () => {
      const reply = await call(admin, 'GET', '/members', { tenant: seeded.tenantA });

      expect(reply.status).toBe(200);
      expect(reply.body.members.map((m: any) => [m.email, m.role])).toEqual([
        ['admin@example.com', 'admin'],
        ['developer@example.com', 'developer'],
        ['viewer@example.com', 'viewer'],
      ]);
      expect(reply.body.members[0]).toEqual({
        user_id: seeded.users.admin.id,
        email: 'admin@example.com',
        role: 'admin',
        disabled: false,
        member_since: expect.any(String),
      });
    });

    it('adds a member, and its next request is authorized with the role it was given', async () => {
      const email = await newUser();
      const outsider = await call(email, 'GET', '/builds', { tenant: seeded.tenantA });
      expect(outsider.status).toBe(403);

      const added = await call(admin, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email: email.toUpperCase(), role: 'viewer' },
      });

      expect(added.status).toBe(200);
      expect(added.body).toEqual(expect.objectContaining({ email, role: 'viewer' }));
      expect((await call(email, 'GET', '/builds', { tenant: seeded.tenantA })).status).toBe(200);
      const create = await call(email, 'POST', '/builds', {
        tenant: seeded.tenantA,
        body: { project_id: seeded.projectA, git_branch: 'viewer-may-not' },
      });
      expect(create.status).toBe(403);

      const promoted = await call(admin, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email, role: 'developer' },
      });
      expect(promoted.body.role).toBe('developer');
      const created = await call(email, 'POST', '/builds', {
        tenant: seeded.tenantA,
        body: { project_id: seeded.projectA, git_branch: 'developer-may' },
      });
      expect(created.status).toBe(201);
    });

    it('removes a member, whose next request there is 403', async () => {
      const email = await newUser();
      const { body } = await call(admin, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email, role: 'developer' },
      });
      expect((await call(email, 'GET', '/builds', { tenant: seeded.tenantA })).status).toBe(200);

      const removed = await call(admin, 'DELETE', `/members/${body.user_id}`, {
        tenant: seeded.tenantA,
      });

      expect(removed.status).toBe(204);
      expect((await call(email, 'GET', '/builds', { tenant: seeded.tenantA })).status).toBe(403);
      const again = await call(admin, 'DELETE', `/members/${body.user_id}`, {
        tenant: seeded.tenantA,
      });
      expect(again.status).toBe(404);
    });

    it('never leaves a tenant without an admin: the last one can be neither demoted nor removed', async () => {
      const before = await snapshot();

      const demoted = await call(admin, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email: admin, role: 'developer' },
      });
      const removed = await call(admin, 'DELETE', `/members/${seeded.users.admin.id}`, {
        tenant: seeded.tenantA,
      });

      expect([demoted.status, removed.status]).toEqual([409, 409]);
      expect(demoted.body.error).toMatch(/last admin/);
      expect(await snapshot()).toEqual(before);

      // With a second admin, the first may step down.
      const second = await newUser();
      await call(admin, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email: second, role: 'admin' },
      });
      const stepDown = await call(second, 'POST', '/members', {
        tenant: seeded.tenantA,
        body: { email: second, role: 'viewer' },
      });
      expect(stepDown.status).toBe(200);
    });

    it("reaches no other tenant's members: a user of tenant A is not found from tenant B", async () => {
      const before = await snapshot();

      const reply = await call(
        'adminb@example.com',
        'DELETE',
        `/members/${seeded.users.viewer.id}`,
        {
          tenant: seeded.tenantB,
        },
      );

      expect(reply.status).toBe(404);
      expect(await snapshot()).toEqual(before);
    });

    it('refuses bad input with the Error body and changes nothing', async () => {
      const before = await snapshot();
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/members', { email: 'viewer@example.com', role: 'owner' }],
        ['POST', '/members', { email: 'viewer@example.com' }],
        ['POST', '/members', { email: 'not-an-email', role: 'viewer' }],
        ['POST', '/members', { email: 'viewer@example.com', role: 'admin', system_admin: true }],
        ['POST', '/members', { email: 'nobody@example.com', role: 'viewer' }],
        ['DELETE', '/members/not-a-uuid', undefined],
      ];

      const statuses = [];
      for (const [method, path, body] of cases) {
        const reply = await call(admin, method, path, { tenant: seeded.tenantA, body });
        expect(reply.body).toEqual(
          expect.objectContaining({ code: expect.any(String), error: expect.any(String) }),
        );
        statuses.push(reply.status);
      }

      expect(statuses).toEqual([400, 400, 400, 400, 404, 400]);
      expect(await snapshot()).toEqual(before);
    });
  });

  describe('projects (project:manage)', () => {
    const admin = 'admin@example.com';
    const projects = () => kiln.dataSource.query('SELECT * FROM projects ORDER BY tenant_id, id');

    it('creates, reads, changes and deletes a project', async () => {
      const created = await call(admin, 'POST', '/projects', {
        tenant: seeded.tenantA,
        body: {
          name: ' api ',
          git_repository_url: 'https://git.example.com/a/api.git',
          default_registry: 'registry.example.com/a',
        },
      });
      expect(created.status).toBe(201);
      expect(created.body).toEqual(
        expect.objectContaining({
          tenant_id: seeded.tenantA,
          name: 'api',
          git_repository_url: 'https://git.example.com/a/api.git',
          default_registry: 'registry.example.com/a',
        }),
      );
      const { id } = created.body;

      const read = await call('viewer@example.com', 'GET', `/projects/${id}`, {
        tenant: seeded.tenantA,
      });
      expect(read.status).toBe(200);
      expect(read.body).toEqual(created.body);

      const changed = await call(admin, 'PATCH', `/projects/${id}`, {
        tenant: seeded.tenantA,
        body: { name: 'api-v2', default_registry: null },
      });
      expect(changed.status).toBe(200);
      expect(changed.body).toEqual(
        expect.objectContaining({
          name: 'api-v2',
          git_repository_url: 'https://git.example.com/a/api.git',
          default_registry: null,
        }),
      );

      expect(
        (await call(admin, 'DELETE', `/projects/${id}`, { tenant: seeded.tenantA })).status,
      ).toBe(204);
      expect((await call(admin, 'GET', `/projects/${id}`, { tenant: seeded.tenantA })).status).toBe(
        404,
      );
    });

    it('refuses to delete a project that has builds, and changes nothing', async () => {
      const before = await projects();

      const reply = await call(admin, 'DELETE', `/projects/${seeded.projectA}`, {
        tenant: seeded.tenantA,
      });

      expect(reply.status).toBe(409);
      expect(reply.body.error).toMatch(/still has builds/);
      expect(await projects()).toEqual(before);
    });

    it("reaches no other tenant's project: 404, as for a missing one", async () => {
      const before = await projects();

      const replies = await Promise.all([
        call('adminb@example.com', 'GET', `/projects/${seeded.projectA}`, {
          tenant: seeded.tenantB,
        }),
        call('adminb@example.com', 'PATCH', `/projects/${seeded.projectA}`, {
          tenant: seeded.tenantB,
          body: { name: 'stolen' },
        }),
        call('adminb@example.com', 'DELETE', `/projects/${seeded.projectA}`, {
          tenant: seeded.tenantB,
        }),
      ]);

      expect(replies.map((r) => r.status)).toEqual([404, 404, 404]);
      expect(await projects()).toEqual(before);
    });

    it('refuses bad input with the Error body and changes nothing', async () => {
      const before = await projects();
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/projects', { name: 'web' }],
        ['POST', '/projects', { name: '' }],
        [
          'POST',
          '/projects',
          { name: 'leaky', git_repository_url: 'https://u:p@git.example.com/x.git' },
        ],
        ['POST', '/projects', { name: 'local', git_repository_url: 'file:///etc' }],
        ['POST', '/projects', { name: 'reg', default_registry: 'https://registry.example.com' }],
        ['POST', '/projects', { name: 'mass', tenant_id: seeded.tenantB }],
        ['PATCH', `/projects/${seeded.projectA}`, { next_build_number: 1 }],
        [
          'PATCH',
          `/projects/${seeded.projectA}`,
          { git_repository_url: 'https://t@git.example.com/x.git' },
        ],
      ];

      const replies = [];
      for (const [method, path, body] of cases)
        replies.push(await call(admin, method, path, { tenant: seeded.tenantA, body }));

      expect(replies.map((r) => r.status)).toEqual([409, 400, 400, 400, 400, 400, 400, 400]);
      for (const reply of replies)
        expect(reply.body).toEqual(
          expect.objectContaining({ code: expect.any(String), error: expect.any(String) }),
        );
      expect(JSON.stringify(replies)).not.toContain('u:p@');
      expect(await projects()).toEqual(before);
    });
  });

  describe('users (system:admin)', () => {
    const root = 'root@example.com';

    it('creates a user who can sign in, without ever answering its password', async () => {
      const created = await call(root, 'POST', '/users', {
        body: { email: 'New.Person@Example.com', password: 'a long enough password' },
      });

      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.any(String),
        email: 'new.person@example.com',
        disabled: false,
        system_admin: false,
        created_at: expect.any(String),
      });
      expect(JSON.stringify(created.body)).not.toContain('a long enough password');
      const signedIn = await login(
        kiln.baseUrl,
        'new.person@example.com',
        'a long enough password',
      );
      expect(signedIn.status).toBe(200);
      const listed = await call(root, 'GET', '/users?limit=100');
      expect(listed.body.users).toContainEqual(created.body);
      expect(listed.body.total).toBe(listed.body.users.length);
    });

    it('disables a user, whose next request is 401, and enables it again', async () => {
      const email = await newUser();
      expect((await call(email, 'GET', '/auth/tenants')).status).toBe(200);
      const { id } = (await call(root, 'GET', '/users?limit=100')).body.users.find(
        (u: { email: string }) => u.email === email,
      );

      const disabled = await call(root, 'PATCH', `/users/${id}`, { body: { disabled: true } });

      expect(disabled.body.disabled).toBe(true);
      expect((await call(email, 'GET', '/auth/tenants')).status).toBe(401);
      await call(root, 'PATCH', `/users/${id}`, { body: { disabled: false } });
      expect((await call(email, 'GET', '/auth/tenants')).status).toBe(200);
    });

    it('never leaves the installation without an enabled administrator', async () => {
      const { users } = (await call(root, 'GET', '/users?limit=100')).body;
      const rootId = users.find((u: { email: string }) => u.email === root).id;
      expect(users.filter((u: any) => u.system_admin && !u.disabled)).toHaveLength(1);
      const before = await snapshot();

      const replies = [
        await call(root, 'PATCH', `/users/${rootId}`, { body: { disabled: true } }),
        await call(root, 'PATCH', `/users/${rootId}`, { body: { system_admin: false } }),
      ];

      expect(replies.map((r) => r.status)).toEqual([409, 409]);
      expect(replies[0]!.body.error).toMatch(/last enabled installation administrator/);
      expect(await snapshot()).toEqual(before);

      // With a second administrator, the first may step down, and be made one again.
      const second = await newUser();
      const secondId = (await call(root, 'GET', '/users?limit=100')).body.users.find(
        (u: { email: string }) => u.email === second,
      ).id;
      expect(
        (await call(root, 'PATCH', `/users/${secondId}`, { body: { system_admin: true } })).status,
      ).toBe(200);
      expect(
        (await call(root, 'PATCH', `/users/${rootId}`, { body: { system_admin: false } })).status,
      ).toBe(200);
      expect((await call(root, 'GET', '/users')).status).toBe(403);
      expect(
        (await call(second, 'PATCH', `/users/${rootId}`, { body: { system_admin: true } })).status,
      ).toBe(200);
      expect(
        (await call(root, 'PATCH', `/users/${secondId}`, { body: { system_admin: false } })).status,
      ).toBe(200);
    });

    it('refuses bad input with the Error body and changes nothing', async () => {
      const before = await snapshot();
      const cases: Array<[string, string, unknown]> = [
        ['POST', '/users', { email: 'admin@example.com', password: 'a long enough password' }],
        ['POST', '/users', { email: 'short@example.com', password: 'short' }],
        ['POST', '/users', { email: 'not an e-mail', password: 'a long enough password' }],
        [
          'POST',
          '/users',
          { email: 'x@example.com', password: 'a long enough password', system_admin: true },
        ],
        ['PATCH', `/users/${seeded.users.viewer.id}`, { disabled: 'yes' }],
        ['PATCH', `/users/${seeded.users.viewer.id}`, { email: 'stolen@example.com' }],
        ['PATCH', '/users/6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11', { disabled: true }],
      ];

      const replies = [];
      for (const [method, path, body] of cases)
        replies.push(await call(root, method, path, { body }));

      expect(replies.map((r) => r.status)).toEqual([409, 400, 400, 400, 400, 400, 404]);
      for (const reply of replies)
        expect(reply.body).toEqual(
          expect.objectContaining({ code: expect.any(String), error: expect.any(String) }),
        );
      expect(JSON.stringify(replies)).not.toContain('a long enough password');
      expect(await snapshot()).toEqual(before);
    });
  });
});
