// make bench → build logs: ingest through LogSink, paged reads over HTTP, live WebSocket latency,
// each beside a baseline measured in the same run. Goals are reported, never asserted: a missed
// goal prints MISSED and the exit status stays 0.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { BuildLifecycle } from '../dist/lifecycle/build-lifecycle.js';
import { LogSink } from '../dist/logs/log-sink.js';
import { SecretMasker } from '../dist/logs/secret-masker.js';
import { selfCpuMs, startClients } from './support/client-process.mjs';
import { request, startKiln } from './support/kiln.mjs';
import { averageBytes, makeLines, makeSecrets } from './support/log-lines.mjs';
import { delay, int, latencySummary, ms, nowMs, ratio, verdict } from './support/stats.mjs';

const INGEST = { batchLines: 500, roundLines: 100_000, rounds: 3, warmupBatches: 20 };
const PAGE = { lines: 1_000_000, limit: 1000, samples: 300, warmup: 30 };
const LIVE = {
  subscribers: 100,
  batchLines: 100,
  intervalMs: 10,
  seconds: 5,
  maxBatches: 500,
  // `frames` (bench/support/frame-reader.mjs) or `ws` (the ws library's client): LIVE_READER.
  reader: process.env.LIVE_READER ?? 'frames',
};

/** The in-process kiln's, given to the api role of `idle` too: one token serves both. */
const JWT_SECRET = randomBytes(32).toString('hex');

const IDLE = {
  builds: 100,
  counts: [1_000, 10_000],
  rssGoalMb: { 1000: 200, 10000: 600 },
  queriesGoal: 5,
  // PostgreSQL flushes an idle backend's counts up to 10 s late (PGSTAT_IDLE_INTERVAL): the
  // burst of creating builds or opening streams must be counted before a window starts.
  settleMs: 16_000,
  windowMs: 10_000,
};

/** The statement BuildLogsRepository.append uses, without the row lock, counters and NOTIFY. */
const RAW_INSERT = `INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
  SELECT $1, $2::int + (t.ord - 1)::int, t.ts, t.level, t.message, t.metadata
    FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::jsonb[]) WITH ORDINALITY
         AS t(ts, level, message, metadata, ord)`;
/** The statement BuildLogsRepository.linesFrom uses. */
const RAW_PAGE = `SELECT seq, ts, level, message, metadata FROM build_log_lines
  WHERE build_id = $1 AND seq >= $2 ORDER BY seq LIMIT ${PAGE.limit}`;

async function ingest(kiln, raw) {
  const started = nowMs();
  const sink = kiln.app.get(LogSink);
  const secrets = makeSecrets();
  const total = INGEST.rounds * INGEST.roundLines;
  const texts = makeLines(total, { seed: 7, secrets });
  const batches = [];
  for (let i = 0; i < texts.length; i += INGEST.batchLines) {
    const slice = texts.slice(i, i + INGEST.batchLines);
    batches.push({ texts: slice, inputs: slice.map((text) => ({ text })) });
  }

  const plainBuild = await kiln.runningBuild();
  const maskedBuild = await kiln.runningBuild();
  const rawBuild = await kiln.runningBuild();
  const refused = sink.registerSecrets(maskedBuild, secrets).filter((r) => !r.accepted);
  if (refused.length > 0) throw new Error(`secrets refused: ${JSON.stringify(refused)}`);
  let rawSeq = 0;
  const variants = {
    raw: async ({ texts: lines }) => {
      const ts = new Date().toISOString();
      await raw.query(RAW_INSERT, [
        rawBuild,
        rawSeq,
        lines.map(() => ts),
        lines.map(() => 'INFO'),
        lines,
        lines.map(() => null),
      ]);
      rawSeq += lines.length;
    },
    plain: ({ inputs }) => sink.append(plainBuild, inputs),
    masked: ({ inputs }) => sink.append(maskedBuild, inputs),
  };

  const elapsed = { raw: 0, plain: 0, masked: 0 };
  for (const run of Object.values(variants)) {
    for (const batch of batches.slice(0, INGEST.warmupBatches)) await run(batch);
  }
  // Rounds interleave the three, so drift in machine load touches each alike.
  const perRound = INGEST.roundLines / INGEST.batchLines;
  for (let round = 0; round < INGEST.rounds; round++) {
    const slice = batches.slice(round * perRound, (round + 1) * perRound);
    for (const [name, run] of Object.entries(variants)) {
      const begin = nowMs();
      for (const batch of slice) await run(batch);
      elapsed[name] += nowMs() - begin;
    }
  }

  const stored = await raw.query(
    'SELECT build_id AS id, lines AS log_lines FROM build_logs WHERE build_id = ANY($1::uuid[]) ORDER BY build_id',
    [[plainBuild, maskedBuild]],
  );
  const expected = total + INGEST.warmupBatches * INGEST.batchLines;
  for (const row of stored.rows) {
    if (row.log_lines !== expected)
      throw new Error(`build ${row.id} stored ${row.log_lines} of ${expected} lines`);
  }
  const masked = await raw.query(
    `SELECT count(*)::int AS n FROM build_log_lines WHERE build_id = $1 AND message LIKE '%***%'`,
    [maskedBuild],
  );

  const rate = (name) => total / (elapsed[name] / 1000);
  const goal = 0.5;
  for (const [name, label] of [
    ['plain', 'ingest'],
    ['masked', 'ingest, 5 secrets'],
  ]) {
    const r = rate(name) / rate('raw');
    console.log(
      `${label}: kiln ${int(rate(name))} lines/s | raw unnest INSERT ${int(rate('raw'))} lines/s | ` +
        `ratio ${ratio(r)} (goal >= ${goal}: ${verdict(r >= goal)})`,
    );
  }
  console.log(
    `  ${int(total)} lines per figure in batches of ${INGEST.batchLines}, ` +
      `${Math.round(averageBytes(texts))} B average; kiln = LogSink.append ` +
      `(${int(masked.rows[0].n)} lines masked with secrets registered); ` +
      `raw = the repository's INSERT … unnest on one pg connection, no masking, level detection, ` +
      `row lock, counters or NOTIFY (pg-copy-streams is not installed, so no COPY); ` +
      `${Math.round((nowMs() - started) / 1000)} s`,
  );
}

async function page(kiln, raw, clients) {
  const started = nowMs();
  const id = await kiln.runningBuild();
  await raw.query(
    `INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
     SELECT $1, g, now() + g * interval '1 millisecond',
            CASE WHEN g % 97 = 0 THEN 'WARN' ELSE 'INFO' END,
            '#' || (5 + g % 9) || ' ' || to_char(g / 400.0, 'FM99990.000') ||
              ' npm http fetch GET 200 https://registry.npmjs.org/package-' || g ||
              ' ' || (g % 997) || 'ms (cache miss)',
            CASE WHEN g % 10 = 0 THEN jsonb_build_object('vertex', (5 + g % 9)::text) END
       FROM generate_series(0, $2::int - 1) AS g`,
    [id, PAGE.lines],
  );
  await raw.query(
    `INSERT INTO build_logs (build_id, lines, bytes)
     VALUES ($1, $2, (SELECT sum(octet_length(message)) FROM build_log_lines WHERE build_id = $1))`,
    [id, PAGE.lines],
  );
  await raw.query('VACUUM ANALYZE build_log_lines');
  await raw.query('CHECKPOINT');

  const { kiln: k, raw: s } = await clients.call('pages', {
    baseUrl: kiln.baseUrl,
    headers: kiln.headers,
    databaseUrl: kiln.databaseUrl,
    buildId: id,
    lines: PAGE.lines,
    limit: PAGE.limit,
    sql: RAW_PAGE,
    samples: PAGE.samples,
    warmup: PAGE.warmup,
  });
  const limit = 2 * s.p99 + 5;
  console.log(
    `page: kiln p50 ${ms(k.p50)} p99 ${ms(k.p99)} | raw SQL p50 ${ms(s.p50)} p99 ${ms(s.p99)} | ` +
      `ratio p99 ${ratio(k.p99 / s.p99)} (goal p99 <= 2x raw + 5 ms = ${ms(limit)}: ${verdict(k.p99 <= limit)})`,
  );
  console.log(
    `  ${PAGE.samples} samples each at random offsets of a ${int(PAGE.lines)}-line build, ` +
      `limit ${PAGE.limit}, from the client process; kiln = GET …/logs over HTTP (token, ` +
      `X-Tenant-ID) to the last byte; raw = the repository's SELECT on one pg connection; ${Math.round((nowMs() - started) / 1000)} s`,
  );
}

async function live(kiln, clients) {
  const started = nowMs();
  const { batchLines, intervalMs } = LIVE;
  const capacity = LIVE.maxBatches * batchLines;

  // The raw floor: NOTIFY one payload per line, straight to a LISTENing pg client.
  const channel = 'kiln_bench_live';
  await clients.call('listen', { url: kiln.databaseUrl, channel, capacity });
  const notifier = new pg.Client({ connectionString: kiln.databaseUrl });
  await notifier.connect();
  let rawProduced;
  try {
    rawProduced = await produce((t) =>
      notifier.query(
        `SELECT pg_notify($1, $2 || ' n=' || g) FROM generate_series(1, $3::int) AS g`,
        [channel, `t=${t}`, batchLines],
      ),
    );
  } finally {
    await notifier.end();
  }
  const r = await clients.call('awaitListen', {
    expected: rawProduced.lines,
    timeoutMs: 15_000,
  });

  const sink = kiln.app.get(LogSink);
  const id = await kiln.runningBuild();
  await clients.call('openStreams', {
    url: `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
    headers: kiln.headers,
    clients: LIVE.subscribers,
    capacityPerClient: capacity,
    reader: LIVE.reader,
  });
  await delay(200); // every session has read its (empty) log and sleeps on the hub
  const filler = ' npm http fetch GET 200 https://registry.npmjs.org/@types/node 38ms (cache miss)';
  const cpuBefore = { kiln: selfCpuMs(), clients: await clients.call('cpu') };
  const produced = await produce((t, batch) =>
    sink.append(
      id,
      Array.from({ length: batchLines }, (_, i) => ({
        text: `t=${t} line ${batch * batchLines + i}${filler}`,
      })),
    ),
  );
  const k = await clients.call('awaitStreams', {
    expectedPerClient: produced.lines,
    timeoutMs: 30_000,
  });
  const window = produced.seconds * 1000;
  const busy = (used) => `${Math.round((100 * used) / window)}%`;
  const cpu = {
    kiln: busy(selfCpuMs() - cpuBefore.kiln),
    clients: busy((await clients.call('cpu')) - cpuBefore.clients),
  };
  await kiln.app.get(BuildLifecycle).succeed(id);
  const { codes } = await clients.call('closeStreams', { timeoutMs: 10_000 });

  const goal = 50;
  console.log(
    `live: kiln p50 ${ms(k.p50)} p99 ${ms(k.p99)} | raw NOTIFY→LISTEN p50 ${ms(r.p50)} p99 ${ms(r.p99)} | ` +
      `ratio p99 ${ratio(k.p99 / r.p99)} (goal p99 <= ${goal} ms: ${verdict(k.p99 <= goal)})`,
  );
  const perSecond = (p) => int(p.lines / p.seconds);
  const expected = produced.lines * LIVE.subscribers;
  console.log(
    `  ${LIVE.subscribers} ws subscribers (another process) on one build; the producer sends ` +
      `${batchLines} lines every ${intervalMs} ms (10,000/s offered) for ${LIVE.seconds} s, ` +
      `awaiting each call; latency = call start → message received; subscribers read with ` +
      (LIVE.reader === 'frames' ? 'a minimal frame reader' : 'the ws library'),
  );
  console.log(
    `  kiln: LogSink.append stored ${int(produced.lines)} lines (${perSecond(produced)}/s), ` +
      `append call p50 ${ms(produced.call.p50)} p99 ${ms(produced.call.p99)}; received ` +
      `${int(k.received)} of ${int(expected)} messages${k.complete ? '' : ' (INCOMPLETE after 30 s)'}` +
      (k.outOfOrder === undefined ? '' : `, ${int(k.outOfOrder)} out of order`) +
      `, ` +
      `${int(k.overOneSecond)} over 1 s, max ${ms(k.max)}; closes ${JSON.stringify(codes)}`,
  );
  console.log(
    `  raw: pg_notify of ${int(rawProduced.lines)} lines (${perSecond(rawProduced)}/s), ` +
      `${int(r.received)} received; CPU while kiln produced: kiln+bench process ${cpu.kiln}, ` +
      `client process ${cpu.clients} of one core; ${Math.round((nowMs() - started) / 1000)} s`,
  );
}

/**
 * Idle subscribers: the RSS of the api role (issue 32: an API pod in 200 MB) and its database's
 * transactions/s with 1,000 and then 10,000 open log streams spread over 100 builds that print
 * nothing, beside the same process with none. The api role runs as deployed, `node dist/main.js`
 * with KILN_ROLE=api and the local runner, in a process of its own on the bench's database (the
 * in-process kiln seeded it and is closed first): its RSS is kiln's alone, not the bench's
 * driver's and HTTP client's. Its builds are created and not started, so that nothing runs
 * them: a stream waits on them as on a running build that prints nothing (non-terminal, no
 * line).
 */
async function idle(kiln, clients) {
  const started = nowMs();
  await kiln.app.close();
  const api = await startApiRole(kiln);
  const stats = new pg.Client({ connectionString: databaseUrl(kiln.databaseUrl, 'postgres') });
  await stats.connect();
  try {
    const atStart = await api.rss();
    const builds = [];
    for (let i = 0; i < IDLE.builds; i++) {
      const created = await request(api.baseUrl, kiln.headers, 'POST', '/builds', {
        project_id: kiln.projectId,
        git_branch: `idle-${i}`,
      });
      builds.push(created.id);
    }
    const urls = builds.map(
      (id) => `${api.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
    );
    /** Transactions kiln's database has counted (pg_stat_database; each query is one). */
    const transactions = async () => {
      await stats.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await stats.query(
        `SELECT (xact_commit + xact_rollback)::bigint AS n FROM pg_stat_database WHERE datname = $1`,
        [new URL(kiln.databaseUrl).pathname.slice(1)],
      );
      return Number(rows[0].n);
    };
    /** Settles, then measures the api role's RSS and its database's transactions/s. */
    const measure = async () => {
      await delay(IDLE.settleMs);
      const before = await transactions();
      await delay(IDLE.windowMs);
      return {
        rss: await api.rss(),
        perSecond: ((await transactions()) - before) / (IDLE.windowMs / 1000),
      };
    };

    const none = await measure();
    const figures = [];
    let open = 0;
    for (const count of IDLE.counts) {
      const perUrl = (count - open) / urls.length;
      ({ open } = await clients.call('openIdleStreams', { urls, headers: kiln.headers, perUrl }));
      figures.push({ count: open, ...(await measure()) });
    }
    await clients.call('closeIdleStreams');

    const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`;
    for (const { count, rss, perSecond } of figures) {
      const rssGoal = IDLE.rssGoalMb[count];
      console.log(
        `idle ${int(count)} subscribers: api role RSS ${mb(rss)} | with none ${mb(none.rss)} | ` +
          `ratio ${ratio(rss / none.rss)} (goal <= ${rssGoal} MB: ${verdict(rss <= rssGoal * 1e6)}); ` +
          `${((rss - none.rss) / count / 1024).toFixed(1)} KiB each`,
      );
      console.log(
        `idle ${int(count)} subscribers: kiln ${perSecond.toFixed(2)} queries/s | with none ` +
          `${none.perSecond.toFixed(2)}/s | ${verdict(perSecond - none.perSecond <= IDLE.queriesGoal)} ` +
          `(goal: <= ${IDLE.queriesGoal} more/s)`,
      );
    }
    console.log(
      `  api role: node dist/main.js, KILN_ROLE=api, KILN_RUNNER=local; RSS ${mb(atStart)} once ` +
        `ready, ${mb(none.rss)} after ${IDLE.builds} builds were created (VmRSS); streams from ` +
        `the client process, opened 200 at a time; queries = transactions of its database ` +
        `(pg_stat_database) over ${IDLE.windowMs / 1000} s after ${IDLE.settleMs / 1000} s ` +
        `settling; ${Math.round((nowMs() - started) / 1000)} s`,
    );
  } finally {
    await stats.end().catch(() => undefined);
    await api.stop();
  }
}

/** `url` with another database name. */
function databaseUrl(url, database) {
  const other = new URL(url);
  other.pathname = `/${database}`;
  return other.toString();
}

/**
 * kiln's api role as deployed: `node dist/main.js` with KILN_ROLE=api and the local runner, on
 * the in-process kiln's database and JWT secret (so the bench's token works), until /readyz
 * answers.
 */
async function startApiRole(kiln) {
  const dir = await mkdtemp(join(tmpdir(), 'kiln-bench-api-'));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('../dist/main.js', import.meta.url))],
    {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: dir,
        PORT: String(port),
        KILN_HOST: '127.0.0.1',
        KILN_ROLE: 'api',
        KILN_RUNNER: 'local',
        DATABASE_URL: kiln.databaseUrl,
        KILN_DATA_DIR: join(dir, 'data'),
        KILN_JWT_SECRET: JWT_SECRET,
        KILN_SECRETS_KEY: randomBytes(32).toString('hex'),
        KILN_LOG_LEVEL: 'warn',
        KILN_RATE_LIMIT_READS: '1000000',
        KILN_RATE_LIMIT_WRITES: '1000000',
        KILN_WS_MAX_CONNECTIONS_PER_USER: String(Math.max(...IDLE.counts)),
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const exited = new Promise((done) => child.once('exit', (code, signal) => done(code ?? signal)));
  const baseUrl = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let waited = 0; ; waited += 100) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`the api role exited (${await exited}) before it was ready`);
      const ready = await fetch(`${baseUrl}/readyz`).then(
        (response) => response.status === 200,
        () => false,
      );
      if (ready) break;
      if (waited > 60_000) throw new Error('the api role was not ready after 60 s');
      await delay(100);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    baseUrl,
    stop,
    /** Resident set size from /proc, in bytes. */
    async rss() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) * 1024;
    },
  };
}

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
    server.once('error', fail);
  });
}

/**
 * Calls `send(t, batch)` on a schedule of one batch every intervalMs, awaiting each call, for
 * LIVE.seconds; t is hrtime ns at the call. A slow `send` lowers the rate, which is reported.
 */
async function produce(send) {
  const begin = nowMs();
  const end = begin + LIVE.seconds * 1000;
  const calls = [];
  let batch = 0;
  for (; batch < LIVE.maxBatches && nowMs() < end; batch++) {
    const wait = begin + batch * LIVE.intervalMs - nowMs();
    if (wait >= 1) await delay(wait);
    const t = process.hrtime.bigint();
    await send(t, batch);
    calls.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  return {
    seconds: (nowMs() - begin) / 1000,
    lines: batch * LIVE.batchLines,
    call: latencySummary(calls),
  };
}

/** Masking's worst line, as src/logs/secret-masker.spec.ts builds it (the test asserts no time). */
const MASK = { secrets: 50, runs: 200, goalMs: 15 };

/**
 * One 64 KiB line against 50 registered secrets, its long runs sharing prefixes with them (the
 * worst case for a naive alternation). Baseline: the least any masker does, a `String.includes`
 * of the line for each secret. Best and p99 of MASK.runs each, alternating.
 */
function mask() {
  const secrets = Array.from(
    { length: MASK.secrets },
    (_, i) => `secret-${i}-${'x'.repeat(i)}-tail`,
  );
  const masker = new SecretMasker();
  for (const secret of secrets) {
    const registration = masker.register(secret);
    if (!registration.accepted) throw new Error(`secret refused: ${registration.reason}`);
  }
  const line = `${'secret-1-xxxxxxxx'.repeat(3000)}${secrets.at(-1)}`.padEnd(64 * 1024, 'a');
  const kiln = [];
  const baseline = [];
  let found = 0;
  for (let run = -10; run < MASK.runs; run++) {
    let started = nowMs();
    const masked = masker.mask(line);
    if (run >= 0) kiln.push(nowMs() - started);
    if (masked.includes(secrets.at(-1))) throw new Error('the secret was not masked');
    started = nowMs();
    for (const secret of secrets) if (line.includes(secret)) found++;
    if (run >= 0) baseline.push(nowMs() - started);
  }
  const k = latencySummary(kiln);
  const b = latencySummary(baseline);
  console.log(
    `masking: one 64 KiB line against ${MASK.secrets} secrets (${MASK.runs} runs; found ${found / (MASK.runs + 10)} per scan)`,
  );
  console.log(
    '| Figure | kiln (SecretMasker.mask) | baseline (String.includes per secret) | ratio | goal |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  console.log(
    `| p50 / p99 | ${ms(k.p50)} / ${ms(k.p99)} | ${ms(b.p50)} / ${ms(b.p99)} | ${ratio(k.p99 / b.p99)} | p99 ≤ ${MASK.goalMs} ms: ${verdict(k.p99 <= MASK.goalMs)} |`,
  );
}

async function main() {
  // The api role with the local runner, as an API pod runs without a cluster (the `idle` section
  // starts one as its own process: docs/adr/0051-api-role-memory.md). Builds run nowhere here
  // (the bench's runner).
  const kiln = await startKiln({
    KILN_ROLE: 'api',
    KILN_RUNNER: 'local',
    KILN_JWT_SECRET: JWT_SECRET,
    KILN_WS_MAX_CONNECTIONS_PER_USER: String(Math.max(LIVE.subscribers, ...IDLE.counts)), // 10,000: the most it takes
  });
  const raw = new pg.Client({ connectionString: kiln.databaseUrl });
  const clients = startClients(new URL('./support/clients.mjs', import.meta.url));
  let cleaned;
  const cleanup = () =>
    (cleaned ??= (async () => {
      clients.close();
      await raw.end().catch(() => undefined);
      await kiln.close();
    })());
  process.once('SIGINT', () => {
    void cleanup().finally(() => process.exit(130));
  });
  try {
    await raw.connect();
    const version = (await raw.query('SHOW server_version')).rows[0].server_version;
    console.log(
      `bench/logs: kiln from dist/ (KILN_ROLE=api, local runner), embedded PostgreSQL ${version} on /dev/shm (fsync off), ` +
        `node ${process.version}, ${cpus().length} CPUs; goals are reported, not asserted`,
    );
    // `idle` closes the in-process kiln and measures an api-role process of its own: it runs only
    // when named, last (make bench runs it alone).
    const only = process.argv.slice(2);
    const wanted = (name) => (only.length === 0 && name !== 'idle') || only.includes(name);
    if (wanted('mask')) mask();
    if (wanted('ingest')) await ingest(kiln, raw);
    if (wanted('page')) await page(kiln, raw, clients);
    if (wanted('live')) await live(kiln, clients);
    if (wanted('idle')) await idle(kiln, clients);
  } finally {
    await cleanup();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
