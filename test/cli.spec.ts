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

  // Passwords and credentials the tests give the CLI: no output of it, and no row, shows one.
  const audit = auditCredentials((found) => found.recordDatabase(database.url));
  for (const credential of [
    'a long enough password',
    'PASSWORD-in-url',
    'plain-token',
    'hunter2-plain',
  ]) {
    audit.register(credential);
  }

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

  it('creates a tenant, a user, a membership and a project that then work over HTTP, and removes the membership', async () => {
    const tenant = json(['tenant', 'create', 'acme']);
    const user = json(
      ['user', 'create', '--email', 'Dev@Acme.io', '--password-stdin'],
      'a long enough password\n',
    );
    const member = json([
      'member',
      'add',
      '--tenant',
      'acme',
      '--email',
      'dev@acme.io',
      '--role',
      'developer',
    ]);
    const project = json([
      'project',
      'create',
      '--tenant',
      tenant.id,
      '--name',
      'api',
      '--repo',
      'https://git.acme.io/api.git',
      '--registry',
      'registry.acme.io:5000/team',
    ]);
    const listed = json(['project', 'list', '--tenant', 'acme']);

    expect(tenant).toMatchObject({ id: expect.any(String), name: 'acme' });
    expect(user).toMatchObject({ id: expect.any(String), email: 'dev@acme.io' });
    expect(member).toEqual({ tenant_id: tenant.id, user_id: user.id, role: 'developer' });
    expect(listed.projects).toEqual([
      expect.objectContaining({
        id: project.id,
        name: 'api',
        git_repository_url: 'https://git.acme.io/api.git',
        default_registry: 'registry.acme.io:5000/team',
      }),
    ]);

    // A long access cache: only the change notification can make the running API see the removal.
    const app = await startTestApp({ database, env: { KILN_ACCESS_CACHE_TTL_MS: '600000' } });
    audit.kilnOrigin(app.baseUrl);
    try {
      const response = await login(app.baseUrl, 'dev@acme.io', 'a long enough password');
      expect(response.status).toBe(200);
      const { access_token } = await jsonOf(response);
      const listProjects = () =>
        fetch(`${app.baseUrl}/api/v1/projects`, {
          headers: { authorization: `Bearer ${access_token}`, 'x-tenant-id': tenant.id },
        });
      expect(
        (await jsonOf(await listProjects())).projects.map((p: { id: string }) => p.id),
      ).toEqual([project.id]);

      expect(json(['member', 'remove', '--tenant', 'acme', '--email', 'dev@acme.io'])).toEqual({
        tenant: 'acme',
        email: 'dev@acme.io',
        removed: true,
      });
      const deadline = Date.now() + 20_000;
      let status = (await listProjects()).status;
      while (status === 200 && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 50));
        status = (await listProjects()).status;
      }
      expect(status).toBe(403);
      expect(
        kiln(['member', 'remove', '--tenant', 'acme', '--email', 'dev@acme.io']),
      ).toMatchObject({
        status: 1,
        stderr: expect.stringContaining('not a member'),
      });
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
    json(['tenant', 'create', 'text-co']);
    json(['project', 'create', '--tenant', 'text-co', '--name', 'site']);

    const result = kiln(['project', 'list', '--tenant', 'text-co']);

    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^ID {36}NAME {2}REPOSITORY\n[0-9a-f-]{36} {2}site\n$/);
  });

  it.each([
    [['tenant', 'create', 'acme'], /already exists/],
    [
      ['member', 'add', '--tenant', 'acme', '--email', 'dev@acme.io', '--role', 'owner'],
      /Role must be admin, developer or viewer/,
    ],
    [
      ['member', 'add', '--tenant', 'nope', '--email', 'dev@acme.io', '--role', 'viewer'],
      /No tenant nope/,
    ],
    [
      ['project', 'create', '--tenant', 'acme', '--name', 'x', '--repo', 'file:///etc'],
      /git_repository_url/,
    ],
    [['project', 'list'], /--tenant is required/],
    [['user', 'create', '--email', 'x@acme.io'], /--password-stdin/],
    [['frobnicate', 'all'], /Unknown command/],
  ])('refuses `kiln-admin %j` with a clear message and exit 1', (args, message) => {
    const result = kiln(args);

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(message);
  });

  it('refuses credentials inside a URL, naming the field and the way to give them, and stores nothing', () => {
    const refusals: Array<[string[], string | undefined, RegExp]> = [
      [
        [
          'project',
          'create',
          '--tenant',
          'acme',
          '--name',
          'creds',
          '--repo',
          'https://kiln:PASSWORD-in-url@git.example.com/team/app.git',
        ],
        undefined,
        /git_repository_url.*must not carry credentials.*kiln project git-credentials/s,
      ],
      [
        ['secret-manager', 'set', '--tenant', 'acme', '--type', 'vault', '--settings-file', '-'],
        JSON.stringify({
          address: 'http://kiln:PASSWORD-in-url@vault:8200',
          auth: { method: 'kubernetes', role: 'kiln' },
        }),
        /settings\.address.*must not carry credentials/s,
      ],
      [
        ['registry', 'set', '--tenant', 'acme', '--type', 's3', '--settings-file', '-'],
        JSON.stringify({
          bucket: 'images',
          region: 'eu-west-1',
          endpoint: 'http://minio:PASSWORD-in-url@minio:9000',
        }),
        /settings\.endpoint.*must not carry credentials.*secretAccessKey/s,
      ],
    ];
    const before = json(['project', 'list', '--tenant', 'acme']);

    for (const [args, input, message] of refusals) {
      const result = kiln(args, input);

      expect({ args, status: result.status }).toEqual({ args, status: 1 });
      expect(result.stderr).toMatch(message);
      expect(`${result.stdout}${result.stderr}`).not.toContain('PASSWORD-in-url');
    }
    expect(json(['project', 'list', '--tenant', 'acme'])).toEqual(before);
    for (const noun of ['secret-manager', 'registry']) {
      expect(JSON.stringify(json([noun, 'list', '--tenant', 'acme']))).not.toContain(
        'PASSWORD-in-url',
      );
    }
  });

  it('sets, lists and removes a tenant’s secret manager and registry settings', () => {
    json(['tenant', 'create', 'managed-co']);
    const vault = {
      address: 'https://vault.example.com:8200',
      namespace: 'platform',
      auth: { method: 'kubernetes', role: 'kiln' },
    };
    const set = json(
      [
        'secret-manager',
        'set',
        '--tenant',
        'managed-co',
        '--type',
        'vault',
        '--settings-file',
        '-',
      ],
      JSON.stringify(vault),
    );
    const harbor = {
      address: 'harbor.example.com',
      namespace: 'team',
      username: 'robot$team+ci',
      password: 'vault:kv/data/registry/harbor#secret',
    };
    json(
      ['registry', 'set', '--tenant', 'managed-co', '--type', 'harbor', '--settings-file', '-'],
      JSON.stringify(harbor),
    );

    expect(set).toMatchObject({ type: 'vault', settings: vault });
    expect(json(['secret-manager', 'list', '--tenant', 'managed-co']).secret_managers).toEqual([
      expect.objectContaining({ type: 'vault', settings: vault }),
    ]);
    expect(json(['registry', 'list', '--tenant', 'managed-co']).registries).toEqual([
      expect.objectContaining({ type: 'harbor', settings: harbor }),
    ]);
    json(['secret-manager', 'remove', '--tenant', 'managed-co', '--type', 'vault']);
    expect(json(['secret-manager', 'list', '--tenant', 'managed-co']).secret_managers).toEqual([]);
  });

  it.each([
    [
      ['registry', 'set', '--tenant', 'acme', '--type', 'quay', '--settings-file', '-'],
      { address: 'quay.io', username: 'org+robot', password: 'plain-token' },
      /settings\.password: must be a secret reference/,
    ],
    [
      ['secret-manager', 'set', '--tenant', 'acme', '--type', 'vault', '--settings-file', '-'],
      { address: 'vault.example.com', auth: { method: 'token' } },
      /settings\.address: must be an http\(s\) URL[\s\S]*settings\.auth\.tokenFile: is required/,
    ],
    [
      ['secret-manager', 'set', '--tenant', 'acme', '--type', 'gsm', '--settings-file', '-'],
      {},
      /Unknown secret manager gsm/,
    ],
  ])(
    'refuses settings `kiln-admin %j` that would store a credential or cannot work',
    (args, settings, message) => {
      const result = kiln(args, JSON.stringify(settings));

      expect(result.status).toBe(1);
      expect(result.stderr).toMatch(message);
      expect(result.stderr).not.toContain('plain-token');
    },
  );

  it('gives a project git credentials whose password is a reference, and refuses a plain one', () => {
    json(['tenant', 'create', 'git-co']);
    json(['project', 'create', '--tenant', 'git-co', '--name', 'web']);
    const args = ['project', 'git-credentials', '--tenant', 'git-co', '--project', 'web'];

    const plain = kiln([...args, '--username', 'ci', '--password', 'hunter2-plain']);
    const set = json([...args, '--username', 'ci', '--password', 'aws:git/web#token']);

    expect(plain.status).toBe(1);
    expect(plain.stderr).toMatch(/password: must be a secret reference/);
    expect(set).toEqual({ project_id: expect.any(String), git_credentials: true });
    expect(json([...args, '--clear'])).toEqual({
      project_id: set.project_id,
      git_credentials: false,
    });
  });

  it("shows and sets a tenant's weight and limit in admission, and refuses bad values changing nothing", async () => {
    const { id } = json(['tenant', 'create', 'fair-co']);
    const args = ['tenant', 'admission', '--tenant', 'fair-co'];

    expect(json(args)).toEqual({ tenant_id: id, weight: 1, max_running: null });
    expect(json([...args, '--weight', '3', '--max-running', '5'])).toEqual({
      tenant_id: id,
      weight: 3,
      max_running: 5,
    });
    const refused = kiln([...args, '--weight', '0']);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/weight: an integer from 1 to 1000/);
    expect(kiln([...args, '--max-running', 'lots']).status).toBe(1);
    expect(kiln(args).stdout).toBe('tenant fair-co: weight 3, running builds at most 5\n');
    expect(json([...args, '--max-running', 'default'])).toEqual({
      tenant_id: id,
      weight: 3,
      max_running: null,
    });
    // What every admission pass reads.
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        'SELECT weight, max_running FROM tenant_admission_settings WHERE tenant_id = $1',
        [id],
      );
      expect(rows).toEqual([{ weight: 3, max_running: null }]);
    } finally {
      await client.end();
    }
  });

  it('refuses a short password read from stdin', () => {
    const result = kiln(
      ['user', 'create', '--email', 'short@acme.io', '--password-stdin'],
      'short\n',
    );

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/Password must be 12 to 1024 characters/);
  });
});
