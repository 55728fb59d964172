import type { Logger } from 'pino';
import { DataSource, type MigrationInterface } from 'typeorm';
import { MIGRATIONS } from './migrations/index.js';
import { hearingMigrationNotes } from './migrations/notes.js';
import { TracedClient } from './query-tracing.js';

/** A TypeORM entity class. */
export type EntityClass = new () => object;

export interface DataSourceOptions {
  readonly url: string;
  readonly logger: Logger;
  /**
   * The entities to map. database/ imports no feature: each feature exports its own list and the
   * composition root passes them all (src/app.entities.ts, KILN_ENTITIES).
   */
  readonly entities: ReadonlyArray<EntityClass>;
  readonly poolSize?: number;
  readonly migrations?: ReadonlyArray<new () => MigrationInterface>;
  /** Tracing is on: each query of a request or reconcile is a span (query-tracing.ts). */
  readonly traceQueries?: boolean;
}

export const MIGRATIONS_TABLE = 'kiln_migrations';

/** The one TypeORM DataSource: no synchronize, explicit migrations, a pool that survives restarts. */
export function createDataSource(options: DataSourceOptions): DataSource {
  const { url, logger } = options;
  return new DataSource({
    type: 'postgres',
    url,
    entities: [...options.entities],
    migrations: [...(options.migrations ?? MIGRATIONS)],
    migrationsTableName: MIGRATIONS_TABLE,
    synchronize: false,
    migrationsRun: false,
    // An idle client whose server went away emits 'error' on the pool; log it, never crash.
    poolErrorHandler: (error: unknown) =>
      logger.warn({ err: error }, 'database connection lost; the pool will reconnect'),
    connectTimeoutMS: 5_000,
    extra: {
      max: options.poolSize ?? 10,
      idleTimeoutMillis: 30_000,
      ...(options.traceQueries === true ? { Client: TracedClient } : {}),
    },
  });
}

/**
 * Runs pending migrations under a Postgres advisory lock, so replicas starting together migrate
 * once. Returns the names of the migrations it applied.
 */
export async function runMigrations(dataSource: DataSource, logger: Logger): Promise<string[]> {
  const lock = dataSource.createQueryRunner();
  await lock.connect();
  try {
    await lock.query(`SELECT pg_advisory_lock(hashtext($1))`, [MIGRATIONS_TABLE]);
    const applied = await hearingMigrationNotes(
      (fields, message) => logger.warn(fields, message),
      () => dataSource.runMigrations({ transaction: 'each' }),
    );
    const names = applied.map((m) => m.name);
    if (names.length > 0) logger.info({ migrations: names }, 'applied database migrations');
    return names;
  } finally {
    await lock
      .query(`SELECT pg_advisory_unlock(hashtext($1))`, [MIGRATIONS_TABLE])
      .catch(() => undefined);
    await lock.release();
  }
}
