// Issue 16 item 6: build_log_lines at scale (100 million lines across 10,000 builds by default).
// Append rate, page p99 at the end of the largest log and whole-build deletes, each beside a
// baseline measured in the same run on a small table of the same server. Goals are reported,
// never asserted: a missed goal prints MISSED and the exit status stays 0.
//
//   node bench/logscale.bench.mjs       (after `make build`; LOGSCALE_LINES, LOGSCALE_BUILDS,
//                                        LOGSCALE_DIR change the size and where the cluster goes)
import { cpus, tmpdir } from 'node:os';
import pg from 'pg';
import { LogSink } from '../dist/logs/log-sink.js';
import { startClients } from './support/client-process.mjs';
import { purged } from './support/purge.mjs';
import { averageBytes, makeLines } from './support/log-lines.mjs';
import { createBuilds, fill, planSizes } from './support/logscale-fill.mjs';
import { checkDisk, diskUsage, startDiskPostgres, startKilnOn } from './support/logscale-kiln.mjs';
import { delay, int, latencySummary, ms, nowMs, ratio, verdict, paced } from './support/stats.mjs';

const LINES = positiveInteger('LOGSCALE_LINES', 100_000_000);
const BUILDS = positiveInteger('LOGSCALE_BUILDS', 10_000);
const ROOT = process.env.LOGSCALE_DIR ?? tmpdir();

/** The stored logs: 20 builds writing at a time, 500-line appends, one build with 2% of it all. */
const SHAPE = { largestShare: 0.02, targetShare: 0.01, lanes: 20, batch: 500 };
/** Every 10th fill round is repeated into the small table, the fill's baseline. */
const PROBE_EVERY = 10;
const APPEND = { batchLines: 500, roundLines: 100_000, rounds: 3, warmupBatches: 20 };
const PAGE = { limit: 1000, samples: 300, warmup: 30 };
const RETENTION = {
  typical: 100,
  quietSeconds: 10,
  intervalMs: 20,
  appendLines: 100,
  stallMs: 100,
  lockSampleMs: 20,
};
/** LogPurger's settings (kiln's defaults unless LOGSCALE_PURGE_BATCH / _PAUSE_MS say otherwise). */
const PURGE = {
  batchLines: positiveInteger('LOGSCALE_PURGE_BATCH', 5000),
  pauseMs: positiveInteger('LOGSCALE_PURGE_PAUSE_MS', 50),
};
/**
 * Disk per stored line (238 B in the table at 10 million lines, plus the small database's copy
 * of the largest and deleted builds, ~3%) and for the WAL (max_wal_size, 1 GB): see
 * docs/adr/0024-log-table-scale.md. The bench refuses to start without 1.5× the estimate free.
 */
const DISK_BYTES_PER_LINE = 250;
const DISK_WAL_BYTES = 1e9;
const DISK_FACTOR = 1.5;

/** The statement BuildLogsRepository.linesFrom uses. */
const RAW_PAGE = `SELECT seq, ts, level, message, metadata FROM build_log_lines
  WHERE build_id = $1 AND seq >= $2 ORDER BY seq LIMIT ${PAGE.limit}`;

function positiveInteger(name, fallback) {
  const text = process.env[name];
  if (text === undefined) return fallback;
  const value = Number(text.replaceAll('_', ''));
  if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name}=${text}: not a count`);
  return value;
}

const gb = (bytes) => `${(bytes / 1e9).toFixed(2)} GB`;
const seconds = (millis) => (millis < 1000 ? ms(millis) : `${(millis / 1000).toFixed(1)} s`);

/**
 * Stores the builds and lines at scale, each tenth beside the same rounds into the small database
 * (empty again afterwards), then VACUUM ANALYZE and CHECKPOINT (a table that has lived a while).
 * Returns what the other sections need: the largest build, the append target, the builds to
 * delete and the one to read during the deletes.
 */
async function fillScale(kilns, raws, sizes) {
  const ids = await createBuilds(raws.scale, await kilns.scale.runningBuild(), BUILDS);
  const probe = {
    client: raws.small,
    ids: await createBuilds(raws.small, await kilns.small.runningBuild(), SHAPE.lanes),
    every: PROBE_EVERY,
  };
  const result = await fill(raws.scale, { ids, sizes, ...SHAPE, label: 'fill', probe });
  const vacuum = await timed(() => raws.scale.query('VACUUM ANALYZE build_log_lines'));
  await raws.scale.query('CHECKPOINT');
  const size = await tableSize(raws.scale);
  const { rows } = await raws.scale.query(
    'SELECT (sum(bytes) / sum(lines))::float AS bytes FROM build_logs',
  );

  const goal = 0.8;
  const [first, last] = [result.tenths[0], result.tenths.at(-1)];
  const r = last.rate / last.probeRate;
  console.log(
    `fill, last tenth (${int(0.9 * LINES)}–${int(LINES)} lines stored): ${int(last.rate)} lines/s | ` +
      `the same rounds into a small table meanwhile ${int(last.probeRate)} lines/s | ratio ` +
      `${ratio(r)} (goal >= ${goal}: ${verdict(r >= goal)})`,
  );
  console.log(
    `  first tenth ${int(first.rate)} vs ${int(first.probeRate)} lines/s (ratio ` +
      `${ratio(first.rate / first.probeRate)}); ${int(result.lines)} lines in ` +
      `${seconds(result.seconds * 1000)} (${int(result.lines / result.seconds)}/s with the probes), ` +
      `${gb(size.total)} stored; ${int(BUILDS)} builds: the largest ${int(sizes[0])} lines, the ` +
      `append target ${int(sizes[1])}, the rest ${int(Math.min(...sizes.slice(2)))}–` +
      `${int(Math.max(...sizes.slice(2)))} (mean ${int(sizes.slice(2).reduce((a, b) => a + b, 0) / (BUILDS - 2))})`,
  );
  console.log(
    `  ${SHAPE.lanes} builds written at a time, ${SHAPE.batch} lines a build a round, one ` +
      `INSERT … SELECT generate_series with the build_logs counters per round, ~${Math.round(rows[0].bytes)} B ` +
      `messages; rates over the statements' own time; the small table gets one round every ` +
      `${PROBE_EVERY} and is emptied each tenth; then VACUUM ANALYZE ${seconds(vacuum)}`,
  );

  // Typical builds only: neither the largest nor the append target is read or deleted here.
  const step = Math.floor((BUILDS - 3) / RETENTION.typical);
  const deletes = Array.from({ length: RETENTION.typical }, (_, k) => 3 + k * step);
  return {
    sizes,
    largest: { id: ids[0], lines: sizes[0] },
    target: ids[1],
    reader: { id: ids[2], lines: sizes[2] },
    deletes: deletes.map((i) => ({ id: ids[i], lines: sizes[i] })),
  };
}

/**
 * The small table: the same largest log, builds to delete and build to read as at scale, and
 * nothing else, written the same way.
 */
async function fillSmall(kiln, raw, scale) {
  const sizes = [scale.largest.lines, ...scale.deletes.map((d) => d.lines), scale.reader.lines];
  const template = await kiln.runningBuild();
  const ids = await createBuilds(raw, template, sizes.length);
  await fill(raw, { ids, sizes, ...SHAPE, label: 'small fill' });
  await raw.query('VACUUM ANALYZE build_log_lines');
  await raw.query('CHECKPOINT');
  return {
    largest: { id: ids[0], lines: sizes[0] },
    deletes: ids.slice(1, -1).map((id, k) => ({ id, lines: sizes[k + 1] })),
    reader: { id: ids.at(-1), lines: sizes.at(-1) },
  };
}

/**
 * LogSink.append in batches of 500 into the large append target and into a new build at scale,
 * and into a new build of the still empty small database: rounds interleave the three, as
 * bench/logs.bench.mjs's ingest does, so drift in machine load touches each alike.
 */
async function append(scaleKiln, smallKiln, raw, scale) {
  const started = nowMs();
  const total = APPEND.rounds * APPEND.roundLines;
  const texts = makeLines(total, { seed: 7 });
  const batches = [];
  for (let i = 0; i < texts.length; i += APPEND.batchLines)
    batches.push(texts.slice(i, i + APPEND.batchLines).map((text) => ({ text })));
  const sinks = { scale: scaleKiln.app.get(LogSink), small: smallKiln.app.get(LogSink) };
  const newBuild = await scaleKiln.runningBuild();
  const emptyBuild = await smallKiln.runningBuild();
  const variants = {
    empty: (batch) => sinks.small.append(emptyBuild, batch),
    large: (batch) => sinks.scale.append(scale.target, batch),
    new: (batch) => sinks.scale.append(newBuild, batch),
  };
  const elapsed = { empty: 0, large: 0, new: 0 };
  for (const run of Object.values(variants)) {
    for (const batch of batches.slice(0, APPEND.warmupBatches)) await run(batch);
  }
  const perRound = APPEND.roundLines / APPEND.batchLines;
  for (let round = 0; round < APPEND.rounds; round++) {
    const slice = batches.slice(round * perRound, (round + 1) * perRound);
    for (const [name, run] of Object.entries(variants)) {
      const begin = nowMs();
      for (const batch of slice) await run(batch);
      elapsed[name] += nowMs() - begin;
    }
  }
  const added = total + APPEND.warmupBatches * APPEND.batchLines;
  const { rows } = await raw.query(
    'SELECT build_id, lines FROM build_logs WHERE build_id = ANY($1::uuid[])',
    [[scale.target, newBuild]],
  );
  const lines = Object.fromEntries(rows.map((row) => [row.build_id, row.lines]));
  if (lines[newBuild] !== added || lines[scale.target] !== scale.sizes[1] + added)
    throw new Error(`appends stored ${JSON.stringify(lines)}; expected ${added} more each`);

  const rate = (name) => total / (elapsed[name] / 1000);
  const goal = 0.8;
  for (const [name, label] of [
    ['large', `append into a ${int(scale.sizes[1])}-line log`],
    ['new', 'append into a new build'],
  ]) {
    const r = rate(name) / rate('empty');
    console.log(
      `${label} at scale: ${int(rate(name))} lines/s | empty table ${int(rate('empty'))} lines/s | ` +
        `ratio ${ratio(r)} (goal >= ${goal}: ${verdict(r >= goal)})`,
    );
  }
  console.log(
    `  LogSink.append, ${int(total)} lines per figure in batches of ${APPEND.batchLines}, ` +
      `${Math.round(averageBytes(texts))} B average, rounds interleaved; the empty table is a ` +
      `second database of the same server (${int(added)} lines in it by the end); ` +
      `${Math.round((nowMs() - started) / 1000)} s`,
  );
  return added;
}

/** The last page of the largest log at scale (kiln and raw) and of the same log in the small table. */
async function page(targets, clients) {
  const started = nowMs();
  const { scale, small } = await clients.call('endPages', {
    targets: Object.entries(targets).map(([name, { kiln, largest }]) => ({
      name,
      baseUrl: kiln.baseUrl,
      headers: kiln.headers,
      databaseUrl: kiln.databaseUrl,
      buildId: largest.id,
      offset: largest.lines - PAGE.limit,
    })),
    limit: PAGE.limit,
    sql: RAW_PAGE,
    samples: PAGE.samples,
    warmup: PAGE.warmup,
  });
  const limit = 2 * scale.raw.p99 + 5;
  const rawRatio = scale.raw.p99 / small.raw.p99;
  console.log(
    `page at the end of the largest log at scale: kiln p50 ${ms(scale.kiln.p50)} p99 ${ms(scale.kiln.p99)} | ` +
      `raw SQL p50 ${ms(scale.raw.p50)} p99 ${ms(scale.raw.p99)} | ratio p99 ${ratio(scale.kiln.p99 / scale.raw.p99)} ` +
      `(goal p99 <= 2x raw + 5 ms = ${ms(limit)}: ${verdict(scale.kiln.p99 <= limit)})`,
  );
  console.log(
    `page, at scale vs the small table: raw p99 ${ms(scale.raw.p99)} vs ${ms(small.raw.p99)}, ratio ` +
      `${ratio(rawRatio)}; kiln p99 ${ms(scale.kiln.p99)} vs ${ms(small.kiln.p99)}, ratio ` +
      `${ratio(scale.kiln.p99 / small.kiln.p99)} (goal: none set)`,
  );
  console.log(
    `  offset ${int(targets.scale.largest.lines - PAGE.limit)} of ${int(targets.scale.largest.lines)} lines, ` +
      `limit ${PAGE.limit}, ${PAGE.samples} samples each after ${PAGE.warmup} (the page is hot in ` +
      `the caches), the four kinds of read in rotating order, from the client process; kiln = GET …/logs over HTTP to the last byte; ` +
      `raw = the repository's SELECT on one pg connection; ${Math.round((nowMs() - started) / 1000)} s`,
  );
}

/** Heap, indexes and lines of build_log_lines (lines from the build_logs counters). */
async function tableSize(raw) {
  const { rows } = await raw.query(
    `SELECT pg_relation_size('build_log_lines') AS heap,
            pg_indexes_size('build_log_lines') AS indexes,
            pg_total_relation_size('build_log_lines') AS total,
            (SELECT coalesce(sum(lines), 0) FROM build_logs) AS lines`,
  );
  const row = rows[0];
  return {
    heap: Number(row.heap),
    indexes: Number(row.indexes),
    total: Number(row.total),
    lines: Number(row.lines),
  };
}

function printSizes(scale, small) {
  const per = (s, key) => s[key] / s.lines;
  const r = per(scale, 'total') / per(small, 'total');
  console.log(
    `size at scale: ${gb(scale.total)} for ${int(scale.lines)} lines (heap ${gb(scale.heap)}, ` +
      `primary key ${gb(scale.indexes)}), ${Math.round(per(scale, 'total'))} B a line ` +
      `(heap ${Math.round(per(scale, 'heap'))}, key ${Math.round(per(scale, 'indexes'))}) | small ` +
      `table ${Math.round(per(small, 'total'))} B a line (${int(small.lines)} lines) | ratio ` +
      `${ratio(r)} (goal: none set)`,
  );
}

/**
 * Samples every lock a delete holds (of a build, or a purge batch of its lines) and every lock
 * anyone waits for, until stopped.
 */
function lockSampler(url) {
  const held = new Set();
  const indexes = new Set();
  const waits = new Map();
  let samples = 0;
  let during = 0;
  let stop = false;
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  const done = (async () => {
    await client.connect();
    while (!stop) {
      const { rows } = await client.query(
        `SELECT a.query ILIKE 'DELETE FROM build%' AS deleting, l.locktype, l.mode, l.granted,
                c.relname, c.relkind, left(a.query, 60) AS query,
                extract(epoch FROM clock_timestamp() - l.waitstart) * 1000 AS waited
           FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           LEFT JOIN pg_class c ON c.oid = l.relation
          WHERE l.pid <> pg_backend_pid() AND a.datname = current_database()
            AND (NOT l.granted OR (a.state = 'active' AND a.query ILIKE 'DELETE FROM build%'))`,
      );
      samples++;
      if (rows.some((row) => row.deleting)) during++;
      for (const row of rows) {
        if (!row.granted) {
          const key = `${row.relname ?? row.locktype} ${row.mode} (${row.query})`;
          waits.set(key, Math.max(waits.get(key) ?? 0, Number(row.waited ?? 0)));
        } else if (row.relkind === 'i') indexes.add(row.relname);
        else held.add(`${row.relname ?? row.locktype} ${row.mode}`);
      }
      await delay(RETENTION.lockSampleMs);
    }
    await client.end();
  })();
  return {
    async stop() {
      stop = true;
      await done;
      return { held, indexes, waits, samples, during };
    },
  };
}

/**
 * Deletes the typical builds, then the largest, over kiln's API (DELETE /builds/{id}: the build
 * row at once, its lines afterwards by LogPurger, KILN_LOG_PURGE_BATCH_LINES a transaction) and
 * waits until the purge is done, while LogSink appends to another build and a client pages
 * through a third; the appender and the reader run alone first for their baseline. Then VACUUM,
 * at once: autovacuum would get to the small table first.
 */
async function retention(kiln, raw, clients, { largest, deletes, reader }) {
  const sink = kiln.app.get(LogSink);
  const appendTo = await kiln.runningBuild();
  const lines = makeLines(RETENTION.appendLines, { seed: 5 }).map((text) => ({ text }));
  await clients.call('startReader', {
    baseUrl: kiln.baseUrl,
    headers: kiln.headers,
    buildId: reader.id,
    lines: reader.lines,
    limit: PAGE.limit,
    intervalMs: RETENTION.intervalMs,
  });
  const appender = paced(() => sink.append(appendTo, lines), RETENTION.intervalMs);
  const quietFrom = nowMs();
  await delay(RETENTION.quietSeconds * 1000);

  const sampler = lockSampler(kiln.databaseUrl);
  const from = nowMs();
  const typical = [];
  for (const build of deletes)
    typical.push(await timed(() => kiln.request('DELETE', `/builds/${build.id}`)));
  const largestMs = await timed(() => kiln.request('DELETE', `/builds/${largest.id}`));
  const deleted = nowMs();
  const ids = [largest.id, ...deletes.map((d) => d.id)];
  await purged(raw, ids);
  const to = nowMs();
  const locks = await sampler.stop();
  const appends = await appender.stop();
  const reads = await clients.call('stopReader');

  const { rows } = await raw.query(
    `SELECT (SELECT count(*)::int FROM builds WHERE id = ANY($1::uuid[])) AS builds,
            (SELECT count(*)::int FROM build_log_lines WHERE build_id = ANY($1::uuid[])) AS lines`,
    [ids],
  );
  if (rows[0].builds !== 0 || rows[0].lines !== 0)
    throw new Error(
      `${rows[0].builds} deleted builds and ${rows[0].lines} of their lines are left`,
    );
  const vacuumMs = await timed(() => raw.query('VACUUM build_log_lines'));

  const window = (calls) => {
    const quiet = calls.filter(([begin, took]) => begin >= quietFrom && begin + took < from);
    const during = calls.filter(([begin, took]) => begin < to && begin + took > from);
    return {
      quiet: latencySummary(quiet.map(([, took]) => took)),
      during: latencySummary(during.map(([, took]) => took)),
      stalls: during.filter(([, took]) => took > RETENTION.stallMs).length,
    };
  };
  return {
    typical: latencySummary(typical),
    typicalLines: deletes.reduce((a, d) => a + d.lines, 0),
    largestMs,
    deleteMs: deleted - from,
    purgeMs: to - deleted,
    totalMs: to - from,
    vacuumMs,
    appender: window(appends),
    reader: window(reads),
    locks,
  };
}

function printRetention(scale, small, largestLines) {
  const t = scale.typical;
  const deletedLines = scale.typicalLines + largestLines;
  console.log(
    `retention at scale: DELETE /builds/{id} of ${RETENTION.typical} builds of typical size p50 ` +
      `${ms(t.p50)} max ${ms(t.max)}, of the largest (${int(largestLines)} lines) ` +
      `${ms(scale.largestMs)} | small table p50 ${ms(small.typical.p50)} max ` +
      `${ms(small.typical.max)}, the largest ${ms(small.largestMs)} | ratio largest ` +
      `${ratio(scale.largestMs / small.largestMs)}, typical p50 ${ratio(t.p50 / small.typical.p50)} ` +
      `(goal: none set)`,
  );
  console.log(
    `purge of their ${int(deletedLines)} lines at scale: ${seconds(scale.purgeMs)} after the last ` +
      `DELETE (${int(deletedLines / ((scale.deleteMs + scale.purgeMs) / 1000))} lines/s from the ` +
      `first) | small table ${seconds(small.purgeMs)} | ratio ${ratio(scale.purgeMs / small.purgeMs)} ` +
      `(goal: none set; it runs behind, in batches)`,
  );
  for (const [name, label] of [
    [
      'appender',
      `appender (LogSink.append, ${RETENTION.appendLines} lines every ${RETENTION.intervalMs} ms, another build)`,
    ],
    [
      'reader',
      `reader (GET …/logs, ${PAGE.limit} lines every ${RETENTION.intervalMs} ms, another build)`,
    ],
  ]) {
    for (const [where, run] of [
      ['at scale', scale],
      ['small table', small],
    ]) {
      const w = run[name];
      console.log(
        `  ${label}, ${where}: longest call during the deletes and purge ${ms(w.during.max)} vs p99 without ` +
          `${ms(w.quiet.p99)} (max ${ms(w.quiet.max)}) | ratio ${ratio(w.during.max / w.quiet.p99)} (goal no stall > ` +
          `${RETENTION.stallMs} ms: ${verdict(w.stalls === 0)}; ${w.stalls} of ${w.during.count} calls over it)`,
      );
    }
  }
  const { held, indexes, waits, samples, during } = scale.locks;
  const heldText = [...held].join(', ');
  const waitText =
    waits.size === 0
      ? 'none'
      : [...waits].map(([what, waited]) => `${what} up to ${ms(waited)}`).join('; ');
  console.log(
    `  locks at scale (pg_locks every ${RETENTION.lockSampleMs} ms, ${samples} samples, ${during} ` +
      `during a delete or purge batch): they held ${heldText || 'nothing sampled'} and ${indexes.size} ` +
      `indexes; lock waits seen: ${waitText}`,
  );
  console.log(
    `  deletes one at a time over HTTP, ${int(scale.typicalLines)} typical lines in all, then the ` +
      `largest, then the purge (KILN_LOG_PURGE_BATCH_LINES ${PURGE.batchLines}, pause ` +
      `${PURGE.pauseMs} ms or the batch's own time); ${seconds(scale.totalMs)} at scale, ` +
      `${seconds(small.totalMs)} on the small table; ` +
      `baselines: each call's p99 in the ${RETENTION.quietSeconds} s before the deletes`,
  );
}

/** VACUUM of build_log_lines right after the same deletes, at scale vs the small table. */
function printVacuum(scale, small, deletedLines, after) {
  console.log(
    `vacuum after the deletes at scale: ${seconds(scale.vacuumMs)} | small table ` +
      `${seconds(small.vacuumMs)} | ratio ${ratio(scale.vacuumMs / small.vacuumMs)} (goal: none set)`,
  );
  console.log(
    `  ${int(deletedLines)} deleted lines in each; VACUUM (not FULL) makes the space reusable and ` +
      `returns none: at scale ${gb(after.total)} for ${int(after.lines)} lines after it`,
  );
}

/** Refuses a size whose sections could not run: the builds read need a full page each. */
function checkShape(sizes) {
  if (BUILDS < RETENTION.typical + 3)
    throw new Error(`LOGSCALE_BUILDS must be at least ${RETENTION.typical + 3}`);
  const smallest = Math.min(...sizes.slice(2));
  if (smallest < PAGE.limit)
    throw new Error(
      `the smallest build would hold ${smallest} lines, fewer than a page (${PAGE.limit}): ` +
        `LOGSCALE_LINES must be about ${int(2.2 * PAGE.limit)} × LOGSCALE_BUILDS or more`,
    );
}

async function timed(work) {
  const begin = nowMs();
  await work();
  return nowMs() - begin;
}

async function main() {
  const started = nowMs();
  const sizes = planSizes(LINES, BUILDS, SHAPE);
  checkShape(sizes);
  const estimate = LINES * DISK_BYTES_PER_LINE + DISK_WAL_BYTES;
  const free = await checkDisk(ROOT, estimate, DISK_FACTOR);
  const server = await startDiskPostgres(ROOT);
  const env = {
    KILN_LOG_MAX_BYTES_PER_BUILD: String(10 * 1024 ** 3),
    KILN_LOG_PURGE_BATCH_LINES: String(PURGE.batchLines),
    KILN_LOG_PURGE_PAUSE_MS: String(PURGE.pauseMs),
    KILN_LOG_PURGE_POLL_SECONDS: '1',
  };
  const kilns = {};
  const raws = {};
  const clients = startClients(new URL('./support/logscale-clients.mjs', import.meta.url));
  let cleaned;
  const cleanup = (interrupted) =>
    (cleaned ??= (async () => {
      if (interrupted) await server.close(true);
      clients.close();
      for (const raw of Object.values(raws)) await raw.end().catch(() => undefined);
      for (const kiln of Object.values(kilns)) await kiln.close();
      await server.close();
    })());
  process.once('SIGINT', () => {
    void cleanup(true).finally(() => process.exit(130));
  });
  try {
    for (const [name, database] of [
      ['scale', 'kiln_logscale'],
      ['small', 'kiln_logscale_small'],
    ]) {
      kilns[name] = await startKilnOn(server.postgres, database, server.dir, env);
      raws[name] = new pg.Client({ connectionString: kilns[name].databaseUrl });
      raws[name].on('error', () => undefined);
      await raws[name].connect();
    }
    const { rows } = await raws.scale.query(
      `SELECT current_setting('server_version') AS version, current_setting('shared_buffers') AS buffers`,
    );
    console.log(
      `bench/logscale: ${int(LINES)} lines across ${int(BUILDS)} builds; kiln from dist/, embedded ` +
        `PostgreSQL ${rows[0].version} (shared_buffers ${rows[0].buffers}, fsync off) on disk in ` +
        `${server.dir} (${gb(free)} free, ~${gb(estimate)} expected), node ${process.version}, ` +
        `${cpus().length} CPUs; goals are reported, not asserted`,
    );

    const scale = await fillScale(kilns, raws, sizes);
    await append(kilns.scale, kilns.small, raws.scale, scale);
    const small = await fillSmall(kilns.small, raws.small, scale);
    await page(
      {
        scale: { kiln: kilns.scale, largest: scale.largest },
        small: { kiln: kilns.small, largest: small.largest },
      },
      clients,
    );
    printSizes(await tableSize(raws.scale), await tableSize(raws.small));
    const smallRun = await retention(kilns.small, raws.small, clients, small);
    const scaleRun = await retention(kilns.scale, raws.scale, clients, scale);
    printRetention(scaleRun, smallRun, scale.largest.lines);
    printVacuum(
      scaleRun,
      smallRun,
      scaleRun.typicalLines + scale.largest.lines,
      await tableSize(raws.scale),
    );
    const used = await diskUsage(server.dir);
    console.log(
      `disk: ${gb(used)} in the cluster directory at the end (${Math.round(used / LINES)} B per line ` +
        `filled; both databases and the WAL); ${Math.round((nowMs() - started) / 1000)} s in all`,
    );
  } finally {
    await cleanup(false);
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
