import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { TokenService } from '../src/auth/token.service.js';
import { PASSWORD, type Seeded, seedTenancy } from './support/auth.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Who may do what is cached per replica (docs/adr/0025-hot-path-round-trips.md). The cache lives
 * ten minutes here, so an answer that changes within a test changed because the entry was dropped:
 * by this process's own change, by Postgres's notification of another connection's change, or
 * because the LISTEN connection came back. kiln reaches Postgres through a proxy that can cut it.
 */
describe('access cache: changes to memberships and users reach the next requests', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let kiln: TestApp;
  let seeded: Seeded;
  let tenancy: TenancyService;
  /** Another connection, straight to Postgres, writing as the CLI or psql would. */
  let cli: pg.Client;
  let serial = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    const real = new URL(database.url);
    proxy = await TcpProxy.start({ host: real.hostname, port: Number(real.port) });
    kiln = await startTestApp({
      database: { url: proxy.proxied(database.url), drop: () => Promise.resolve() },
      env: { KILN_ACCESS_CACHE_TTL_MS: '600000' },
    });
    seeded = await seedTenancy(kiln);
    tenancy = kiln.app.get(TenancyService);
    cli = new pg.Client({ connectionString: database.url });
    await cli.connect();
  });

  afterAll(async () => {
    proxy.restore();
    await kiln.close();
    await cli.end();
    await proxy.stop();
    await database.drop();
  });

  interface Member {
    readonly id: string;
    readonly email: string;
    /** The status of `method path` as this user in `tenantId` (default tenant A). */
    status(method?: string, path?: string, tenantId?: string): Promise<number>;
  }

  /** A new user with `role` in tenant A (none when role is undefined). */
  async function newUser(role?: 'admin' | 'developer' | 'viewer'): Promise<Member> {
    const user = await tenancy.createUser(`access-${serial++}@example.com`, PASSWORD);
    if (role !== undefined) await tenancy.addMember(seeded.tenantA, user.email, role);
    const { access_token } = await kiln.app.get(TokenService).issue(user.id);
    return {
      id: user.id,
      email: user.email,
      status: async (method = 'GET', path = '/projects', tenantId = seeded.tenantA) =>
        (
          await fetch(`${kiln.baseUrl}/api/v1${path}`, {
            method,
            headers: { authorization: `Bearer ${access_token}`, 'x-tenant-id': tenantId },
          })
        ).status,
    };
  }

  /**
   * Asks until the answer is `expected` (a notification takes a moment to arrive, a LISTEN
   * connection a moment to come back) or 20 s pass, and returns the last answer.
   */
  async function eventually(expected: number, ask: () => Promise<number>): Promise<number> {
    const timeoutMs = 20_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await ask();
      if (status === expected || Date.now() > deadline) return status;
      await new Promise((done) => setTimeout(done, 20));
    }
  }

  it('answers a member removed through TenancyService with 403 on its very next request', async () => {
    const member = await newUser('viewer');
    expect(await member.status()).toBe(200);
    expect(await member.status()).toBe(200);

    await tenancy.removeMember(seeded.tenantA, member.email);

    expect(await member.status()).toBe(403);
  });

  it('enforces a role lowered through TenancyService on the very next request', async () => {
    const member = await newUser('admin');
    const deleteSomething = () => member.status('DELETE', `/builds/${randomUUID()}`);
    expect(await deleteSomething()).toBe(404);

    await tenancy.addMember(seeded.tenantA, member.email, 'viewer');

    expect(await deleteSomething()).toBe(403);
  });

  it('refuses a member removed from another connection once Postgres’s notification arrives', async () => {
    const member = await newUser('developer');
    expect(await member.status()).toBe(200);

    await cli.query('DELETE FROM memberships WHERE user_id = $1', [member.id]);

    expect(await eventually(403, () => member.status())).toBe(403);
  });

  it('admits a user added from another connection once the notification arrives', async () => {
    const user = await newUser();
    expect(await user.status()).toBe(403);

    await cli.query(
      `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'viewer')`,
      [seeded.tenantA, user.id],
    );

    expect(await eventually(200, () => user.status())).toBe(200);
  });

  it.each([
    ['disabled', 'UPDATE users SET disabled = true WHERE id = $1'],
    ['deleted', 'DELETE FROM users WHERE id = $1'],
  ])(
    'answers a user %s from another connection with 401 once the notification arrives',
    async (_change, statement) => {
      const member = await newUser('admin');
      expect(await member.status()).toBe(200);

      await cli.query(statement, [member.id]);

      expect(await eventually(401, () => member.status())).toBe(401);
    },
  );

  it('refuses the members of a tenant deleted from another connection', async () => {
    const tenant = await tenancy.createTenant(`doomed-${serial++}`);
    const member = await newUser();
    await tenancy.addMember(tenant.id, member.email, 'admin');
    const inTenant = () => member.status('GET', '/projects', tenant.id);
    expect(await inTenant()).toBe(200);

    await cli.query('DELETE FROM tenants WHERE id = $1', [tenant.id]);

    expect(await eventually(403, inTenant)).toBe(403);
  });

  it('reads every answer again once the LISTEN connection is back: what was sent meanwhile is lost', async () => {
    const member = await newUser('viewer');
    expect(await member.status()).toBe(200);

    proxy.cut();
    await cli.query('DELETE FROM memberships WHERE user_id = $1', [member.id]);
    proxy.restore();

    expect(await eventually(403, () => member.status())).toBe(403);
    // The cache is dropped as soon as the cut is seen, so the 403 may come before the line that
    // says the connection is back: wait for that line too (on a loaded machine it lags).
    const restored = () =>
      kiln.logs.find(
        (line) =>
          line['msg'] === 'LISTEN connection restored' &&
          JSON.stringify(line['channels']) === JSON.stringify(['kiln_access']),
      ) !== undefined;
    expect(await eventually(1, () => Promise.resolve(restored() ? 1 : 0))).toBe(1);
  }, 60_000);
});
