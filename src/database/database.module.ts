import { type DynamicModule, Global, Module } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DatabaseHealth } from './database-health.js';
import { Notifications } from './notification-listener.js';
import { PoolMetrics } from './pool-metrics.js';

/** Makes the already-initialised DataSource injectable; its lifetime belongs to whoever opened it. */
@Global()
@Module({})
export class DatabaseModule {
  static forDataSource(dataSource: DataSource): DynamicModule {
    return {
      module: DatabaseModule,
      providers: [
        { provide: DataSource, useValue: dataSource },
        DatabaseHealth,
        Notifications,
        PoolMetrics,
      ],
      exports: [DataSource, DatabaseHealth, Notifications],
    };
  }
}
