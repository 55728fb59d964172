import { Injectable, type OnModuleDestroy, type OnModuleInit, Optional } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { Metrics } from '../metrics/metrics.js';

/** The counts node-postgres keeps on its pool (pg.Pool). */
interface PgPoolCounts {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

/**
 * kiln_db_pool_connections, read from the pg pool behind TypeORM at each scrape: connections in
 * use (checked out), idle, and callers waiting for one. This process's pool only.
 */
@Injectable()
export class PoolMetrics implements OnModuleInit, OnModuleDestroy {
  private unregister: (() => void) | undefined;

  constructor(
    private readonly dataSource: DataSource,
    /** kiln-admin's commands compose the database without metrics. */
    @Optional() private readonly metrics?: Metrics,
  ) {}

  onModuleInit(): void {
    this.unregister = this.metrics?.collectWith('kiln_db_pool_connections', (set) => {
      const pool = poolOf(this.dataSource);
      if (pool !== undefined) {
        set({ state: 'in_use' }, Math.max(0, pool.totalCount - pool.idleCount));
        set({ state: 'idle' }, pool.idleCount);
        set({ state: 'waiting' }, pool.waitingCount);
      }
      return Promise.resolve();
    });
  }

  onModuleDestroy(): void {
    this.unregister?.();
    this.unregister = undefined;
  }
}

/** The pg.Pool of TypeORM's Postgres driver (`master`), once the DataSource is initialised. */
function poolOf(dataSource: DataSource): PgPoolCounts | undefined {
  if (!dataSource.isInitialized) return undefined;
  const pool = (dataSource.driver as { master?: Partial<PgPoolCounts> }).master;
  return typeof pool?.totalCount === 'number' &&
    typeof pool.idleCount === 'number' &&
    typeof pool.waitingCount === 'number'
    ? (pool as PgPoolCounts)
    : undefined;
}
