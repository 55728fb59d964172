import { TenancyService } from '../src/auth/tenancy.service.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { FakeRunner } from './support/fake-runner.js';
import { type ApiReply, callApi } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * A tenant's settings over HTTP (issue 31; docs/api.md "Settings"): its admins set secret
 * managers, registries and project git credentials with the admin CLI's checks (references,
 * never a credential); installation administrators set its place in admission. Who may call
 * which route is test/authorization-matrix.spec.ts; here, what the routes do and that a refusal
 * changes nothing.
 */
describe('settings API', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  const tokens = new Map<string, string>();

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    const tenancy = kiln.app.get(TenancyService);
    await tenancy.createUser('root@example.com', PASSWORD);
    await tenancy.setSystemAdmin('root@example.com', true);
  });

  afterAll(async () => {
    await kiln.close();
  });

  async function call(
    email: string,
    method: string,
    path: string,
    options: { tenant?: string; body?: unknown } = {},
  ): Promise<ApiReply> {
    const token = tokens.get(email) ?? (await tokenFor(kiln.baseUrl, email));
    tokens.set(email, token);
    return callApi(kiln.baseUrl, token, method, path, options);
  }

  const adminA = (method: string, path: string, body?: unknown) =>
    call('admin@example.com', method, path, { tenant: seeded.tenantA, body });

  /** Everything a refused settings request must leave as it was. */
  const snapshot = async () => ({
    managers: await kiln.dataSource.query(
      'SELECT * FROM tenant_secret_managers ORDER BY tenant_id, type',
    ),
    registries: await kiln.dataSource.query(
      'SELECT * FROM tenant_registries ORDER BY tenant_id, type',
    ),
    projects: await kiln.dataSource.query('SELECT * FROM projects ORDER BY id'),
    admission: await kiln.dataSource.query(
      'SELECT * FROM tenant_admission_settings ORDER BY tenant_id',
    ),
  });

  const vault = {
    address: 'https://vault.example.com:8200',
    namespace: 'platform',
    auth: { method: 'kubernetes', role: 'kiln' },
  };
  const harbor = {
    address: 'harbor.example.com',
    namespace: 'team',
    username: 'robot$team+ci',
    password: 'vault:kv/data/registry/harbor#secret',
  };

  it("sets, lists and removes the tenant's secret manager and registry; another tenant sees none of it", async () => {
    const set = await adminA('PUT', '/settings/secret-managers/vault', vault);
    expect(set).toEqual({
      status: 200,
      body: { type: 'vault', settings: vault, updated_at: expect.any(String) },
    });
    expect((await adminA('PUT', '/settings/registries/harbor', harbor)).status).toBe(200);

    expect((await adminA('GET', '/settings/secret-managers')).body).toEqual({
      secret_managers: [{ type: 'vault', settings: vault, updated_at: expect.any(String) }],
    });
    expect((await adminA('GET', '/settings/registries')).body).toEqual({
      registries: [{ type: 'harbor', settings: harbor, updated_at: expect.any(String) }],
    });
    const other = await call('adminb@example.com', 'GET', '/settings/registries', {
      tenant: seeded.tenantB,
    });
    expect(other.body).toEqual({ registries: [] });
    expect(
      (
        await call('adminb@example.com', 'DELETE', '/settings/registries/harbor', {
          tenant: seeded.tenantB,
        })
      ).status,
    ).toBe(404);

    expect((await adminA('DELETE', '/settings/secret-managers/vault')).status).toBe(204);
    expect((await adminA('GET', '/settings/secret-managers')).body).toEqual({
      secret_managers: [],
    });
    expect((await adminA('DELETE', '/settings/secret-managers/vault')).status).toBe(404);
  });

  it.each([
    [
      'a credential where a reference belongs',
      '/settings/registries/quay',
      { address: 'quay.io', username: 'org+robot', password: 'plain-token' },
      'password',
    ],
    [
      'a URL with userinfo',
      '/settings/secret-managers/vault',
      { ...vault, address: 'https://root:hunter2@vault.example.com:8200' },
      'address',
    ],
    ['settings that cannot work', '/settings/secret-managers/vault', { auth: {} }, 'address'],
    ['an unknown type', '/settings/secret-managers/gsm', {}, undefined],
    ['a JSON array', '/settings/registries/harbor', [harbor], undefined],
  ])('refuses %s with the Error body and changes nothing', async (_, path, body, field) => {
    const before = await snapshot();
    const refused = await adminA('PUT', path, body);

    expect(refused.status).toBe(400);
    expect(refused.body).toEqual(
      expect.objectContaining({ code: 'INVALID_REQUEST', error: expect.any(String) }),
    );
    if (field !== undefined)
      expect(Object.keys(refused.body.details ?? {}).join(' ')).toContain(field);
    expect(JSON.stringify(refused.body)).not.toContain('hunter2');
    expect(await snapshot()).toEqual(before);
  });

  it("sets, reads and removes a project's git credentials as references only", async () => {
    const path = `/projects/${seeded.projectA}/git-credentials`;
    expect((await adminA('GET', path)).status).toBe(404);

    const before = await snapshot();
    const plain = await adminA('PUT', path, { username: 'ci', password: 'ghp_plainpassword' });
    expect(plain.status).toBe(400);
    expect(plain.body.details).toEqual({
      password: expect.stringMatching(/^must be a secret reference/),
    });
    const extra = await adminA('PUT', path, {
      username: 'ci',
      password: 'vault:kv/data/ci/git#token',
      tenant_id: seeded.tenantB,
    });
    expect(extra.status).toBe(400);
    expect(await snapshot()).toEqual(before);

    const credentials = { username: 'ci', password: 'vault:kv/data/ci/git#token' };
    expect(await adminA('PUT', path, credentials)).toEqual({ status: 200, body: credentials });
    expect(await adminA('GET', path)).toEqual({ status: 200, body: credentials });
    // Another tenant's admin cannot see or change them.
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const answer = await call('adminb@example.com', method, path, {
        tenant: seeded.tenantB,
        ...(method === 'PUT' ? { body: credentials } : {}),
      });
      expect({ method, status: answer.status }).toEqual({ method, status: 404 });
    }
    expect((await adminA('DELETE', path)).status).toBe(204);
    expect((await adminA('GET', path)).status).toBe(404);
  });

  it("lets installation administrators, not the tenant's admins, set its place in admission", async () => {
    expect((await adminA('GET', '/settings/admission')).body).toEqual({
      tenant_id: seeded.tenantA,
      weight: 1,
      max_running: null,
    });
    const path = `/tenants/${seeded.tenantA}/admission`;
    const own = await adminA('PATCH', path, { weight: 50 });
    expect(own.status).toBe(403);

    const set = await call('root@example.com', 'PATCH', path, {
      body: { weight: 3, max_running: 5 },
    });
    expect(set).toEqual({
      status: 200,
      body: { tenant_id: seeded.tenantA, weight: 3, max_running: 5 },
    });
    expect((await adminA('GET', '/settings/admission')).body).toEqual(set.body);
    expect((await call('root@example.com', 'GET', path)).body).toEqual(set.body);

    const before = await snapshot();
    for (const body of [{ weight: 0 }, { weight: 1.5 }, { max_running: -1 }, { weight: '2' }]) {
      const refused = await call('root@example.com', 'PATCH', path, { body });
      expect({ body, status: refused.status }).toEqual({ body, status: 400 });
    }
    expect(await snapshot()).toEqual(before);

    const restored = await call('root@example.com', 'PATCH', path, { body: { max_running: null } });
    expect(restored.body).toEqual({ tenant_id: seeded.tenantA, weight: 3, max_running: null });
    const missing = await call(
      'root@example.com',
      'PATCH',
      '/tenants/6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11/admission',
      { body: { weight: 2 } },
    );
    expect(missing.status).toBe(404);
  });
});
