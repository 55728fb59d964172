import type { Type } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { KILN_ENTITIES } from '../../src/app.entities.js';
import { createApp } from '../../src/app.factory.js';
import type { BuildRunner } from '../../src/runners/build-runner.js';
import { type Env, loadConfig } from '../../src/config/config.js';
import { createDataSource } from '../../src/database/data-source.js';
import { startTracing } from '../../src/tracing/tracing.js';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from './auth.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { LogCapture } from './log-capture.js';

export interface TestApp {
  /** http://127.0.0.1:<port>, where the real HTTP server listens. */
  readonly baseUrl: string;
  readonly app: NestExpressApplication;
  readonly dataSource: DataSource;
  readonly logs: LogCapture;
  close(): Promise<void>;
}

/**
 * Starts kiln's real HTTP server on a random port against a fresh database of its own, or against
 * `sharedDatabase` (left in place on close) when a test needs two processes on one database.
 */
export interface TestAppOptions {
  readonly env?: Env;
  /** Probe modules mounted under /api/v1 beside kiln's own. */
  readonly apiModules?: ReadonlyArray<Type>;
  /** A database to use (and leave in place) instead of a fresh one. */
  readonly database?: TestDatabase;
  readonly runner?: Type<BuildRunner>;
}

/** Where test/support/global-setup.ts wrote this run's OpenAPI document and UI. */
export function openApiDirOfThisRun(): string {
  const dir = process.env['KILN_TEST_OPENAPI_DIR'];
  if (dir === undefined) throw new Error('KILN_TEST_OPENAPI_DIR is unset: jest runs global-setup');
  return dir;
}

export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const { env = {}, apiModules: extraApiModules = [], database: sharedDatabase, runner } = options;
  const database: TestDatabase = sharedDatabase ?? (await createTestDatabase());
  const dataDir = mkdtempSync(join(tmpdir(), 'kiln-test-'));
  const config = loadConfig(
    {
      KILN_JWT_SECRET: TEST_JWT_SECRET,
      // The api and operator apps of one test share the key of sealed build secrets.
      KILN_SECRETS_KEY: TEST_SECRETS_KEY,
      // Suites send bursts; the rate-limit suite sets its own small limits.
      KILN_RATE_LIMIT_READS: '1000000',
      KILN_RATE_LIMIT_WRITES: '1000000',
      KILN_RUNNER: 'local',
      ...env,
      DATABASE_URL: database.url,
    },
    dataDir,
  );
  const logs = new LogCapture();
  // As main.ts: the SDK only when OTEL_EXPORTER_OTLP_ENDPOINT is set (test/tracing.spec.ts).
  const tracing = await startTracing(config.tracing, config.role, logs.logger);
  const dataSource = createDataSource({
    url: database.url,
    logger: logs.logger,
    entities: KILN_ENTITIES,
    poolSize: 4,
    traceQueries: tracing !== undefined,
  });
  await dataSource.initialize();
  const app = await createApp(config, dataSource, logs.logger, {
    extraApiModules,
    runner,
    openApiDir: openApiDirOfThisRun(),
  });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    app,
    dataSource,
    logs,
    async close() {
      await app.close();
      if (dataSource.isInitialized) await dataSource.destroy();
      await tracing?.shutdown();
      if (sharedDatabase === undefined) await database.drop();
    },
  };
}
