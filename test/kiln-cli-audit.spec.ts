import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The `kiln` HTTP CLI as `make build` compiles it (scripts/build-cli.sh). */
const CLI = join(__dirname, '..', 'dist', 'cli', 'http', 'kiln.js');

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

describe('kiln audit list (the compiled CLI against a real kiln)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  const token: Record<'admin' | 'developer' | 'adminB' | 'root', string> = {} as never;
  const home = mkdtempSync(join(tmpdir(), 'kiln-cli-audit-'));

  /** Runs `kiln` as a CI job would: KILN_URL and KILN_TOKEN (and KILN_TENANT), no file. */
  function run(args: string[], who: keyof typeof token, tenant?: string): Promise<Run> {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: home,
        KILN_URL: kiln.baseUrl,
        KILN_TOKEN: token[who],
        ...(tenant === undefined ? {} : { KILN_TENANT: tenant }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return new Promise((done) => child.on('close', (status) => done({ status, stdout, stderr })));
  }

  async function json(args: string[], who: keyof typeof token, tenant?: string): Promise<any> {
    const result = await run([...args, '-o', 'json'], who, tenant);
    if (result.status !== 0) throw new Error(`kiln ${args.join(' ')}: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    kiln = await startTestApp();
    seeded = await seedTenancy(kiln);
    const tenancy = kiln.app.get(TenancyService);
    await tenancy.setSystemAdmin(
      (await tenancy.createUser('root@example.com', PASSWORD)).email,
      true,
    );
    token.admin = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    token.developer = await tokenFor(kiln.baseUrl, seeded.users.developer.email);
    token.adminB = await tokenFor(kiln.baseUrl, seeded.users.adminB.email);
    token.root = await tokenFor(kiln.baseUrl, 'root@example.com');
    const a = new ApiClient(kiln, token.admin, seeded.tenantA);
    const b = new ApiClient(kiln, token.adminB, seeded.tenantB);
    for (const name of ['one', 'two', 'three']) {
      expect((await a.request('POST', '/projects', { name })).status).toBe(201);
    }
    expect((await b.request('POST', '/projects', { name: 'b-one' })).status).toBe(201);
    // Refused: a developer may not create projects.
    const developer = new ApiClient(kiln, token.developer, seeded.tenantA);
    expect((await developer.request('POST', '/projects', { name: 'no' })).status).toBe(403);
  });

  afterAll(async () => {
    await kiln?.close();
    await rm(home, { recursive: true, force: true });
  });

  it("lists the tenant's events as the API answers them, newest first", async () => {
    const printed = await json(['audit', 'list'], 'admin', seeded.tenantA);
    const api = await jsonOf(
      await new ApiClient(kiln, token.admin, seeded.tenantA).request('GET', '/audit?limit=50'),
    );

    expect(printed).toEqual(api);
    expect(printed.events.map((e: any) => e.action)).toEqual([
      'project.create',
      'project.create',
      'project.create',
      'project.create',
    ]);
    expect(printed.events[0]).toMatchObject({
      actor: { type: 'user', user_id: seeded.users.developer.id },
      result: 'refused',
      status: 403,
    });
  });

  it('filters by action, actor, result and time, and pages', async () => {
    const refused = await json(['audit', 'list', '--result', 'refused'], 'admin', seeded.tenantA);
    const byActor = await json(
      ['audit', 'list', '--actor', seeded.users.admin.id],
      'admin',
      seeded.tenantA,
    );
    const none = await json(['audit', 'list', '--action', 'build.cancel'], 'admin', seeded.tenantA);
    const later = await json(
      ['audit', 'list', '--since', new Date(Date.now() + 60_000).toISOString()],
      'admin',
      seeded.tenantA,
    );
    const second = await json(
      ['audit', 'list', '--limit', '1', '--page', '2'],
      'admin',
      seeded.tenantA,
    );
    const all = await json(['audit', 'list'], 'admin', seeded.tenantA);

    expect(refused.events.map((e: any) => e.status)).toEqual([403]);
    expect(byActor.total).toBe(3);
    expect(none.total).toBe(0);
    expect(later.total).toBe(0);
    expect(second).toMatchObject({ page: 2, limit: 1, total: 4 });
    expect(second.events[0].id).toBe(all.events[1].id);
  });

  it('prints a table for people', async () => {
    const result = await run(['audit', 'list'], 'admin', seeded.tenantA);

    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^TIME\s+ACTOR\s+TENANT\s+ACTION\s+TARGET\s+RESULT\s+STATUS\s+FROM$/);
    expect(lines[1]).toContain('developer@example.com');
    expect(lines[1]).toMatch(/project\.create\s+project -\s+refused\s+403/);
    expect(lines.at(-1)).toBe('page 1 of 1 (4 events)');
  });

  it('refuses a developer (exit 3, the API’s error)', async () => {
    const result = await run(['audit', 'list'], 'developer', seeded.tenantA);

    expect(result.status).toBe(3);
    expect(result.stderr).toContain('audit:read');
  });

  it('lists every tenant, one tenant, or none with --all-tenants (system:admin)', async () => {
    const every = await json(['audit', 'list', '--all-tenants', '--limit', '100'], 'root');
    const onlyB = await json(
      ['--tenant', seeded.tenantB, 'audit', 'list', '--all-tenants'],
      'root',
    );
    const noTenant = await json(['--tenant', 'none', 'audit', 'list', '--all-tenants'], 'root');
    const refused = await run(['audit', 'list', '--all-tenants'], 'admin', seeded.tenantA);

    expect(new Set(every.events.map((e: any) => e.tenant_id))).toEqual(
      new Set([seeded.tenantA, seeded.tenantB, null]),
    );
    expect(onlyB.events.map((e: any) => [e.tenant_id, e.action])).toEqual([
      [seeded.tenantB, 'project.create'],
    ]);
    // The four sign-ins of beforeAll belong to no tenant.
    expect(noTenant.events.map((e: any) => [e.tenant_id, e.action])).toEqual(
      Array(4).fill([null, 'auth.login']),
    );
    expect(refused.status).toBe(3);
  });
});
