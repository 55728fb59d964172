import {
  Global,
  Inject,
  Module,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import { KilnConfig } from '../config/config.js';
import { Metrics } from './metrics.js';
import { LOGGER } from '../common/logger.js';

/**
 * /metrics on its own port (KILN_METRICS_PORT): a plain HTTP server that answers nothing else,
 * so the chart can leave it out of the Service the Ingress routes to. Without the variable the
 * main port serves /metrics (app.factory.ts).
 */
export class MetricsServer implements OnApplicationBootstrap, OnModuleDestroy {
  private server: Server | undefined;

  constructor(
    private readonly config: KilnConfig,
    private readonly metrics: Metrics,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const port = this.config.metrics.port;
    if (port === undefined) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is here\n');
        return;
      }
      this.metrics.render().then(
        ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
        (error: unknown) => {
          this.logger.error({ err: error }, 'metrics: rendering failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics failed\n');
        },
      );
    });
    await new Promise<void>((listening, failed) => {
      server.once('error', failed);
      server.listen(port, this.config.host, () => listening());
    });
    this.server = server;
    this.logger.info({ port }, 'metrics: serving /metrics on its own port');
  }

  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((closed) => server.close(() => closed()));
  }
}

/** The one metrics registry of the process, for every module (global). */
@Global()
@Module({
  providers: [
    {
      provide: Metrics,
      inject: [KilnConfig],
      useFactory: (config: KilnConfig) =>
        new Metrics({ tenantLabels: config.metrics.tenantLabels }),
    },
    MetricsServer,
  ],
  exports: [Metrics],
})
export class MetricsModule {}
