// kiln for bench/logscale.bench.mjs: one embedded PostgreSQL on DISK (the log table at scale is
// larger than /dev/shm should hold, and /dev/shm is RAM) with two databases, and one kiln per
// database, each set up as bench/support/kiln.mjs sets up its own (one tenant, admin, project).
import 'reflect-metadata';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, statfs } from 'node:fs/promises';
import { promisify } from 'node:util';
import { KILN_ENTITIES } from '../../dist/app.entities.js';
import { createApp } from '../../dist/app.factory.js';
import { TenancyService } from '../../dist/auth/tenancy.service.js';
import { TokenService } from '../../dist/auth/token.service.js';
import { createLogger } from '../../dist/common/logger.js';
import { loadConfig } from '../../dist/config/config.js';
import { createDataSource, runMigrations } from '../../dist/database/data-source.js';
import { EmbeddedPostgres } from '../../dist/database/embedded-postgres.js';
import { ProjectsService } from '../../dist/projects/projects.service.js';
import { BenchRunner, request } from './kiln.mjs';
import { removeLeftoversOfKilledRuns, untilNoClients } from './leftovers.mjs';

const PREFIX = 'kiln-logscale-';
/**
 * passport keeps one strategy per name for the whole process: the last kiln started verifies
 * every kiln's tokens, so all the kilns of this process share one signing secret.
 */
const JWT_SECRET = randomBytes(32).toString('hex');
/** statfs f_type of tmpfs: memory, not disk. */
const TMPFS_MAGIC = 0x01021994;

/**
 * Throws unless `root` is on a disk (not tmpfs) with at least `factor` × `estimatedBytes` free;
 * returns the free bytes.
 */
export async function checkDisk(root, estimatedBytes, factor) {
  const fs = await statfs(root);
  const free = fs.bavail * fs.bsize;
  const gb = (n) => `${(n / 1e9).toFixed(1)} GB`;
  if (fs.type === TMPFS_MAGIC)
    throw new Error(`${root} is tmpfs (RAM): set LOGSCALE_DIR to a directory on disk`);
  if (free < factor * estimatedBytes)
    throw new Error(
      `${root} has ${gb(free)} free; this size needs about ${gb(estimatedBytes)}, and the bench ` +
        `wants ${factor}× that (${gb(factor * estimatedBytes)}): free space, lower LOGSCALE_LINES, ` +
        `or set LOGSCALE_DIR to a larger disk`,
    );
  return free;
}

/** Bytes under `dir` (du: the cluster belongs to another account when kiln runs as root). */
export async function diskUsage(dir) {
  const { stdout } = await promisify(execFile)('du', ['-sb', dir]);
  return Number(stdout.split('\t')[0]);
}

/**
 * A fresh embedded PostgreSQL (fsync off: nothing here is kept) in a new directory under `root`,
 * after removing what killed runs left there. close() stops it and deletes the directory, once
 * however often it is called; close(true), for SIGINT, does not wait for clients to leave first
 * (the server's fast shutdown ends the queries in flight).
 */
export async function startDiskPostgres(root) {
  await removeLeftoversOfKilledRuns(root, PREFIX);
  const dir = await mkdtemp(`${root}/${PREFIX}${process.pid}-`);
  let closed;
  const removeDir = () => rm(dir, { recursive: true, force: true });
  try {
    const postgres = await EmbeddedPostgres.open({
      dataDir: `${dir}/data`,
      logger: createLogger('warn'),
      ephemeral: true,
    });
    return {
      dir,
      postgres,
      close: (interrupted = false) =>
        (closed ??= (async () => {
          if (!interrupted) await untilNoClients(postgres.url('postgres')).catch(() => undefined);
          await postgres.stop().catch(() => undefined);
          await removeDir();
        })()),
    };
  } catch (error) {
    await removeDir();
    throw error;
  }
}

/**
 * kiln's real HTTP server (127.0.0.1, random port) on database `database` of `postgres`, migrated,
 * with one tenant, one admin and one project, and that admin's token. `env` adds settings.
 */
export async function startKilnOn(postgres, database, dir, env = {}) {
  const logger = createLogger('warn');
  const closers = [];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer().catch(() => undefined);
  };
  try {
    await postgres.ensureDatabase(database);
    const url = postgres.url(database);
    const config = loadConfig(
      {
        DATABASE_URL: url,
        KILN_DATA_DIR: `${dir}/kiln-${database}`,
        KILN_JWT_SECRET: JWT_SECRET,
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
    const app = await createApp(config, dataSource, logger, { runner: BenchRunner });
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
    const tokens = app.get(TokenService);
    const { access_token: token } = await tokens.issue(user.id);

    const baseUrl = `http://127.0.0.1:${port}`;
    const headers = { authorization: `Bearer ${token}`, 'x-tenant-id': tenant.id };
    // The fill outlasts an access token: a fresh one every 5 minutes, in the object every
    // caller holds (the client process gets a copy with each call).
    const renewal = setInterval(() => {
      tokens.issue(user.id).then(
        ({ access_token: fresh }) => (headers.authorization = `Bearer ${fresh}`),
        () => undefined,
      );
    }, 5 * 60_000);
    renewal.unref();
    closers.push(async () => clearInterval(renewal));
    const call = (method, path, body) => request(baseUrl, headers, method, path, body);
    let branch = 0;
    return {
      app,
      baseUrl,
      databaseUrl: url,
      headers,
      request: call,
      /** Creates and starts a build over the API; returns its id. */
      async runningBuild() {
        const created = await call('POST', '/builds', {
          project_id: project.id,
          git_branch: `bench-${branch++}`,
        });
        await call('POST', `/builds/${created.id}/start`);
        return created.id;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
