// make bench → retention: finished builds holding 1,000,000 log lines in all are deleted by a
// retention pass (KILN_RETENTION_BATCH_BUILDS builds a transaction, their lines through LogPurger)
// while LogSink appends to another build and a client pages through a third over HTTP, as
// bench/logscale.bench.mjs measures its deletes. The appender's and the reader's calls during the
// pass and the purge are set beside the same calls in the same run without retention (baseline).
// Goals are reported, never asserted: a missed goal prints MISSED and the exit status stays 0.
// RETENTION_LINES and RETENTION_BUILDS set the size.
import { cpus } from 'node:os';
import pg from 'pg';
import { BuildLifecycle } from '../dist/lifecycle/build-lifecycle.js';
import { LogSink } from '../dist/logs/log-sink.js';
import { Retention } from '../dist/retention/retention.service.js';
import { startClients } from './support/client-process.mjs';
import { purged } from './support/purge.mjs';
import { startKiln } from './support/kiln.mjs';
import { makeLines } from './support/log-lines.mjs';
import {
  delay,
  int,
  latencySummary,
  ms,
  nowMs,
  ratio,
  seconds,
  verdict,
  paced,
} from './support/stats.mjs';

const LINES = Number(process.env.RETENTION_LINES ?? 1_000_000);
const BUILDS = Number(process.env.RETENTION_BUILDS ?? 200);
const READER_LINES = 20_000;
const CALLS = { appendLines: 100, pageLimit: 1000, intervalMs: 20 };
const BASELINE_SECONDS = 20;
const STALL_MS = 100;
const FILL_BATCH = 50_000;
const ENV = {
  // A pass runs when the bench says so: the schedule's interval is a week.
  KILN_RETENTION_DAYS: '30',
  KILN_RETENTION_INTERVAL_SECONDS: '604800',
  KILN_RETENTION_BATCH_BUILDS: '100',
  KILN_LOG_PURGE_BATCH_LINES: '5000',
  KILN_LOG_PURGE_PAUSE_MS: '50',
  KILN_LOG_PURGE_POLL_SECONDS: '1',
};

/**
 * BUILDS finished builds that ended 40 days ago, LINES lines between them, written server-side
 * (generate_series) with their counters: what retention deletes. Messages are ~90 B of builder
 * output, as in bench/logscale.bench.mjs.
 */
async function fillDoomed(kiln, raw) {
  const lifecycle = kiln.app.get(BuildLifecycle);
  const ids = [];
  for (let n = 0; n < BUILDS; n++) {
    const id = await kiln.runningBuild();
    await lifecycle.succeed(id);
    ids.push(id);
  }
  await raw.query(
    `UPDATE builds SET completed_at = now() - interval '40 days',
                       started_at = now() - interval '40 days' WHERE id = ANY($1::uuid[])`,
    [ids],
  );
  const per = Math.floor(LINES / BUILDS);
  const started = nowMs();
  for (const [index, id] of ids.entries()) {
    const lines = index === ids.length - 1 ? LINES - per * (ids.length - 1) : per;
    for (let from = 0; from < lines; from += FILL_BATCH) {
      await raw.query(
        `INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
         SELECT $1, g, now() - interval '40 days', 'INFO',
                'STEP ' || g || '/' || $3::int || ': RUN npm ci --omit=dev && node scripts/build.mjs --target=production',
                NULL
           FROM generate_series($2::int, LEAST($2::int + ${FILL_BATCH}, $3::int) - 1) g`,
        [id, from, lines],
      );
    }
    await raw.query(
      `INSERT INTO build_logs (build_id, lines, bytes) VALUES ($1, $2, $2 * 90)
       ON CONFLICT (build_id) DO UPDATE SET lines = EXCLUDED.lines, bytes = EXCLUDED.bytes`,
      [id, lines],
    );
  }
  return { ids, fillMs: nowMs() - started };
}

async function linesOf(raw, ids) {
  const { rows } = await raw.query(
    `SELECT (SELECT count(*)::int FROM builds WHERE id = ANY($1::uuid[])) AS builds,
            (SELECT count(*)::int FROM build_log_lines WHERE build_id = ANY($1::uuid[])) AS lines`,
    [ids],
  );
  return rows[0];
}

/** Samples pg_locks every 20 ms until stopped: the lock waits of anyone in the database. */
function lockWaits(url) {
  const waits = new Map();
  let samples = 0;
  let stop = false;
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  const done = (async () => {
    await client.connect();
    while (!stop) {
      const { rows } = await client.query(
        `SELECT coalesce(c.relname, l.locktype) AS what, l.mode, left(a.query, 60) AS query,
                extract(epoch FROM clock_timestamp() - l.waitstart) * 1000 AS waited
           FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           LEFT JOIN pg_class c ON c.oid = l.relation
          WHERE NOT l.granted AND l.pid <> pg_backend_pid() AND a.datname = current_database()`,
      );
      samples++;
      for (const row of rows) {
        const key = `${row.what} ${row.mode} (${row.query})`;
        waits.set(key, Math.max(waits.get(key) ?? 0, Number(row.waited ?? 0)));
      }
      await delay(20);
    }
    await client.end();
  })();
  return {
    async stop() {
      stop = true;
      await done;
      return { waits, samples };
    },
  };
}

function window(calls, from, to) {
  const inside = calls.filter(([begin, took]) => begin < to && begin + took > from);
  return {
    ...latencySummary(inside.map(([, took]) => took)),
    stalls: inside.filter(([, took]) => took > STALL_MS).length,
  };
}

function print(name, label, baseline, during) {
  console.log(
    `  ${label}: with retention p50 ${ms(during.p50)} p99 ${ms(during.p99)} max ${ms(during.max)} ` +
      `(${int(during.count)} calls) | without (baseline, same run) p50 ${ms(baseline.p50)} p99 ` +
      `${ms(baseline.p99)} max ${ms(baseline.max)} (${int(baseline.count)} calls) | ratio p50 ` +
      `${ratio(during.p50 / baseline.p50)} p99 ${ratio(during.p99 / baseline.p99)} max ` +
      `${ratio(during.max / baseline.max)} (goal: no ${name} over ${STALL_MS} ms: ` +
      `${verdict(during.stalls === 0)}; ${during.stalls} of ${int(during.count)} over it, ` +
      `${baseline.stalls} without retention)`,
  );
}

async function main() {
  const started = nowMs();
  const kiln = await startKiln(ENV);
  const raw = new pg.Client({ connectionString: kiln.databaseUrl });
  raw.on('error', () => undefined);
  await raw.connect();
  const clients = startClients(new URL('./support/logscale-clients.mjs', import.meta.url));
  try {
    const { rows } = await raw.query(
      `SELECT current_setting('server_version') AS version, current_setting('shared_buffers') AS buffers`,
    );
    console.log(
      `bench/retention: ${int(LINES)} lines in ${int(BUILDS)} finished builds retained away; kiln ` +
        `from dist/, embedded PostgreSQL ${rows[0].version} (shared_buffers ${rows[0].buffers}) ` +
        `in /dev/shm, node ${process.version}, ${cpus().length} CPUs; goals are reported, not asserted`,
    );
    const sink = kiln.app.get(LogSink);
    const reader = await kiln.runningBuild();
    const readerLines = makeLines(READER_LINES, { seed: 3 }).map((text) => ({ text }));
    for (let i = 0; i < readerLines.length; i += 1000)
      await sink.append(reader, readerLines.slice(i, i + 1000));
    const { ids, fillMs } = await fillDoomed(kiln, raw);
    const filled = await linesOf(raw, ids);
    console.log(
      `fill: ${int(filled.lines)} lines in ${int(filled.builds)} builds that ended 40 days ago ` +
        `(KILN_RETENTION_DAYS 30) in ${seconds(fillMs)}; a reader build of ${int(READER_LINES)} lines`,
    );
    await raw.query('VACUUM ANALYZE');

    const appendTo = await kiln.runningBuild();
    const lines = makeLines(CALLS.appendLines, { seed: 5 }).map((text) => ({ text }));
    await clients.call('startReader', {
      baseUrl: kiln.baseUrl,
      headers: kiln.headers,
      buildId: reader,
      lines: READER_LINES,
      limit: CALLS.pageLimit,
      intervalMs: CALLS.intervalMs,
    });
    const appender = paced(() => sink.append(appendTo, lines), CALLS.intervalMs);
    const quietFrom = nowMs();
    await delay(BASELINE_SECONDS * 1000);

    const sampler = lockWaits(kiln.databaseUrl);
    const from = nowMs();
    const report = await kiln.app.get(Retention).runPass();
    const passed = nowMs();
    await purged(raw, ids);
    const to = nowMs();
    const locks = await sampler.stop();
    const appends = await appender.stop();
    const reads = await clients.call('stopReader');

    const left = await linesOf(raw, ids);
    if (left.builds !== 0 || left.lines !== 0)
      throw new Error(`${left.builds} builds and ${left.lines} of their lines are left`);
    console.log(
      `retention pass: ${int(report.deleted)} builds deleted (age ${report.byRule.age}, count ` +
        `${report.byRule.count}) in ${report.batches} transactions of at most 100 in ` +
        `${seconds(passed - from)}; their ${int(filled.lines)} lines purged ${seconds(to - passed)} ` +
        `later (${int(filled.lines / ((to - from) / 1000))} lines/s from the pass's start)`,
    );
    print(
      'append',
      `appender (LogSink.append, ${CALLS.appendLines} lines every ${CALLS.intervalMs} ms, another build)`,
      window(appends, quietFrom, from),
      window(appends, from, to),
    );
    print(
      'page',
      `reader (GET …/logs, ${CALLS.pageLimit} lines every ${CALLS.intervalMs} ms, another build, over HTTP from another process)`,
      window(reads, quietFrom, from),
      window(reads, from, to),
    );
    const waitText =
      locks.waits.size === 0
        ? 'none'
        : [...locks.waits].map(([what, waited]) => `${what} up to ${ms(waited)}`).join('; ');
    console.log(
      `  lock waits during the pass and the purge (pg_locks every 20 ms, ${locks.samples} samples): ${waitText}`,
    );
    console.log(
      `  baseline: the same calls in the ${BASELINE_SECONDS} s before the pass; ` +
        `${seconds(nowMs() - started)} in all`,
    );
  } finally {
    clients.close();
    await raw.end().catch(() => undefined);
    await kiln.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
