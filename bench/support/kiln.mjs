import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { KILN_ENTITIES } from '../../dist/app.entities.js';
import { createApp } from '../../dist/app.factory.js';
import { TenancyService } from '../../dist/auth/tenancy.service.js';
import { TokenService } from '../../dist/auth/token.service.js';
import { createLogger } from '../../dist/common/logger.js';
import { loadConfig } from '../../dist/config/config.js';
import { createDataSource, runMigrations } from '../../dist/database/data-source.js';
import { EmbeddedPostgres } from '../../dist/database/embedded-postgres.js';
import { ProjectsService } from '../../dist/projects/projects.service.js';
import { BuildRunner } from '../../dist/runners/build-runner.js';
import { PREFIX, removeLeftoversOfKilledRuns, ROOT, untilNoClients } from './leftovers.mjs';

const DATABASE = 'kiln_bench';

/**
 * Runs nothing: benches append logs through LogSink themselves, end builds via BuildLifecycle, or
 * admit and end them as rows.
 */
export class BenchRunner extends BuildRunner {
  start() {
    return Promise.resolve();
  }
  cancel() {
    return Promise.resolve();
  }
  remove() {
    return Promise.resolve();
  }
}

/**
 * kiln's real HTTP server on 127.0.0.1 (random port) on a fresh embedded PostgreSQL in /dev/shm,
 * with one tenant, one admin and one project, and a token for that admin. `runner: 'configured'`
 * keeps the runner KILN_RUNNER selects (the local runner) instead of the no-op bench runner.
 */
export async function startKiln(env = {}, { runner = 'bench' } = {}) {
  await removeLeftoversOfKilledRuns();
  const dir = await mkdtemp(`${ROOT}/${PREFIX}${process.pid}-`);
  const logger = createLogger('warn');
  const closers = [() => rm(dir, { recursive: true, force: true })];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer().catch(() => undefined);
  };
  try {
    const postgres = await EmbeddedPostgres.open({
      dataDir: `${dir}/data`,
      logger,
      ephemeral: true,
    });
    closers.push(async () => {
      await untilNoClients(postgres.url('postgres'));
      await postgres.stop();
    });
    await postgres.ensureDatabase(DATABASE);
    const url = postgres.url(DATABASE);

    const config = loadConfig(
      {
        DATABASE_URL: url,
        KILN_DATA_DIR: `${dir}/kiln`,
        KILN_JWT_SECRET: randomBytes(32).toString('hex'),
        KILN_RUNNER: 'local',
        KILN_LOG_LEVEL: 'warn',
        KILN_RATE_LIMIT_READS: '1000000',
        KILN_RATE_LIMIT_WRITES: '1000000',
        ...env,
      },
      dir,
    );
    const dataSource = createDataSource({ url, logger, entities: KILN_ENTITIES });
    await dataSource.initialize();
    closers.push(() => dataSource.destroy());
    await runMigrations(dataSource, logger);

    const app = await createApp(config, dataSource, logger, {
      runner: runner === 'bench' ? BenchRunner : undefined,
    });
    await app.listen(0, '127.0.0.1');
    closers.push(() => app.close());
    const { port } = app.getHttpServer().address();

    const tenancy = app.get(TenancyService);
    const tenant = await tenancy.createTenant('bench');
    const user = await tenancy.createUser('bench@example.com', randomBytes(16).toString('hex'));
    await tenancy.addMember(tenant.id, user.email, 'admin');
    const project = await app
      .get(ProjectsService)
      .create(tenant.id, 'bench', 'https://git.example.com/bench/app.git');
    const { access_token: token } = await app.get(TokenService).issue(user.id);

    const baseUrl = `http://127.0.0.1:${port}`;
    const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenant.id };
    let branch = 0;
    return {
      app,
      baseUrl,
      databaseUrl: url,
      headers,
      projectId: project.id,
      dataSource,
      /** Creates and starts a build over the API; returns its id. */
      async runningBuild() {
        const created = await request(baseUrl, headers, 'POST', '/builds', {
          project_id: project.id,
          git_branch: `bench-${branch++}`,
        });
        await request(baseUrl, headers, 'POST', `/builds/${created.id}/start`);
        return created.id;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** One /api/v1 call; its JSON answer (undefined when empty), or an error naming the status. */
export async function request(baseUrl, headers, method, path, body) {
  const response = await fetch(`${baseUrl}/api/v1${path}`, {
    method,
    headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} gave ${response.status}: ${text}`);
  return text === '' ? undefined : JSON.parse(text);
}
