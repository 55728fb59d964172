import { spawnSync } from 'node:child_process';
import { Client } from 'pg';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { auditCredentials } from './support/credential-audit.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { login } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp } from './support/test-app.js';

const CLI = join(__dirname, '..', 'dist', 'cli', 'kiln-admin.js');

// Every `kiln-admin` command is a Node process that boots the application (about 2.5 s on 2 idle cores);
// a test runs up to a dozen of them in turn, more than jest's 30 s on a loaded machine.
jest.setTimeout(180_000);

describe('the kiln-admin CLI (database-direct)', () => {
  let database: TestDatabase;

  // The password the tests give the CLI: no output of it, and no row, shows it.
  const audit = auditCredentials((found) => found.recordDatabase(database.url));
  audit.register('a long enough password');

  function kiln(args: string[], input?: string) {
    const result = spawnSync('node', [CLI, ...args], {
      env: { PATH: process.env['PATH'], DATABASE_URL: database.url, KILN_RUNNER: 'local' },
      input,
      encoding: 'utf8',
    });
    audit.record(`kiln-admin ${args.join(' ')}`, `${result.stdout}${result.stderr}`);
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  function json(args: string[], input?: string): any {
    const result = kiln([...args, '--json'], input);
    if (result.status !== 0)
      throw new Error(`kiln-admin ${args.join(' ')} failed: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    database = await createTestDatabase();
  });

  afterAll(async () => {
    await database.drop();
  });

  /** The rows the moved commands used to write. */
  async function tables() {
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      const read = async (table: string) =>
        (await client.query(`SELECT * FROM ${table} ORDER BY 1`)).rows;
      return {
        tenants: await read('tenants'),
        memberships: await read('memberships'),
        projects: await read('projects'),
        registries: await read('tenant_registries'),
        admission: await read('tenant_admission_settings'),
      };
    } finally {
      await client.end();
    }
  }

  it('creates the first administrator, who then onboards a tenant over HTTP and works in it', async () => {
    const user = json(
      ['user', 'create', '--email', 'Root@Acme.io', '--password-stdin'],
      'a long enough password\n',
    );
    expect(user).toEqual({
      id: expect.any(String),
      email: 'root@acme.io',
      created_at: expect.any(String),
    });
    expect(json(['user', 'system-admin', '--email', 'root@acme.io'])).toMatchObject({
      id: user.id,
      system_admin: true,
    });

    const app = await startTestApp({ database });
    audit.kilnOrigin(app.baseUrl);
    try {
      const { access_token } = await jsonOf(
        await login(app.baseUrl, 'root@acme.io', 'a long enough password'),
      );
      const call = (method: string, path: string, tenant?: string, body?: unknown) =>
        fetch(`${app.baseUrl}/api/v1${path}`, {
          method,
          headers: {
            authorization: `Bearer ${access_token}`,
            ...(tenant === undefined ? {} : { 'x-tenant-id': tenant }),
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
      const tenant = await call('POST', '/tenants', undefined, { name: 'acme' });
      expect(tenant.status).toBe(201);
      const { id } = await jsonOf(tenant);
      // Its creator is the tenant's first admin.
      const project = await call('POST', '/projects', id, { name: 'api' });
      expect(project.status).toBe(201);
      expect((await jsonOf(await call('GET', '/members', id))).members).toEqual([
        expect.objectContaining({ user_id: user.id, role: 'admin' }),
      ]);
    } finally {
      await app.close();
    }
  });

  it('makes a user an installation administrator and takes it back, which a running API sees at once', async () => {
    json(
      ['user', 'create', '--email', 'ops@acme.io', '--password-stdin'],
      'a long enough password\n',
    );
    // A long access cache: only the change notification can make the running API see the change.
    const app = await startTestApp({ database, env: { KILN_ACCESS_CACHE_TTL_MS: '600000' } });
    audit.kilnOrigin(app.baseUrl);
    try {
      const { access_token } = await jsonOf(
        await login(app.baseUrl, 'ops@acme.io', 'a long enough password'),
      );
      // The CLI runs with spawnSync, which holds this process: a kept-alive socket the server
      // closed meanwhile fails the next request once (ECONNRESET); the poll asks again.
      const listTenants = async () => {
        try {
          const response = await fetch(`${app.baseUrl}/api/v1/tenants`, {
            headers: { authorization: `Bearer ${access_token}` },
          });
          return response.status;
        } catch {
          return 0;
        }
      };
      const until = async (status: number) => {
        const deadline = Date.now() + 20_000;
        let seen = await listTenants();
        while (seen !== status && Date.now() < deadline) {
          await new Promise((done) => setTimeout(done, 50));
          seen = await listTenants();
        }
        return seen;
      };
      expect(await listTenants()).toBe(403);

      expect(json(['user', 'system-admin', '--email', 'ops@acme.io'])).toMatchObject({
        email: 'ops@acme.io',
        system_admin: true,
      });
      expect(await until(200)).toBe(200);

      expect(json(['user', 'system-admin', '--email', 'ops@acme.io', '--off'])).toMatchObject({
        system_admin: false,
      });
      expect(await until(403)).toBe(403);
    } finally {
      await app.close();
    }
  });

  it('prints human-readable output by default', () => {
    const result = kiln(
      ['user', 'create', '--email', 'text@acme.io', '--password-stdin'],
      'a long enough password\n',
    );

    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^created user text@acme\.io\n {2}id: [0-9a-f-]{36}\n$/);
  });

  it.each([
    [['user', 'create', '--email', 'x@acme.io'], /--password-stdin/],
    [['user', 'system-admin', '--email', 'nobody@acme.io'], /nobody@acme\.io/],
    [['user', 'system-admin'], /--email is required/],
    [['frobnicate', 'all'], /Unknown command/],
  ])('refuses `kiln-admin %j` with a clear message and exit 1', (args, message) => {
    const result = kiln(args);

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(message);
  });

  it.each([
    [['tenant', 'create', 'acme'], 'kiln tenant create <name>'],
    [
      ['member', 'add', '--tenant', 'acme', '--email', 'a@acme.io', '--role', 'viewer'],
      'kiln member add',
    ],
    [['project', 'create', '--tenant', 'acme', '--name', 'x'], 'kiln project create <name>'],
    [
      ['registry', 'set', '--tenant', 'acme', '--type', 'quay', '--settings-file', '-'],
      'kiln settings registry set',
    ],
    [['tenant', 'admission', '--tenant', 'acme', '--weight', '3'], 'kiln settings admission'],
  ])(
    'answers `kiln-admin %j`, a command that moved to the API, with the kiln command, changing nothing',
    async (args, command) => {
      const before = await tables();
      const result = kiln(args, '{}');

      expect(result.status).toBe(1);
      expect(result.stderr).toContain(`is an API command now: ${command}`);
      expect(await tables()).toEqual(before);
    },
  );

  it('refuses a short password read from stdin', () => {
    const result = kiln(
      ['user', 'create', '--email', 'short@acme.io', '--password-stdin'],
      'short\n',
    );

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/Password must be 12 to 1024 characters/);
  });

  it('records each of its actions in the audit log as kiln-admin, refusals too, never a password', async () => {
    const events = async () => {
      const client = new Client({ connectionString: database.url });
      await client.connect();
      try {
        return (
          await client.query(
            `SELECT actor_type, actor_user_id, tenant_id, action, target_type, target_id, result,
                    status, user_agent
               FROM audit_events ORDER BY occurred_at, id`,
          )
        ).rows;
      } finally {
        await client.end();
      }
    };
    const before = (await events()).length;

    const user = json(
      ['user', 'create', '--email', 'audited@acme.io', '--password-stdin'],
      'a long enough password\n',
    );
    const refused = kiln(['user', 'system-admin', '--email', 'nobody@acme.io']);
    json(['migrate']);

    expect(refused.status).toBe(1);
    // Standard error is for people: the audit lines stay below its default level (warn).
    expect(refused.stderr).not.toContain('"log":"audit"');
    const kilnAdmin = {
      actor_type: 'kiln-admin',
      actor_user_id: null,
      tenant_id: null,
      status: null,
      user_agent: expect.stringMatching(/^kiln-admin \(os user .+\)$/),
    };
    expect((await events()).slice(before)).toEqual([
      {
        ...kilnAdmin,
        action: 'user.create',
        target_type: 'user',
        target_id: user.id,
        result: 'success',
      },
      {
        ...kilnAdmin,
        action: 'user.update',
        target_type: 'user',
        target_id: null,
        result: 'refused',
      },
      {
        ...kilnAdmin,
        action: 'database.migrate',
        target_type: null,
        target_id: null,
        result: 'success',
      },
    ]);
  });
});
