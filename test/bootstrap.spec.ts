import { createTestDatabase, type TestDatabase } from './support/database.js';
import { login } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp } from './support/test-app.js';

const ADMIN = {
  KILN_BOOTSTRAP_ADMIN_EMAIL: 'Root@Example.com',
  KILN_BOOTSTRAP_ADMIN_PASSWORD: 'bootstrap password 1',
};

describe('first start with KILN_BOOTSTRAP_ADMIN_*', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await createTestDatabase();
  });

  afterAll(async () => {
    await database.drop();
  });

  it('creates the default tenant, the admin and the default project once, and logs their ids', async () => {
    const first = await startTestApp({ env: ADMIN, database });
    const logged = first.logs.find(
      (l) => typeof l['msg'] === 'string' && l['msg'].startsWith('bootstrap:'),
    );
    try {
      expect(logged).toMatchObject({
        tenant_id: expect.any(String),
        user_id: expect.any(String),
        project_id: expect.any(String),
      });
      const response = await login(
        first.baseUrl,
        'root@example.com',
        ADMIN.KILN_BOOTSTRAP_ADMIN_PASSWORD,
      );
      const { access_token } = await jsonOf(response);
      const headers = (tenant: string) => ({
        authorization: `Bearer ${access_token}`,
        'x-tenant-id': tenant,
      });

      const own = await fetch(`${first.baseUrl}/api/v1/projects`, {
        headers: headers(logged!['tenant_id'] as string),
      });
      const random = await fetch(`${first.baseUrl}/api/v1/projects`, {
        headers: headers(crypto.randomUUID()),
      });

      expect(own.status).toBe(200);
      expect((await jsonOf(own)).projects).toEqual([
        expect.objectContaining({ id: logged!['project_id'], name: 'default' }),
      ]);
      expect(random.status).toBe(403);
      // The bootstrap admin administers the installation: it can list every tenant.
      const tenants = await fetch(`${first.baseUrl}/api/v1/tenants`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
      expect(tenants.status).toBe(200);
      expect((await jsonOf(tenants)).tenants).toEqual([
        expect.objectContaining({ id: logged!['tenant_id'], name: 'default' }),
      ]);
    } finally {
      await first.close();
    }

    const second = await startTestApp({ env: ADMIN, database });
    try {
      expect(
        second.logs.find((l) => typeof l['msg'] === 'string' && l['msg'].startsWith('bootstrap:')),
      ).toBeUndefined();
      const [{ count }] = await second.dataSource.query('SELECT count(*)::int AS count FROM users');
      expect(count).toBe(1);
    } finally {
      await second.close();
    }
  });
});
