import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { AppModule, type AppOptions, composesApi } from './app.module.js';
import { JWT_SECRET } from './auth/jwt.constants.js';
import { AuditRecorder } from './audit-http/audit-recorder.js';
import { answerClientErrors } from './common/client-error.js';
import { serveOpenApi } from './common/openapi-files.js';
import { serveConsole } from './console-host/serve-console.js';
import { HttpErrorFilter } from './common/http-error.filter.js';
import { jsonBodyOptions } from './common/json-body.js';
import { NestPinoLogger } from './common/logger.js';
import { requestContextMiddleware } from './common/request-id.middleware.js';
import { refuseUnstorableText } from './common/text-safety.js';
import { createValidationPipe } from './common/validation.js';
import type { KilnConfig } from './config/config.js';
import { LogSink } from './logs/log-sink.js';
import { httpMetrics, metricsHandler } from './metrics/http-metrics.js';
import { Metrics } from './metrics/metrics.js';
import { httpTracing } from './tracing/http-tracing.js';

/** Builds the Nest application (not yet listening). main.ts and the tests both start it this way. */
export async function createApp(
  config: KilnConfig,
  dataSource: DataSource,
  logger: Logger,
  options: AppOptions = {},
): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(
    AppModule.forRoot(config, dataSource, logger, options),
    {
      bodyParser: false,
      logger: new NestPinoLogger(logger.child({ component: 'nest' })),
      abortOnError: false,
    },
  );
  app.disable('x-powered-by');
  app.set('trust proxy', config.trustProxyHops);
  const metrics = app.get(Metrics);
  app.use(httpMetrics(metrics));
  if (config.metrics.port === undefined) app.use(metricsHandler(metrics));
  app.use(requestContextMiddleware(logger));
  if (config.tracing.otlpEndpoint !== undefined) app.use(httpTracing());
  // Ahead of the body parser and the rate limit, so calls they refuse are audited too.
  if (composesApi(config.role)) app.use(app.get(AuditRecorder).middleware);
  answerClientErrors(app.getHttpServer(), logger);
  app.useBodyParser('json', jsonBodyOptions(config.maxBodyBytes));
  app.use(refuseUnstorableText);
  app.useGlobalFilters(new HttpErrorFilter(logger));
  app.useGlobalPipes(createValidationPipe());
  // LogSink registers the database secrets itself, in every role (the log store is core). The JWT
  // secret exists where auth is composed and may be generated at start: hand it over before any
  // build runs.
  if (composesApi(config.role)) {
    app.get(LogSink).registerProcessSecrets({ 'JWT signing secret': app.get<string>(JWT_SECRET) });
    serveOpenApi(app, options.openApiDir);
    serveConsole(app);
  }
  return app;
}
