// kiln's REST hot paths beside a bare NestJS + pg app (issue 16): GET a build, list builds in
// tenants of 100,000 and 1,000,000 builds, create builds in one project and across 50. Each
// figure is printed beside the bare app's, measured in the same run, with the ratio and the goal;
// goals are reported, never asserted (a missed goal prints MISSED and the exit status stays 0).
//
// Processes: kiln as deployed (`node dist/main.js`, KILN_ROLE=api and KILN_RUNNER=local, so a
// created build stays queued: nothing starts it), the bare app (support/bare-app.mjs) and
// autocannon (support/api-clients.mjs) each run as their own process; PostgreSQL is embedded, on
// /dev/shm, fsync off. kiln and the bare app never run at the same time: each measurement starts
// its server, warms it up, measures it and stops it. kiln's rate limits stay on, set too high to
// refuse.
//
// `node bench/api.bench.mjs [get] [list] [create]` runs some sections (after `npm run build`).
// API_BENCH_SECONDS (10) is the length of each measurement, API_BENCH_LIST_BUILDS (1000000) the
// size of the big tenant; API_BENCH_CPU_PROFILE=dir makes kiln write a V8 CPU profile of the get
// and create sections there, summarised by function and by package.
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addProjects, addTenant, seedBuilds } from './support/api-seed.mjs';
import {
  bootstrapKiln,
  kilnApiEnv,
  startBareServer,
  startKilnServer,
} from './support/api-servers.mjs';
import { readCpuProfileOf, summariseCpuProfile } from './support/cpu-profile.mjs';
import { HttpBenchGround } from './support/http-bench.mjs';
import { cpuMsOf, postgresCpuMs } from './support/proc-cpu.mjs';
import {
  delay,
  int,
  ms,
  nowMs,
  percent,
  ratio,
  seconds,
  verdict,
  sizeFromEnv as size,
} from './support/stats.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const LOAD = { connections: 10, seconds: size('API_BENCH_SECONDS', 10), warmupSeconds: 2 };
const GOALS = { ratio: 0.5, p99SlackMs: 3, bigListP99Ms: 25 };
/** The default tenant: builds to read one of, and the projects creates go to. */
const HOME = { builds: 1000, projects: 50 };
const LIST = { small: 100_000, big: size('API_BENCH_LIST_BUILDS', 1_000_000), projects: 8 };
const PROFILE_DIR = process.env.API_BENCH_CPU_PROFILE
  ? resolve(process.env.API_BENCH_CPU_PROFILE)
  : undefined;
const ADMIN = { email: 'bench@example.com', password: randomBytes(16).toString('hex') };

class Bench extends HttpBenchGround {
  async setUp() {
    await this.open('apibench');
    // kiln's environment; the bare app reads the same (its secret, issuer, audience, timeout).
    this.env = kilnApiEnv({
      databaseUrl: this.postgres.url,
      dataDir: `${this.tmp}/kiln-data`,
      admin: ADMIN,
    });
    this.token = await bootstrapKiln(this.env, this.clients, ADMIN);
    const { rows } = await this.raw.query(
      `SELECT m.tenant_id, m.user_id FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE u.email = $1`,
      [ADMIN.email],
    );
    this.userId = rows[0].user_id;
    this.tenantId = rows[0].tenant_id;
    this.projectIds = await addProjects(this.raw, this.tenantId, 'bench', HOME.projects);
    await seedBuilds(this.raw, {
      tenantId: this.tenantId,
      projectIds: this.projectIds,
      userId: this.userId,
      count: HOME.builds,
      repositoryPrefix: 'https://git.example.com/bench',
    });
    await this.raw.query('VACUUM ANALYZE builds');
  }

  headers(tenantId) {
    return { authorization: `Bearer ${this.token}`, 'x-tenant-id': tenantId };
  }

  /** Transactions PostgreSQL committed or rolled back in the bench's database so far. */
  async transactions() {
    const { rows } = await this.raw.query(
      `SELECT (xact_commit + xact_rollback)::bigint AS n FROM pg_stat_database
        WHERE datname = current_database()`,
    );
    return Number(rows[0].n);
  }

  /**
   * Waits until no connection but the bench's own is open: a stopped server's backends have
   * exited and reported their statistics (each reports on exit).
   */
  async untilOnlyUs() {
    for (let tries = 0; tries < 100; tries++) {
      const { rows } = await this.raw.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      if (rows[0].n === 0) return;
      await delay(50);
    }
  }
}

/**
 * One server under one load: started, warmed up for LOAD.warmupSeconds, measured for
 * LOAD.seconds, stopped. `load` = { path, tenantId, create? } (create: the client's bodies).
 * With `profile`, kiln writes a CPU profile and the summary of the measured window is returned.
 */
async function measure(bench, which, load, { profile = false } = {}) {
  // Over the server's whole life: statistics a backend has not reported yet at some instant are
  // reported by the time it exits.
  const transactionsBefore = await bench.transactions();
  const server =
    which === 'kiln'
      ? await startKilnServer(bench.env, profile ? { cpuProfileDir: PROFILE_DIR } : {})
      : await startBareServer(bench.env);
  try {
    const request = {
      baseUrl: server.baseUrl,
      path: load.path,
      headers: bench.headers(load.tenantId),
      connections: load.connections ?? LOAD.connections,
      create: load.create,
    };
    const answer =
      load.create === undefined ? await sampleAnswer(server.baseUrl, request) : undefined;
    const warmup = await bench.clients.call('load', { ...request, seconds: LOAD.warmupSeconds });
    const before = await cpuSample(bench, server);
    const run = await bench.clients.call('load', { ...request, seconds: LOAD.seconds });
    const after = await cpuSample(bench, server);
    await server.stop();
    await bench.untilOnlyUs();
    const transactions = (await bench.transactions()) - transactionsBefore;
    const windowMs = run.t1 - run.t0;
    const answered = (r) => r.ok + r.non2xx;
    const perAnswer = (used) => used / answered(run);
    const share = (used, window) => (100 * used) / window;
    const sampledMs = after.at - before.at;
    return {
      connections: request.connections,
      ...run,
      which,
      answer,
      warmup,
      rate: run.ok / (windowMs / 1000),
      // CPU time per request, beside req/s and latency, to show where each server's time goes.
      cpu: {
        server: share(after.server - before.server, sampledMs),
        serverPerAnswer: perAnswer(after.server - before.server),
        postgres: share(after.postgres - before.postgres, sampledMs),
        postgresPerAnswer: perAnswer(after.postgres - before.postgres),
        client: share(run.cpuMs, windowMs),
      },
      transactionsPerRequest: transactions / (1 + answered(warmup) + answered(run)),
      profile: profile
        ? await profileSummary(server.pid, { fromUs: run.t0 * 1000, toUs: run.t1 * 1000 })
        : undefined,
    };
  } finally {
    await server.stop();
  }
}

/** CPU time so far of the server and of PostgreSQL, and when it was read. */
async function cpuSample(bench, server) {
  const sample = {
    server: await cpuMsOf(server.pid),
    postgres: await postgresCpuMs(bench.postgres.dir),
  };
  return { ...sample, at: nowMs() };
}

/** One answer of the server to the load's request, to check kiln and the bare app agree. */
async function sampleAnswer(baseUrl, { path, headers }) {
  const response = await fetch(`${baseUrl}${path}`, { headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path} gave ${response.status}: ${text}`);
  return JSON.parse(text);
}

async function profileSummary(pid, window) {
  const { path, profile } = await readCpuProfileOf(PROFILE_DIR, pid);
  return { path, ...summariseCpuProfile(profile, { ...window, root: ROOT }) };
}

const hasErrors = (run) => run.non2xx > 0 || run.errors > 0 || run.timeouts > 0;

/** A verdict that a run with errors cannot meet. */
function judge(met, ...runs) {
  return runs.some(hasErrors) ? 'MISSED (a run had errors)' : verdict(met);
}

/** Req/s and latency of a run; errors first when it had any. */
function figure(run, unit = 'req/s') {
  const text = `${int(run.rate)} ${unit}, p50 ${ms(run.latency.p50)} p99 ${ms(run.latency.p99)}`;
  if (!hasErrors(run)) return text;
  const codes = Object.entries(run.statuses)
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, count]) => `${code} ×${int(count)}`)
    .join(', ');
  return (
    `WITH ERRORS: ${int(run.non2xx)} non-2xx (${codes}), ${int(run.errors)} socket errors, ` +
    `${int(run.timeouts)} timeouts; ${text} (2xx only)`
  );
}

/** How the two runs were made and what they cost, for the lines under a figure. */
function describe(kiln, bare) {
  console.log(
    `  ${kiln.connections} connection${kiln.connections === 1 ? '' : 's'}, ${LOAD.seconds} s after a ${LOAD.warmupSeconds} s ` +
      `warm-up each, one server at a time; CPU over the measured window, 100% = one core:`,
  );
  for (const { which, ok, non2xx, t0, t1, cpu, transactionsPerRequest } of [kiln, bare])
    console.log(
      `    ${which}: ${int(ok + non2xx)} answers in ${seconds(t1 - t0)}; CPU ${which} ` +
        `${percent(cpu.server)} (${ms(cpu.serverPerAnswer)} a request), PostgreSQL ` +
        `${percent(cpu.postgres)} (${ms(cpu.postgresPerAnswer)} a request), autocannon ` +
        `${percent(cpu.client)}; ${transactionsPerRequest.toFixed(2)} PostgreSQL transactions a ` +
        `request (over the server's life, its start-up included)`,
    );
}

/** Whether two JSON answers are the same, keys in any order. */
function sameJson(a, b) {
  const canonical = (value) =>
    Array.isArray(value)
      ? value.map(canonical)
      : typeof value === 'object' && value !== null
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((key) => [key, canonical(value[key])]),
          )
        : value;
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function agreement(kiln, bare) {
  return sameJson(kiln.answer, bare.answer)
    ? 'kiln and the bare app answered the same JSON'
    : `kiln and the bare app answered DIFFERENT JSON: kiln ${JSON.stringify(kiln.answer).slice(0, 300)}` +
        ` | bare ${JSON.stringify(bare.answer).slice(0, 300)}`;
}

// ---- get ------------------------------------------------------------------------------------

async function get(bench) {
  const began = nowMs();
  const { rows } = await bench.raw.query(
    `SELECT id FROM builds WHERE tenant_id = $1 AND status = 'success'
      ORDER BY created_at DESC LIMIT 1`,
    [bench.tenantId],
  );
  const load = { path: `/api/v1/builds/${rows[0].id}`, tenantId: bench.tenantId };
  const kiln = await measure(bench, 'kiln', load, { profile: PROFILE_DIR !== undefined });
  const bare = await measure(bench, 'bare', load);
  const r = kiln.rate / bare.rate;
  const p99Limit = bare.latency.p99 + GOALS.p99SlackMs;
  console.log(
    `get: kiln ${figure(kiln)} | bare NestJS + pg ${figure(bare)} | ratio ${ratio(r)} ` +
      `(goal >= ${GOALS.ratio}: ${judge(r >= GOALS.ratio, kiln, bare)}); p99 ` +
      `${ms(kiln.latency.p99)} vs ${ms(bare.latency.p99)} (goal kiln p99 <= bare p99 + ` +
      `${GOALS.p99SlackMs} ms = ${ms(p99Limit)}: ${judge(kiln.latency.p99 <= p99Limit, kiln, bare)})`,
  );
  console.log(
    `  GET /api/v1/builds/{id} (a finished build of ${int(HOME.builds)} in the tenant) with the ` +
      `admin's bearer token and X-Tenant-ID; ${agreement(kiln, bare)}`,
  );
  describe(kiln, bare);
  if (kiln.profile !== undefined) printProfile(kiln.profile);
  console.log(`  ${seconds(nowMs() - began)}`);
}

function printProfile(summary) {
  const top = summary.functions[0];
  // The library function with the most self time: if it stays under 10%, every one does.
  const library = summary.topLibraryFunction;
  const libraryText =
    library === undefined
      ? 'none'
      : `${library.label} (${library.pkg}) ${percent(library.busyShare)} of the busy samples`;
  console.log(
    `  CPU profile of kiln over the measured window (${summary.path}): ${int(summary.samples)} ` +
      `samples, ${percent(summary.idleShare)} idle; top function ${top.label} (${top.pkg}) ` +
      `${percent(top.share)}; top library function ${libraryText} (goal: no library function ` +
      `above 10% of CPU: ${verdict(library === undefined || library.busyShare <= 10)})`,
  );
  console.log(
    `  by package (self time, % of samples): ${summary.packages
      .slice(0, 15)
      .map((entry) => `${entry.pkg} ${percent(entry.share)}`)
      .join(', ')}`,
  );
  console.log('  by function (self time, % of samples):');
  for (const entry of summary.functions.slice(0, 15))
    console.log(`    ${percent(entry.share).padStart(6)}  ${entry.label} (${entry.pkg})`);
}

// ---- list -----------------------------------------------------------------------------------

/** Two tenants of the admin's, with LIST.small and LIST.big builds over LIST.projects projects. */
async function seedListTenants(bench) {
  const began = nowMs();
  const tenants = {};
  for (const [key, count] of [
    ['small', LIST.small],
    ['big', LIST.big],
  ]) {
    const name = `list-${key}`;
    const tenantId = await addTenant(bench.raw, name, bench.userId);
    const projectIds = await addProjects(bench.raw, tenantId, name, LIST.projects);
    await seedBuilds(bench.raw, {
      tenantId,
      projectIds,
      userId: bench.userId,
      count,
      repositoryPrefix: `https://git.example.com/${name}`,
    });
    tenants[key] = { tenantId, count };
  }
  await bench.raw.query('VACUUM ANALYZE builds');
  await bench.raw.query('CHECKPOINT');
  const { rows } = await bench.raw.query(
    `SELECT status, count(*)::int AS n FROM builds GROUP BY status ORDER BY n DESC`,
  );
  console.log(
    `list: seeded ${int(LIST.small)} + ${int(LIST.big)} builds (${LIST.projects} projects a ` +
      `tenant; ${rows.map((row) => `${row.status} ${int(row.n)}`).join(', ')} in the table) with ` +
      `INSERT … SELECT generate_series, then VACUUM ANALYZE, in ${seconds(nowMs() - began)}`,
  );
  return tenants;
}

async function list(bench) {
  const tenants = await seedListTenants(bench);
  const path = '/api/v1/builds?page=1&limit=20';

  const began = nowMs();
  const small = { path, tenantId: tenants.small.tenantId };
  const kilnSmall = await measure(bench, 'kiln', small);
  const bareSmall = await measure(bench, 'bare', small);
  const r = kilnSmall.rate / bareSmall.rate;
  console.log(
    `list, tenant of ${int(LIST.small)} builds: kiln ${figure(kilnSmall)} | bare NestJS + pg ` +
      `${figure(bareSmall)} | ratio ${ratio(r)} (goal >= ${GOALS.ratio}: ` +
      `${judge(r >= GOALS.ratio, kilnSmall, bareSmall)})`,
  );
  console.log(
    `  GET ${path} (newest first; the bare app runs kiln's BuildsRepository.list SQL: the page ` +
      `with one row past it, and past the page a count capped at KILN_LIST_EXACT_COUNT_LIMIT + 1 ` +
      `and EXPLAIN's estimate), total_count kiln ${int(kilnSmall.answer.total_count)}, bare ` +
      `${int(bareSmall.answer.total_count)}; ${agreement(kilnSmall, bareSmall)}`,
  );
  describe(kilnSmall, bareSmall);

  // The size's own cost, not queueing: one connection, so no request waits behind another.
  const big = { path, tenantId: tenants.big.tenantId, connections: 1 };
  const kilnBig = await measure(bench, 'kiln', big);
  const bareBig = await measure(bench, 'bare', big);
  console.log(
    `list, big tenant of ${int(LIST.big)} builds, one connection: kiln ${figure(kilnBig)} | bare NestJS + pg ` +
      `${figure(bareBig)} | ratio p99 ${ratio(kilnBig.latency.p99 / bareBig.latency.p99)} ` +
      `(goal kiln p99 <= ${GOALS.bigListP99Ms} ms: ${judge(kilnBig.latency.p99 <= GOALS.bigListP99Ms, kilnBig)})`,
  );
  console.log(
    `  total_count kiln ${int(kilnBig.answer.total_count)}, bare ` +
      `${int(bareBig.answer.total_count)}; ${agreement(kilnBig, bareBig)}`,
  );
  describe(kilnBig, bareBig);
  console.log(`  ${seconds(nowMs() - began)}`);
}

// ---- create ---------------------------------------------------------------------------------

async function create(bench) {
  const began = nowMs();
  for (const [label, projectIds] of [
    ['one project', bench.projectIds.slice(0, 1)],
    [`${bench.projectIds.length} projects`, bench.projectIds],
  ]) {
    const runs = {};
    for (const which of ['kiln', 'bare']) {
      const branch = `bench-${which}-${projectIds.length}`;
      const run = await measure(
        bench,
        which,
        { path: '/api/v1/builds', tenantId: bench.tenantId, create: { projectIds, branch } },
        { profile: which === 'kiln' && PROFILE_DIR !== undefined },
      );
      const { rows } = await bench.raw.query(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'queued')::int AS queued
           FROM builds WHERE tenant_id = $1 AND git_branch = $2`,
        [bench.tenantId, branch],
      );
      runs[which] = { ...run, stored: rows[0], created: run.warmup.ok + run.ok };
    }
    const { kiln, bare } = runs;
    console.log(
      `create, ${label}: kiln ${figure(kiln, 'builds/s')} | bare NestJS + pg ` +
        `${figure(bare, 'builds/s')} | ratio ${ratio(kiln.rate / bare.rate)} ` +
        `(goal >= ${GOALS.ratio}: ${judge(kiln.rate / bare.rate >= GOALS.ratio, kiln, bare)})`,
    );
    const stored = (run) =>
      `${run.which} stored ${int(run.stored.n)} (${int(run.stored.queued)} queued) for ` +
      `${int(run.created)} 201s counted`;
    console.log(
      `  POST /api/v1/builds, reference form {project_id, git_branch, git_commit}, a fresh ` +
        `commit each request, projects in turn; ${stored(kiln)}; ${stored(bare)} (the rest ` +
        `were in flight when a run stopped)`,
    );
    describe(kiln, bare);
    if (kiln.profile !== undefined) printProfile(kiln.profile);
  }
  console.log(`  ${seconds(nowMs() - began)}`);
}

// ---- main -----------------------------------------------------------------------------------

async function main() {
  const only = process.argv.slice(2);
  const unknown = only.filter((name) => !['get', 'list', 'create'].includes(name));
  if (unknown.length > 0) throw new Error(`unknown sections: ${unknown.join(', ')}`);
  const wanted = (name) => only.length === 0 || only.includes(name);
  if (PROFILE_DIR !== undefined) await mkdir(PROFILE_DIR, { recursive: true });
  const bench = new Bench();
  process.once('SIGINT', () => void bench.close().finally(() => process.exit(130)));
  try {
    await bench.setUp();
    const version = (await bench.raw.query('SHOW server_version')).rows[0].server_version;
    console.log(
      `bench/api: kiln from dist/ (node dist/main.js, KILN_ROLE=api, KILN_RUNNER=local) and a ` +
        `bare NestJS + pg app, each its own process, never both at once; autocannon in a third; ` +
        `embedded PostgreSQL ${version} on /dev/shm (fsync off); node ${process.version}, ` +
        `${cpus().length} CPUs; goals are reported, not asserted`,
    );
    if (wanted('get')) await get(bench);
    if (wanted('list')) await list(bench);
    if (wanted('create')) await create(bench);
  } finally {
    await bench.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
