import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import type { KilnConfig } from '../config/config.js';
import { createDataSource, type EntityClass, runMigrations } from './data-source.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

const EMBEDDED_DATABASE = 'kiln';

/** The database kiln runs on: a migrated DataSource and, without DATABASE_URL, the embedded server. */
export interface Database {
  readonly dataSource: DataSource;
  readonly embedded: EmbeddedPostgres | undefined;
  /** Names of the migrations this start applied. */
  readonly applied: readonly string[];
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** The entities to map: the caller's, as database/ imports no feature (KILN_ENTITIES). */
  readonly entities: ReadonlyArray<EntityClass>;
  /** How long to wait for a database that is not up yet. */
  readonly connectTimeoutMs?: number;
  /** Tracing is on: each query of a request or reconcile is a span (query-tracing.ts). */
  readonly traceQueries?: boolean;
}

/**
 * Connects to DATABASE_URL, or starts (or adopts) the embedded PostgreSQL under KILN_DATA_DIR,
 * then applies pending migrations. Waits up to `connectTimeoutMs` (60 s) for a database that is
 * not up yet.
 */
export async function openDatabase(
  config: Pick<KilnConfig, 'databaseUrl' | 'dataDir'>,
  logger: Logger,
  options: OpenDatabaseOptions,
): Promise<Database> {
  const { entities, connectTimeoutMs = 60_000, traceQueries } = options;
  let embedded: EmbeddedPostgres | undefined;
  let url = config.databaseUrl;
  if (url === undefined) {
    embedded = await EmbeddedPostgres.open({ dataDir: config.dataDir, logger });
    await embedded.ensureDatabase(EMBEDDED_DATABASE);
    url = embedded.url(EMBEDDED_DATABASE);
  } else {
    logger.info({ host: safeHost(url) }, 'using the database from DATABASE_URL');
  }
  const dataSource = createDataSource({ url, logger, entities, traceQueries });
  let applied: string[];
  try {
    await initializeWithRetry(dataSource, logger, connectTimeoutMs);
    applied = await runMigrations(dataSource, logger);
  } catch (error) {
    if (dataSource.isInitialized) await dataSource.destroy();
    await embedded?.stop();
    throw error;
  }
  return {
    dataSource,
    embedded,
    applied,
    async close() {
      if (dataSource.isInitialized) await dataSource.destroy();
      await embedded?.stop();
    },
  };
}

async function initializeWithRetry(dataSource: DataSource, logger: Logger, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await dataSource.initialize();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      logger.warn({ err: error, attempt }, 'database not reachable yet; retrying');
      await new Promise((done) => setTimeout(done, Math.min(500 * attempt, 5_000)));
    }
  }
}

function safeHost(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return '(unparseable)';
  }
}
