import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { LOGGER } from './common/logger.js';
import { KilnConfig } from './config/config.js';
import { AuthModule } from './auth/auth.module.js';
import { DatabaseModule } from './database/database.module.js';
import { ProjectsModule } from './projects/projects.module.js';
import { HealthModule } from './health/health.module.js';

/** Path prefix of every API route (spec section 9). Health probes live outside it. */
export const API_PREFIX = 'api/v1';

/** The modules serving /api/v1, for KILN_ROLE api and all. Feature issues add theirs. */
const API_MODULES: ReadonlyArray<Type> = [AuthModule, ProjectsModule];

/** The application for one KILN_ROLE: health for every role, the API and operator by role. */
@Module({})
export class AppModule {
  static forRoot(
    config: KilnConfig,
    dataSource: DataSource,
    logger: Logger,
    extraApiModules: ReadonlyArray<Type> = [],
  ): DynamicModule {
    const apiModules = config.role === 'operator' ? [] : [...API_MODULES, ...extraApiModules];
    return {
      module: AppModule,
      global: true,
      imports: [
        DatabaseModule.forDataSource(dataSource),
        HealthModule,
        ...apiModules,
        RouterModule.register(apiModules.map((module) => ({ path: API_PREFIX, module }))),
      ],
      providers: [
        { provide: KilnConfig, useValue: config },
        { provide: LOGGER, useValue: logger },
      ],
      exports: [KilnConfig, LOGGER],
    };
  }
}
