import { mkdtempSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { EmbeddedPostgres } from '../src/database/embedded-postgres.js';
import { LogCapture } from './support/log-capture.js';

async function query(url: string, sql: string, params: unknown[] = []): Promise<unknown[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const result = await client.query<Record<string, unknown>>(sql, params);
    return result.rows;
  } finally {
    await client.end();
  }
}

async function eventually<T>(probe: () => Promise<T>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((done) => setTimeout(done, 200));
    }
  }
}

describe(EmbeddedPostgres.name, () => {
  const dirs: string[] = [];
  const servers: EmbeddedPostgres[] = [];
  const logs = new LogCapture('info');

  function newDataDir(): string {
    const dir = mkdtempSync('/dev/shm/kiln-epg-');
    dirs.push(dir);
    return dir;
  }

  async function open(dataDir: string): Promise<EmbeddedPostgres> {
    const server = await EmbeddedPostgres.open({ dataDir, logger: logs.logger });
    servers.push(server);
    return server;
  }

  afterAll(async () => {
    for (const server of servers.reverse()) await server.stop();
    for (const server of servers) {
      if (server.clusterDir.startsWith('/var/lib/kiln/'))
        await rm(server.clusterDir, { recursive: true, force: true });
    }
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('keeps data across a stop and a new start on the same data directory', async () => {
    const dataDir = newDataDir();
    const first = await open(dataDir);
    await first.ensureDatabase('kiln');
    await query(first.url('kiln'), 'CREATE TABLE kept (value text)');
    await query(first.url('kiln'), 'INSERT INTO kept VALUES ($1)', ['written before the restart']);
    await first.stop();

    const second = await open(dataDir);

    expect(second.owned).toBe(true);
    expect(second.url('kiln')).toBe(first.url('kiln'));
    await expect(query(second.url('kiln'), 'SELECT value FROM kept')).resolves.toEqual([
      { value: 'written before the restart' },
    ]);
    await second.stop();
  });

  it('records the connection in KILN_DATA_DIR/postgres.json, readable by its owner only', async () => {
    const dataDir = newDataDir();
    const server = await open(dataDir);

    const file = join(dataDir, 'postgres.json');
    const recorded = JSON.parse(await readFile(file, 'utf8'));
    expect(recorded).toMatchObject({ version: 1, user: 'kiln', clusterDir: server.clusterDir });
    expect(server.url()).toContain(`:${recorded.port}/`);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await server.stop();
  });

  it('adopts a server that is already running for the cluster and leaves it running on stop', async () => {
    const dataDir = newDataDir();
    const owner = await open(dataDir);
    const adopter = await open(dataDir);

    expect(adopter.owned).toBe(false);
    await expect(query(adopter.url(), 'SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
    await adopter.stop();
    await expect(query(owner.url(), 'SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
    await owner.stop();
  });

  it('restarts a server that died, with the data it had', async () => {
    const dataDir = newDataDir();
    const server = await open(dataDir);
    await query(server.url(), 'CREATE TABLE survivors (id int)');
    await query(server.url(), 'INSERT INTO survivors VALUES (7)');
    const pid = server.pid;
    expect(pid).toBeDefined();

    process.kill(pid!, 'SIGKILL');

    await expect(
      eventually(() => query(server.url(), 'SELECT id FROM survivors')),
    ).resolves.toEqual([{ id: 7 }]);
    // The server answers a moment before the supervisor has seen it up and said so.
    await eventually(() =>
      Promise.resolve(
        expect(logs.find((l) => l['msg'] === 'embedded PostgreSQL restarted')).toBeDefined(),
      ),
    );
    expect(server.pid).not.toBe(pid);
    await server.stop();
  });

  const asRoot = process.getuid?.() === 0 ? it : it.skip;
  asRoot(
    'runs as root below a directory only root may enter, loosening no permission (root only)',
    async () => {
      const parent = newDataDir();
      await chmod(parent, 0o700);
      const dataDir = join(parent, 'inner');
      await mkdir(dataDir, { mode: 0o700 });

      const server = await open(dataDir);

      expect(server.clusterDir).toBe(join(dataDir, 'postgres'));
      await expect(query(server.url(), 'SELECT 1 AS one')).resolves.toEqual([{ one: 1 }]);
      expect(statSync(parent).mode & 0o777).toBe(0o700);
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      await server.stop();
    },
  );
});
