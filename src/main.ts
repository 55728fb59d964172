import 'reflect-metadata';
import type { Server } from 'node:http';
import { KILN_ENTITIES } from './app.entities.js';
import { createApp } from './app.factory.js';
import { composesApi } from './app.module.js';
import { createLogger } from './common/logger.js';
import { ConfigError, loadConfig, type KilnConfig } from './config/config.js';
import { openDatabase } from './database/database.js';
import { LogStreamServer } from './log-stream/log-stream.server.js';
import { startTracing } from './tracing/tracing.js';

async function main(): Promise<void> {
  let config: KilnConfig;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  process.on('unhandledRejection', (reason) =>
    logger.error({ err: reason }, 'unhandled rejection'),
  );
  logger.info(
    { role: config.role, runner: config.runner, dataDir: config.dataDir, port: config.port },
    'kiln starting',
  );

  const tracing = await startTracing(config.tracing, config.role, logger);
  const database = await openDatabase(config, logger, {
    entities: KILN_ENTITIES,
    traceQueries: tracing !== undefined,
  });
  const app = await createApp(config, database.dataSource, logger);
  await app.listen(config.port, config.host);
  logger.info({ url: `http://${config.host}:${config.port}` }, 'kiln is ready');

  let shuttingDown = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (shuttingDown) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    shuttingDown = true;
    logger.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
    const force = setTimeout(() => {
      logger.error('shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + 5_000);
    force.unref();
    await closeHttpServer(app.getHttpServer(), config.shutdownTimeoutMs, async () => {
      // Open log streams are upgraded sockets the HTTP server would wait for: close them first.
      const streams = composesApi(config.role) ? app.get(LogStreamServer) : undefined;
      await streams?.closeAll();
    });
    await app.close();
    await database.close();
    await tracing?.shutdown();
    logger.info('kiln stopped');
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, (s) => {
      shutdown(s).catch((error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
    });
  }
}

/** Stops accepting, lets requests in flight finish, then drops whatever is still open. */
function closeHttpServer(
  server: Server,
  timeoutMs: number,
  closeUpgraded: () => Promise<void>,
): Promise<void> {
  return new Promise((done) => {
    // Keep-alive connections turn idle as their last response ends: close each as it does.
    const idleSweep = setInterval(() => server.closeIdleConnections(), 50);
    const timer = setTimeout(() => {
      server.closeAllConnections();
    }, timeoutMs);
    server.close(() => {
      clearInterval(idleSweep);
      clearTimeout(timer);
      done();
    });
    server.closeIdleConnections();
    closeUpgraded().catch(() => undefined);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(
    `kiln failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
