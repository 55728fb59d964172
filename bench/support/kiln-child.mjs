// The kiln process of bench/operator.bench.mjs, forked with an IPC channel. It starts kiln from
// dist/ as dist/main.js does (loadConfig from the environment, openDatabase, createApp, listen;
// KILN_ROLE as the bench sets it) and answers the bench: its memory, and when each
// reconcile started. The one addition to kiln is that record: OperatorRuntime calls
// `options.reconcile(key, signal)` for every reconcile it counts, and this wraps that function to
// note the start time (CLOCK_MONOTONIC ms, the clock every process on the machine shares).
import 'reflect-metadata';
import { KILN_ENTITIES } from '../../dist/app.entities.js';
import { createApp } from '../../dist/app.factory.js';
import { createLogger } from '../../dist/common/logger.js';
import { loadConfig } from '../../dist/config/config.js';
import { openDatabase } from '../../dist/database/database.js';
import { BuildOperator } from '../../dist/operator/build-operator.js';

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

// The bench is gone (killed): so is its kiln.
process.on('disconnect', () => process.exit(1));

const config = loadConfig();
const logger = createLogger(config.logLevel);
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
const database = await openDatabase(config, logger, { entities: KILN_ENTITIES });
const app = await createApp(config, database.dataSource, logger);
await app.init();

/** key → start times (ms) of its reconciles. */
const starts = new Map();
// KILN_ROLE=api runs no operator: nothing to record.
const runtime = config.role === 'api' ? undefined : app.get(BuildOperator).operatorRuntime;
if (config.role !== 'api') {
  if (runtime === undefined) throw new Error('the operator is not running (no kubeconfig?)');
  const reconcile = runtime.options.reconcile;
  runtime.options.reconcile = (key, signal) => {
    let times = starts.get(key);
    if (times === undefined) starts.set(key, (times = []));
    times.push(nowMs());
    return reconcile(key, signal);
  };
}

await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address();

let stopping;
const stop = () =>
  (stopping ??= (async () => {
    // As dist/main.js: past the shutdown timeout + 5 s, exit 1 whatever is still running.
    const force = setTimeout(() => process.exit(1), config.shutdownTimeoutMs + 5_000);
    force.unref();
    await app.close();
    await database.close();
    process.exit(0);
  })());
process.on('SIGTERM', () => void stop());

const commands = {
  memory: () => process.memoryUsage(),
  /** Memory after two full collections (only with --expose-gc). */
  collected: () => {
    globalThis.gc?.();
    globalThis.gc?.();
    return { ...process.memoryUsage(), collected: globalThis.gc !== undefined };
  },
  operator: () => ({
    leading: runtime?.isLeader ?? false,
    running: runtime?.isRunning ?? false,
    queued: runtime?.queue?.length ?? null,
    inFlight: runtime?.queue?.inFlight ?? null,
    delayed: runtime?.queue?.delayedCount ?? null,
    reconciles: [...starts.values()].reduce((n, times) => n + times.length, 0),
  }),
  /** Reconcile start times of the keys asked for (all when none is). */
  reconciles: ({ keys } = {}) =>
    Object.fromEntries((keys ?? [...starts.keys()]).map((key) => [key, starts.get(key) ?? []])),
  stop: () => {
    void stop();
    return true;
  },
};

process.on('message', ({ id, command, args }) => {
  Promise.resolve()
    .then(() => commands[command](args))
    .then(
      (result) => process.send({ id, result }),
      (error) => process.send({ id, error: String(error?.stack ?? error) }),
    );
});

process.send({ ready: true, port });
