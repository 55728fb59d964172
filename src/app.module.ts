import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { RouterModule } from '@nestjs/core';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { ArtifactsHttpModule } from './artifacts-http/artifacts-http.module.js';
import { AuditHttpModule } from './audit-http/audit-http.module.js';
import { AuthModule } from './auth/auth.module.js';
import { BuildsModule } from './builds/builds.module.js';
import { LOGGER } from './common/logger.js';
import { KilnConfig, type Role } from './config/config.js';
import { DatabaseModule } from './database/database.module.js';
import { HealthModule } from './health/health.module.js';
import { LifecycleModule } from './lifecycle/lifecycle.module.js';
import { LogStreamModule } from './log-stream/log-stream.module.js';
import { LogsModule } from './logs/logs.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { ProjectsModule } from './projects/projects.module.js';
import { RetentionModule } from './retention/retention.module.js';
import type { BuildRunner } from './runners/build-runner.js';
import { SecretsModule } from './secrets/secrets.module.js';
import { SettingsHttpModule } from './settings-http/settings-http.module.js';
import { RunnersModule } from './runners/runners.module.js';
import { TriggersModule } from './triggers/triggers.module.js';
import { ProvenanceHttpModule } from './provenance-http/provenance-http.module.js';

/** Path prefix of every API route (docs/api.md). Health probes live outside it. */
export const API_PREFIX = 'api/v1';

/**
 * The modules of the HTTP API, each mounted under /api/v1. AuthModule also counts every /api/v1
 * request against the rate limits (ApiRateLimitMiddleware), unknown routes included.
 */
export const API_MODULES: ReadonlyArray<Type> = [
  AuthModule,
  ProjectsModule,
  BuildsModule,
  LogStreamModule,
  ArtifactsHttpModule,
  SettingsHttpModule,
  RetentionModule,
  AuditHttpModule,
  TriggersModule,
  ProvenanceHttpModule,
];

export interface AppOptions {
  /** Modules mounted under /api/v1 besides kiln's own (tests use this for probe routes). */
  readonly extraApiModules?: ReadonlyArray<Type>;
  /** The BuildRunner class to bind instead of the one KILN_RUNNER selects. */
  readonly runner?: Type<BuildRunner>;
  /**
   * Where the OpenAPI document and its UI were generated (src/app.openapi.ts), when not dist/:
   * tests run from src/ and generate theirs once per run (test/support/global-setup.ts).
   */
  readonly openApiDir?: string;
}

/** Whether a role serves the HTTP API: its routes, the log WebSocket and the OpenAPI document. */
export function composesApi(role: Role): boolean {
  return role === 'api' || role === 'all';
}

/** Whether a role runs the operator. */
export function composesOperator(role: Role): boolean {
  return role === 'operator' || role === 'all';
}

/**
 * What every role runs: the database, metrics, the build lifecycle, the log store and the health probes
 * (config and logger are AppModule's own providers).
 */
export function coreModules(dataSource: DataSource): Array<Type | DynamicModule> {
  return [
    DatabaseModule.forDataSource(dataSource),
    MetricsModule,
    SecretsModule,
    LifecycleModule,
    LogsModule,
    HealthModule,
  ];
}

/**
 * The HTTP API under /api/v1, and the BuildRunner port its BuildsService starts and cancels builds
 * through. The runner is bound here, with the API, and only the one KILN_RUNNER picks: the local
 * runner executes a build as child processes of the very process whose API started it; the
 * Kubernetes runner is the API side of the Kubernetes path (it writes Build resources), whose
 * other side is the operator's reconcile loop in operatorModules().
 */
export function apiModules(
  config: KilnConfig,
  options: AppOptions,
): Array<Type | DynamicModule | Promise<DynamicModule>> {
  const routed = [...API_MODULES, ...(options.extraApiModules ?? [])];
  return [
    ...routed,
    RouterModule.register(routed.map((module) => ({ path: API_PREFIX, module }))),
    RunnersModule.forRoot(config, options.runner),
  ];
}

/**
 * The operator: no HTTP route and no runner (it reconciles the Build resources the API writes).
 * Imported when a role composes it and a cluster was found, never before: it brings
 * @kubernetes/client-node, which an api role with the local runner, and an all role without a
 * cluster (a laptop's `make run`), do not load (docs/adr/0051-api-role-memory.md). Without a
 * cluster the operator is IdleOperatorModule, which says the loop is not running.
 */
export async function operatorModules(config: KilnConfig): Promise<Type[]> {
  if (config.kube.kind === 'none') {
    const { IdleOperatorModule } = await import('./operator/operator-idle.module.js');
    return [IdleOperatorModule];
  }
  const { OperatorModule } = await import('./operator/operator.module.js');
  return [OperatorModule];
}

/**
 * The application for one KILN_ROLE: api = core + api, operator = core + operator, all = all three.
 * Asynchronous: the parts a role does not compose are never imported (operatorModules,
 * RunnersModule.forRoot).
 */
@Module({})
export class AppModule {
  static async forRoot(
    config: KilnConfig,
    dataSource: DataSource,
    logger: Logger,
    options: AppOptions = {},
  ): Promise<DynamicModule> {
    return {
      module: AppModule,
      global: true,
      imports: [
        ...coreModules(dataSource),
        ...(composesApi(config.role) ? apiModules(config, options) : []),
        ...(composesOperator(config.role) ? await operatorModules(config) : []),
      ],
      providers: [
        { provide: KilnConfig, useValue: config },
        { provide: LOGGER, useValue: logger },
      ],
      exports: [KilnConfig, LOGGER],
    };
  }
}
