import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { AuditEventsRepository } from '../audit/audit-events.repository.js';
import { AuditLog } from '../audit/audit-log.js';
import { TenancyModule } from '../auth/tenancy.module.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { DatabaseModule } from '../database/database.module.js';

/**
 * The services kiln-admin drives, without HTTP: users (the first administrator, emergency access),
 * and the audit log its actions are recorded in.
 */
@Module({})
export class CliModule {
  static forRoot(config: KilnConfig, dataSource: DataSource, logger: Logger): DynamicModule {
    return {
      module: CliModule,
      global: true,
      imports: [DatabaseModule.forDataSource(dataSource), TenancyModule],
      providers: [
        { provide: KilnConfig, useValue: config },
        { provide: LOGGER, useValue: logger },
        AuditEventsRepository,
        {
          provide: AuditLog,
          inject: [AuditEventsRepository],
          useFactory: (events: AuditEventsRepository) =>
            new AuditLog(events, logger, undefined, { followLoggerLevel: true }),
        },
      ],
      exports: [KilnConfig, LOGGER],
    };
  }
}
