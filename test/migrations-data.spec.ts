import pg from 'pg';
import { BuildSpec1764288000000 } from '../src/database/migrations/1764288000000-build-spec.js';
import { BuildLogCounters1764374400000 } from '../src/database/migrations/1764374400000-build-log-counters.js';
import { UrlCredentials1765152000000 } from '../src/database/migrations/1765152000000-url-credentials.js';
import { SystemAdmin1765497600000 } from '../src/database/migrations/1765497600000-system-admin.js';
import { hearingMigrationNotes } from '../src/database/migrations/notes.js';
import { referenceSpec } from './support/build-specs.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';

/** The part of TypeORM's QueryRunner a migration uses, over a plain pg client. */
const runnerOf = (client: pg.Client) =>
  ({
    query: async (sql: string, params?: unknown[]) => (await client.query(sql, params)).rows,
  }) as never;

/**
 * Migrations that move or derive data, run on rows written in the shape before them: the migrated
 * template is stepped back (down), old rows are inserted, then the migration runs (up).
 */
describe('data migrations', () => {
  let database: TestDatabase;
  let client: pg.Client;
  let tenantId: string;

  beforeEach(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await new BuildLogCounters1764374400000().down(runnerOf(client));
    await new BuildSpec1764288000000().down(runnerOf(client));
    const tenant = await client.query<{ id: string }>(
      `INSERT INTO tenants (name) VALUES ('t') RETURNING id`,
    );
    tenantId = tenant.rows[0]!.id;
  });

  afterEach(async () => {
    await client.end();
    await database.drop();
  });

  async function project(name: string, repository: string | null, registry: string | null) {
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO projects (tenant_id, name, git_repository_url, default_registry)
       VALUES ($1, $2, $3, $4) RETURNING id`,
      [tenantId, name, repository, registry],
    );
    return rows[0]!.id;
  }

  async function build(
    projectId: string,
    number: number,
    fields: { method?: string; config: object; branch?: string; commit?: string },
  ): Promise<string> {
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO builds (tenant_id, project_id, build_number, status, method, config,
                           git_branch, git_commit)
       VALUES ($1, $2, $3, 'failed', $4, $5, $6, $7) RETURNING id`,
      [
        tenantId,
        projectId,
        number,
        fields.method ?? null,
        JSON.stringify(fields.config),
        fields.branch ?? null,
        fields.commit ?? null,
      ],
    );
    return rows[0]!.id;
  }

  const specOf = async (id: string) =>
    (await client.query('SELECT spec FROM builds WHERE id = $1', [id])).rows[0].spec;

  it('derives the spec of existing builds from their snapshot and their project', async () => {
    const web = await project('My Web!', 'https://git.example.com/web.git', 'reg.io/team');
    const reference = await build(web, 1, {
      config: { form: 'reference', build_args: { A: '1' } },
      branch: 'main',
      commit: 'abc1234',
    });
    const container = await build(web, 2, {
      method: 'container',
      config: {
        form: 'wizard',
        manifest: {
          type: 'container',
          base_image: 'alpine:3',
          instructions: ['RUN true'],
          environment: { CI: 'true' },
          tags: ['v1'],
          build_config: {
            build_type: 'container',
            sbom_tool: 'syft',
            scan_tool: 'trivy',
            registry_type: 'harbor',
            secret_manager_type: 'vault',
            build_context: 'app',
            build_args: { B: '2' },
            target: 'run',
          },
        },
      },
    });
    const fullTag = await build(web, 3, {
      method: 'kaniko',
      config: {
        form: 'wizard',
        manifest: {
          type: 'kaniko',
          base_image: '',
          instructions: [],
          environment: {},
          tags: ['v1', 'reg.io:5000/other/app:2'],
          build_config: {
            build_type: 'kaniko',
            sbom_tool: 'syft',
            scan_tool: 'grype',
            registry_type: 'quay',
            secret_manager_type: 'vault',
            dockerfile: 'FROM scratch\n',
            build_context: '.',
          },
        },
      },
    });
    const bare = await project('bare', null, null);
    const noRegistry = await build(bare, 1, { config: { form: 'reference', build_args: null } });

    await new BuildSpec1764288000000().up(runnerOf(client));

    expect(await specOf(reference)).toEqual({
      version: 1,
      form: 'reference',
      method: 'kaniko',
      config: {},
      source: {
        repository: 'https://git.example.com/web.git',
        branch: 'main',
        commit: 'abc1234',
        context: '.',
      },
      output: { repository: 'reg.io/team/my-web', tags: [], registryType: null },
      sbomTool: null,
      scanTool: null,
      secretManager: null,
      env: {},
      buildArgs: { A: '1' },
      timeoutSeconds: 3600,
    });
    expect(await specOf(container)).toEqual({
      version: 1,
      form: 'wizard',
      method: 'container',
      config: { target: 'run', base_image: 'alpine:3', instructions: ['RUN true'] },
      source: {
        repository: 'https://git.example.com/web.git',
        branch: null,
        commit: null,
        context: 'app',
      },
      output: { repository: 'reg.io/team/my-web', tags: ['v1'], registryType: 'harbor' },
      sbomTool: 'syft',
      scanTool: 'trivy',
      secretManager: 'vault',
      env: { CI: 'true' },
      buildArgs: { B: '2' },
      timeoutSeconds: 3600,
    });
    expect((await specOf(fullTag)).output).toEqual({
      repository: 'reg.io:5000/other/app',
      tags: ['v1', 'reg.io:5000/other/app:2'],
      registryType: 'quay',
    });
    expect((await specOf(noRegistry)).output.repository).toBeNull();
    expect((await specOf(noRegistry)).buildArgs).toEqual({});
  });

  it("moves the log counters into the log store's table, only for builds that logged (the silent one gets no row)", async () => {
    const web = await project('web', null, null);
    const logged = await build(web, 1, { config: { form: 'reference', build_args: null } });
    await build(web, 2, { config: { form: 'reference', build_args: null } });
    await client.query(
      `UPDATE builds SET log_lines = 7, log_bytes = 70, log_truncated = true,
              log_dropped_lines = 3 WHERE id = $1`,
      [logged],
    );
    await new BuildSpec1764288000000().up(runnerOf(client));

    await new BuildLogCounters1764374400000().up(runnerOf(client));

    const { rows } = await client.query('SELECT * FROM build_logs');
    expect(rows).toEqual([
      { build_id: logged, lines: 7, bytes: '70', truncated: true, dropped_lines: 3 },
    ]);
    const columns = await client.query(
      `SELECT column_name FROM information_schema.columns
        WHERE table_name = 'builds' AND column_name LIKE 'log\\_%'`,
    );
    expect(columns.rows).toEqual([]);
  });
});

describe('the migration that strips credentials from stored URLs', () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
  });

  afterAll(async () => {
    await client.end();
    await database.drop();
  });

  it('strips them from projects, secret manager and registry settings, build specs and error messages, and says which rows it changed without saying what it removed', async () => {
    const secret = 'PASSWORD-from-before';
    const one = async (sql: string, params: unknown[]) => (await client.query(sql, params)).rows[0];
    const { id: tenantId } = await one(
      `INSERT INTO tenants (name) VALUES ('stored') RETURNING id`,
      [],
    );
    const { id: projectId } = await one(
      `INSERT INTO projects (tenant_id, name, git_repository_url) VALUES ($1, 'old', $2) RETURNING id`,
      [tenantId, `https://ci:${secret}@git.example.com/team/app.git`],
    );
    const { id: clean } = await one(
      `INSERT INTO projects (tenant_id, name, git_repository_url) VALUES ($1, 'clean', $2) RETURNING id`,
      [tenantId, 'ssh://git@git.example.com/team/app.git'],
    );
    await client.query(
      `INSERT INTO tenant_secret_managers (tenant_id, type, settings) VALUES ($1, 'vault', $2)`,
      [
        tenantId,
        { address: `http://kiln:${secret}@vault:8200`, auth: { method: 'token', tokenFile: '/t' } },
      ],
    );
    await client.query(
      `INSERT INTO tenant_registries (tenant_id, type, settings) VALUES ($1, 's3', $2)`,
      [
        tenantId,
        { bucket: 'images', region: 'eu-west-1', endpoint: `http://minio:${secret}@minio:9000` },
      ],
    );
    const spec = {
      ...referenceSpec(),
      source: {
        repository: `https://ci:${secret}@git.example.com/team/app.git`,
        branch: 'main',
        commit: null,
        context: '.',
      },
    };
    const { id: buildId } = await one(
      `INSERT INTO builds (tenant_id, project_id, build_number, status, config, spec, error_message, failure_reason)
       VALUES ($1, $2, 1, 'failed', '{}', $3, $4, 'SecretUnavailable') RETURNING id`,
      [tenantId, projectId, spec, `cannot reach Vault at http://kiln:${secret}@vault:8200`],
    );
    const notes: Array<{ fields: Record<string, unknown>; message: string }> = [];

    await hearingMigrationNotes(
      (fields, message) => notes.push({ fields, message }),
      () => new UrlCredentials1765152000000().up(runnerOf(client)),
    );

    expect(await one('SELECT git_repository_url FROM projects WHERE id = $1', [projectId])).toEqual(
      {
        git_repository_url: 'https://git.example.com/team/app.git',
      },
    );
    expect(await one('SELECT git_repository_url FROM projects WHERE id = $1', [clean])).toEqual({
      git_repository_url: 'ssh://git@git.example.com/team/app.git',
    });
    expect(
      (await one('SELECT settings FROM tenant_secret_managers WHERE tenant_id = $1', [tenantId]))
        .settings,
    ).toEqual({
      address: 'http://vault:8200',
      auth: { method: 'token', tokenFile: '/t' },
    });
    expect(
      (await one('SELECT settings FROM tenant_registries WHERE tenant_id = $1', [tenantId]))
        .settings,
    ).toEqual({
      bucket: 'images',
      region: 'eu-west-1',
      endpoint: 'http://minio:9000',
    });
    expect(
      await one(
        `SELECT spec -> 'source' ->> 'repository' AS url, error_message FROM builds WHERE id = $1`,
        [buildId],
      ),
    ).toEqual({
      url: 'https://git.example.com/team/app.git',
      error_message: 'cannot reach Vault at http://vault:8200',
    });
    expect(notes.map((note) => note.fields)).toEqual([
      { table: 'projects', project_id: projectId, tenant_id: tenantId },
      { table: 'tenant_secret_managers', tenant_id: tenantId, type: 'vault', fields: ['address'] },
      { table: 'tenant_registries', tenant_id: tenantId, type: 's3', fields: ['endpoint'] },
      { table: 'builds', count: 1, build_ids: [buildId] },
    ]);
    expect(JSON.stringify(notes)).not.toContain(secret);
  });
});

describe('the migration that adds installation administrators', () => {
  let database: TestDatabase;
  let client: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    await new SystemAdmin1765497600000().down(runnerOf(client));
  });

  afterAll(async () => {
    await client.end();
    await database.drop();
  });

  it('makes the first user created an installation administrator, and only it', async () => {
    const insert = (email: string, createdAt: string) =>
      client.query(`INSERT INTO users (email, password_hash, created_at) VALUES ($1, 'x', $2)`, [
        email,
        createdAt,
      ]);
    await insert('later@example.com', '2026-02-01T00:00:00Z');
    await insert('first@example.com', '2026-01-01T00:00:00Z');
    await insert('last@example.com', '2026-03-01T00:00:00Z');

    await new SystemAdmin1765497600000().up(runnerOf(client));

    const { rows } = await client.query('SELECT email, system_admin FROM users ORDER BY email');
    expect(rows).toEqual([
      { email: 'first@example.com', system_admin: true },
      { email: 'last@example.com', system_admin: false },
      { email: 'later@example.com', system_admin: false },
    ]);
  });

  it('announces a change of the flag to every replica, and not a change of password', async () => {
    await client.query('LISTEN kiln_access');
    const heard: string[] = [];
    client.on('notification', (message) => heard.push(message.payload ?? ''));
    const { rows } = await client.query<{ id: string }>(
      "SELECT id FROM users WHERE email = 'last@example.com'",
    );

    await client.query("UPDATE users SET password_hash = 'y' WHERE id = $1", [rows[0]!.id]);
    await client.query('UPDATE users SET system_admin = true WHERE id = $1', [rows[0]!.id]);
    await client.query('SELECT 1');

    expect(heard).toEqual([rows[0]!.id]);
  });
});
