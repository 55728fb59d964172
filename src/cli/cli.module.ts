import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { TenancyModule } from '../auth/tenancy.module.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { DatabaseModule } from '../database/database.module.js';

/** The services kiln-admin drives, without HTTP: users (the first administrator, emergency access). */
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
      ],
      exports: [KilnConfig, LOGGER],
    };
  }
}
