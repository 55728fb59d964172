import { execFileSync } from 'node:child_process';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { KILN_ENTITIES } from '../../src/app.entities.js';
import { writeOpenApiFiles } from '../../src/app.openapi.js';
import { createLogger } from '../../src/common/logger.js';
import { createDataSource, runMigrations } from '../../src/database/data-source.js';
import { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';
import { TEMPLATE_DATABASE } from './database.js';
import { isAlive } from './processes.js';

/**
 * One embedded PostgreSQL per test run, on tmpfs, with a migrated template database that every
 * test file clones (test/support/database.ts); and the OpenAPI document with its UI, generated
 * once per run from the sources as `make build` generates it from dist/, which every app of
 * startTestApp serves (docs/adr/0051-api-role-memory.md).
 */
const TEST_ROOT = '/dev/shm';
const PREFIX = 'kiln-test-';

/** A run killed with SIGKILL never reaches teardown: drop the directories of dead runs. */
async function removeLeftoversOfKilledRuns(): Promise<void> {
  for (const entry of await readdir(TEST_ROOT)) {
    const pid = Number(entry.slice(PREFIX.length));
    if (!entry.startsWith(PREFIX) || !Number.isInteger(pid) || isAlive(pid)) continue;
    const postmaster = await readFile(
      `${TEST_ROOT}/${entry}/postgres/postmaster.pid`,
      'utf8',
    ).catch(() => '');
    const serverPid = Number(postmaster.split('\n')[0]);
    if (serverPid > 0 && isAlive(serverPid)) process.kill(serverPid, 'SIGQUIT');
    await rm(`${TEST_ROOT}/${entry}`, { recursive: true, force: true });
  }
}

export default async function globalSetup(): Promise<void> {
  // kubectl and helm under .tools/kube (a no-op when they are there and match their SHA-256).
  execFileSync('bash', [join(__dirname, '..', '..', 'scripts', 'kube-tools.sh')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await removeLeftoversOfKilledRuns();
  const dataDir = `${TEST_ROOT}/${PREFIX}${process.pid}`;
  const logger = createLogger('warn');
  const server = await EmbeddedPostgres.open({ dataDir, logger, ephemeral: true });
  await server.ensureDatabase(TEMPLATE_DATABASE);
  const dataSource = createDataSource({
    url: server.url(TEMPLATE_DATABASE),
    logger,
    entities: KILN_ENTITIES,
  });
  await dataSource.initialize();
  await runMigrations(dataSource, logger);
  await dataSource.destroy(); // a template must have no open connections while it is cloned

  const openApiDir = join(dataDir, 'openapi');
  await writeOpenApiFiles(openApiDir);

  process.env['KILN_TEST_POSTGRES_URL'] = server.url('postgres');
  process.env['KILN_TEST_OPENAPI_DIR'] = openApiDir;
  process.env['KILN_TEST_POSTGRES_DIR'] = dataDir;
  (globalThis as { __kilnTestPostgres?: EmbeddedPostgres }).__kilnTestPostgres = server;
}
