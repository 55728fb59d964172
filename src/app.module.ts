import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { AuthModule } from './auth/auth.module.js';
import { BuildsModule } from './builds/builds.module.js';
import { LOGGER } from './common/logger.js';
import { KilnConfig } from './config/config.js';
import { DatabaseModule } from './database/database.module.js';
import { HealthModule } from './health/health.module.js';
import { LogStreamModule } from './log-stream/log-stream.module.js';
import { ProjectsModule } from './projects/projects.module.js';
import type { BuildRunner } from './runners/build-runner.js';

/** Path prefix of every API route (spec section 9). Health probes live outside it. */
export const API_PREFIX = 'api/v1';

export interface AppOptions {
  /** Modules mounted under /api/v1 besides kiln's own (tests use this for probe routes). */
  readonly extraApiModules?: ReadonlyArray<Type>;
  /** The BuildRunner class to bind instead of the one KILN_RUNNER selects. */
  readonly runner?: Type<BuildRunner>;
}

/** The application for one KILN_ROLE: health for every role, the API and operator by role. */
@Module({})
export class AppModule {
  static forRoot(
    config: KilnConfig,
    dataSource: DataSource,
    logger: Logger,
    options: AppOptions = {},
  ): DynamicModule {
    const apiModules: Array<Type | DynamicModule> =
      config.role === 'operator'
        ? []
        : [
            AuthModule,
            ProjectsModule,
            BuildsModule.forRoot(options.runner),
            LogStreamModule,
            ...(options.extraApiModules ?? []),
          ];
    return {
      module: AppModule,
      global: true,
      imports: [
        DatabaseModule.forDataSource(dataSource),
        HealthModule,
        ...apiModules,
        RouterModule.register(
          apiModules.map((module) => ({
            path: API_PREFIX,
            module: 'module' in module ? module.module : module,
          })),
        ),
      ],
      providers: [
        { provide: KilnConfig, useValue: config },
        { provide: LOGGER, useValue: logger },
      ],
      exports: [KilnConfig, LOGGER],
    };
  }
}
