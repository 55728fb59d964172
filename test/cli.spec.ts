import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { login } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp } from './support/test-app.js';

const CLI = join(__dirname, '..', 'dist', 'cli', 'kiln.js');

describe('the kiln admin CLI', () => {
  let database: TestDatabase;

  function kiln(args: string[], input?: string) {
    const result = spawnSync('node', [CLI, ...args], {
      env: { PATH: process.env['PATH'], DATABASE_URL: database.url, KILN_RUNNER: 'local' },
      input,
      encoding: 'utf8',
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  function json(args: string[], input?: string): any {
    const result = kiln([...args, '--json'], input);
    if (result.status !== 0) throw new Error(`kiln ${args.join(' ')} failed: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    database = await createTestDatabase();
  });

  afterAll(async () => {
    await database.drop();
  });

  it('creates a tenant, a user, a membership and a project that then work over HTTP', async () => {
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

    const app = await startTestApp({ database });
    try {
      const response = await login(app.baseUrl, 'dev@acme.io', 'a long enough password');
      expect(response.status).toBe(200);
      const { access_token } = await jsonOf(response);
      const projects = await fetch(`${app.baseUrl}/api/v1/projects`, {
        headers: { authorization: `Bearer ${access_token}`, 'x-tenant-id': tenant.id },
      });
      expect((await jsonOf(projects)).projects.map((p: { id: string }) => p.id)).toEqual([
        project.id,
      ]);
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
  ])('refuses `kiln %j` with a clear message and exit 1', (args, message) => {
    const result = kiln(args);

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(message);
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
