// The kiln process of bench/operator.bench.mjs, forked with an IPC channel. It starts kiln from
// dist/ as dist/main.js does (loadConfig from the environment, openDatabase, createApp, listen;
// KILN_ROLE as the bench sets it) and answers the bench: its memory, and when each
// reconcile started. The one addition to kiln is that record: OperatorRuntime calls
// `options.reconcile(key, signal)` for every reconcile it counts, and this wraps that function to
// note the start time (CLOCK_MONOTONIC ms, the clock every process on the machine shares).
import 'reflect-metadata';
import { writeHeapSnapshot } from 'node:v8';
import { KILN_ENTITIES } from '../../dist/app.entities.js';
import { createApp } from '../../dist/app.factory.js';
import { createLogger } from '../../dist/common/logger.js';
import { loadConfig } from '../../dist/config/config.js';
import { openDatabase } from '../../dist/database/database.js';
import { PodLogs } from '../../dist/kubernetes/pod-logs.js';
import { LogSink } from '../../dist/logs/log-sink.js';
import { BuildLogsRepository } from '../../dist/logs/build-logs.repository.js';
import { BuildOperator } from '../../dist/operator/build-operator.js';
import { LogDrains } from '../../dist/operator/builds/log-drain.js';
import { answerCommands } from './commands.mjs';

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

/**
 * build id → when (ms) its follower started (the first LogDrains.follow with a pod) and each of
 * the follower's reads before a stream opens began and ended (its log claim, each container's
 * cursor): the timestamps bench/first-line.bench.mjs breaks the follower's start into.
 */
const followerMarks = new Map();
const markOf = (buildId) => {
  let marks = followerMarks.get(buildId);
  if (marks === undefined) followerMarks.set(buildId, (marks = {}));
  return marks;
};
const timed = (prototype, method, nameOf) => {
  const original = prototype[method];
  prototype[method] = async function (buildId, ...args) {
    const name = nameOf(...args);
    const marks = markOf(buildId);
    const start = nowMs();
    try {
      return await original.call(this, buildId, ...args);
    } finally {
      marks[name] ??= [start, nowMs()];
    }
  };
};
timed(BuildLogsRepository.prototype, 'claimFollower', () => 'claim');
timed(BuildLogsRepository.prototype, 'containerCursors', (containers) =>
  containers.length === 1 ? `cursor ${containers[0]}` : 'cursors',
);
const follow = LogDrains.prototype.follow;
const stateOf = (statuses, name) => (statuses ?? []).find((s) => s.name === name)?.state ?? {};
LogDrains.prototype.follow = function (key, record, namespace, pod) {
  if (pod !== undefined) {
    const marks = markOf(record.id);
    marks.followed ??= nowMs();
    // When kiln first heard (a pod event or a reconcile) that the source container ended and
    // that the builder runs: the follower opens a container's stream only once it has.
    if (stateOf(pod.status?.initContainerStatuses, 'source').terminated !== undefined)
      marks.sourceEndHeard ??= nowMs();
    const build = stateOf(pod.status?.containerStatuses, 'build');
    if (build.running !== undefined || build.terminated !== undefined)
      marks.buildRunningHeard ??= nowMs();
  }
  return follow.call(this, key, record, namespace, pod);
};

// The bench is gone (killed): so is its kiln.
process.on('disconnect', () => process.exit(1));

/**
 * The way of a traced build's lines through kiln (the bench's `traceLogs`): for each kubelet
 * timestamp (ms, the key the WebSocket clients also read), when kiln's follower first read a
 * line of it from the pod's log stream and when LogSink's append of it was answered (stored).
 * Wall-clock ms, as the double stamps lines. Two wrappers, only on the traced builds' lines.
 */
const traced = new Map();
const wallMs = () => performance.timeOrigin + performance.now();
function traceOf(podOrBuild) {
  for (const [id, trace] of traced)
    if (podOrBuild.startsWith(`kiln-${id}`) || podOrBuild === id) return trace;
  return undefined;
}
const stream = PodLogs.prototype.stream;
PodLogs.prototype.stream = function (ref, options, onText, signal) {
  const trace = ref.container === 'build' ? traceOf(ref.pod) : undefined;
  if (trace === undefined) return stream.call(this, ref, options, onText, signal);
  let partial = '';
  return stream.call(
    this,
    ref,
    options,
    (text) => {
      const at = wallMs();
      const parts = (partial + text).split('\n');
      partial = parts.pop() ?? '';
      for (const raw of parts) {
        // `2026-11-28T15:00:00.123456789Z text`: kiln keeps the milliseconds.
        const key = Date.parse(`${raw.slice(0, 23)}Z`);
        if (!Number.isNaN(key) && !trace.read.has(key)) trace.read.set(key, at);
      }
      return onText(text);
    },
    signal,
  );
};

const config = loadConfig();
const logger = createLogger(config.logLevel);
process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled rejection'));
const database = await openDatabase(config, logger, { entities: KILN_ENTITIES });
const app = await createApp(config, database.dataSource, logger);
await app.init();

/** key → start times (ms) of its reconciles. */
const starts = new Map();
/** key → [start, end] (ms) of its reconciles, for benches that look at each one's length. */
const spans = new Map();
// KILN_ROLE=api runs no operator: nothing to record.
const runtime = config.role === 'api' ? undefined : app.get(BuildOperator).operatorRuntime;
if (config.role !== 'api') {
  if (runtime === undefined) throw new Error('the operator is not running (no kubeconfig?)');
  const reconcile = runtime.options.reconcile;
  runtime.options.reconcile = (key, signal) => {
    let times = starts.get(key);
    if (times === undefined) starts.set(key, (times = []));
    const start = nowMs();
    times.push(start);
    let keySpans = spans.get(key);
    if (keySpans === undefined) spans.set(key, (keySpans = []));
    const span = [start, NaN];
    keySpans.push(span);
    return Promise.resolve(reconcile(key, signal)).finally(() => (span[1] = nowMs()));
  };
}

if (config.role !== 'api') {
  const sink = app.get(LogSink);
  const append = sink.append.bind(sink);
  sink.append = (buildId, lines) => {
    const result = append(buildId, lines);
    const trace = traced.get(buildId);
    if (trace !== undefined && lines.length > 0) {
      void result.then(
        () => {
          const at = wallMs();
          for (const line of lines) {
            if (line.container !== 'build' || line.ts === undefined) continue;
            const key = line.ts.getTime();
            if (!trace.stored.has(key)) trace.stored.set(key, at);
          }
        },
        () => undefined,
      );
    }
    return result;
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
  /** A heap snapshot (.heapsnapshot, for Chrome's memory panel) written to `path`. */
  heapSnapshot: ({ path }) => writeHeapSnapshot(path),
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
  /** Starts tracing these builds' lines (see `traced`). */
  traceLogs: ({ buildIds }) => {
    for (const id of buildIds) traced.set(id, { read: new Map(), stored: new Map() });
    return traced.size;
  },
  /** Per traced build: [kubelet ms, read at, stored at] of each timestamp seen. */
  tracedLogs: () =>
    Object.fromEntries(
      [...traced].map(([id, trace]) => [
        id,
        [...trace.read].map(([key, read]) => [key, read, trace.stored.get(key) ?? null]),
      ]),
    ),
  /** The log append groups LogSink sent (a private field, read for the bench's report). */
  ingest: () => app.get(LogSink).groups?.sent ?? null,
  /** The follower's marks of the builds asked for (followerMarks). */
  followerMarks: ({ ids }) =>
    Object.fromEntries(ids.map((id) => [id, followerMarks.get(id) ?? {}])),
  /** [start, end] of each reconcile of the keys asked for. */
  reconcileSpans: ({ keys }) => Object.fromEntries(keys.map((key) => [key, spans.get(key) ?? []])),
  stop: () => {
    void stop();
    return true;
  },
};

answerCommands(commands);

process.send({ ready: true, port });
