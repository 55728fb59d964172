// Admission at scale (issue 30): 10,000 started builds waiting across 100 tenants while the
// installation's limit (KILN_MAX_RUNNING 50) is full. Each figure is printed beside a baseline
// measured in the same run, with the ratio and the goal; goals are reported, never asserted (a
// missed goal prints MISSED and the exit status stays 0).
//
// pass: the admission decision per freed slot. One running build ends (its admission released,
//   untimed), then one admission is timed: AdmissionStore.admit alone, then the whole
//   Admission.pass (admit, refreshReasons, the [kiln] log lines), each over the same number of
//   slots from the same seeded state. The baseline frees and takes as many slots by the simplest
//   FIFO there is: one UPDATE of the first waiting row by seq (FOR UPDATE SKIP LOCKED), on the
//   same DataSource. kiln's classes come from dist/, in an app made by createApp in the bench's
//   process (KILN_ROLE=api, a runner that runs nothing: no poll, nothing else admits). Then
//   EXPLAIN ANALYZE of the statements a pass sends, captured from kiln's own calls.
// status: GET /api/v1/builds/{id}/status of a waiting build (its `queue`: the place in the
//   QUEUE over every waiting build, and the outlook of the estimate) against the same of a
//   running build, over HTTP against kiln as deployed (`node dist/main.js`, KILN_ROLE=api,
//   KILN_RUNNER=local, KILN_MAX_RUNNING=50: the local runner's admission poll runs every second),
//   autocannon in its own process (support/api-clients.mjs), one server at a time; for scale,
//   the same for a finished build (no admission query at all); then the waiting and the running
//   build again while the queue moves (every ADMISSION_BENCH_MOVE_MS, 500, the last waiting build
//   is released and enqueued again: two new generations, every place unchanged).
//
// PostgreSQL is embedded, on /dev/shm, fsync off; the rows are seeded with SQL
// (support/admission-seed.mjs). Start → Job is bench/operator.bench.mjs's `jobs` section.
//
// `node bench/admission.bench.mjs [pass] [status]` runs some sections (after `npx nest build`).
// ADMISSION_BENCH_WAITING (10000), ADMISSION_BENCH_TENANTS (100), ADMISSION_BENCH_RUNNING (50,
// also KILN_MAX_RUNNING), ADMISSION_BENCH_HISTORY (20000 finished builds),
// ADMISSION_BENCH_BURST (2000 of the waiting builds are the first tenant's, before the others'),
// ADMISSION_BENCH_SLOTS (200 freed slots a measurement), ADMISSION_BENCH_SECONDS (10 s of load),
// ADMISSION_BENCH_MOVE_MS; ADMISSION_BENCH_EXPLAIN=1 prints the whole plans.
import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import pg from 'pg';
import { AdmissionStore } from '../dist/admission/admission.repository.js';
import { Admission } from '../dist/admission/admission.js';
import { KILN_ENTITIES } from '../dist/app.entities.js';
import { createApp } from '../dist/app.factory.js';
import { createLogger } from '../dist/common/logger.js';
import { loadConfig } from '../dist/config/config.js';
import { createDataSource } from '../dist/database/data-source.js';
import { seedAdmission } from './support/admission-seed.mjs';
import { bootstrapKiln, kilnApiEnv, startKilnServer } from './support/api-servers.mjs';
import { HttpBenchGround } from './support/http-bench.mjs';
import { BenchRunner } from './support/kiln.mjs';
import { cpuMsOf, postgresCpuMs } from './support/proc-cpu.mjs';
import {
  delay,
  int,
  latencySummary,
  ms,
  nowMs,
  percent,
  ratio,
  seconds,
  verdict,
} from './support/stats.mjs';

function size(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be an integer >= 0`);
  return n;
}

const SEED = {
  tenants: size('ADMISSION_BENCH_TENANTS', 100),
  projects: 5,
  waiting: size('ADMISSION_BENCH_WAITING', 10_000),
  running: size('ADMISSION_BENCH_RUNNING', 50),
  history: size('ADMISSION_BENCH_HISTORY', 20_000),
  burst: size('ADMISSION_BENCH_BURST', 2_000),
  /** Tenants with their own limit of 1 that run one build: their waiting builds are held. */
  limited: 10,
};
const SLOTS = { measured: size('ADMISSION_BENCH_SLOTS', 200), warmup: 10 };
const LOAD = { connections: 10, seconds: size('ADMISSION_BENCH_SECONDS', 10), warmupSeconds: 2 };
const GOALS = { slotP99Ms: 20, waitingOverRunning: 1.5 };
const MOVE_MS = size('ADMISSION_BENCH_MOVE_MS', 500);
const EXPLAIN = process.env.ADMISSION_BENCH_EXPLAIN === '1';
const ADMIN = { email: 'bench@example.com', password: randomBytes(16).toString('hex') };

/** The simplest FIFO admission: the first waiting build by seq, one statement. */
const FIFO = `
  UPDATE build_admissions SET admitted_at = statement_timestamp(), reason = NULL, message = NULL
   WHERE build_id = (SELECT build_id FROM build_admissions
                      WHERE admitted_at IS NULL AND released_at IS NULL
                      ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING build_id, tenant_id`;

/** The machine's load: other work on its two cores moves every figure here. */
const load = () =>
  `load average ${loadavg()
    .map((n) => n.toFixed(2))
    .join(' ')}`;

class Bench extends HttpBenchGround {
  async setUp() {
    const began = nowMs();
    await this.open('admissionbench');
    this.env = kilnApiEnv(
      { databaseUrl: this.postgres.url, dataDir: `${this.tmp}/kiln-data`, admin: ADMIN },
      { KILN_MAX_RUNNING: String(SEED.running) },
    );
    // The first kiln migrates the database and bootstraps the admin.
    this.token = await bootstrapKiln(this.env, this.clients, ADMIN);
    const { rows } = await this.raw.query('SELECT id FROM users WHERE email = $1', [ADMIN.email]);
    this.seeded = await seedAdmission(this.raw, { userId: rows[0].id, ...SEED });

    // kiln's admission in this process: AdmissionStore and Admission as the app wires them.
    const logger = createLogger('warn');
    const config = loadConfig(this.env, this.tmp);
    this.dataSource = createDataSource({ url: this.postgres.url, logger, entities: KILN_ENTITIES });
    await this.dataSource.initialize();
    this.closers.push(() => this.dataSource.destroy());
    this.app = await createApp(config, this.dataSource, logger, { runner: BenchRunner });
    await this.app.init();
    this.closers.push(() => this.app.close());
    this.admission = this.app.get(Admission);
    this.store = this.app.get(AdmissionStore);
    // The pass's breakdown times the store Admission calls: it must be this one.
    if (this.admission.store !== this.store)
      throw new Error('Admission has another AdmissionStore');
    this.limits = this.admission.limits;

    // What the passes that made them wait would have written: every waiting build's reason.
    await this.store.refreshReasons(this.limits);
    await this.raw.query('VACUUM ANALYZE builds, build_admissions, tenant_admission_settings');
    // The state every measurement starts from.
    await this.raw.query('CREATE TABLE bench_admissions AS SELECT * FROM build_admissions');
    await this.raw.query(
      `CREATE TABLE bench_open AS SELECT id, updated_at FROM builds WHERE status = 'in_progress'`,
    );
    const { rows: counts } = await this.raw.query(
      `SELECT count(*) FILTER (WHERE admitted_at IS NULL AND released_at IS NULL)::int AS waiting,
              count(*) FILTER (WHERE admitted_at IS NOT NULL AND released_at IS NULL)::int AS running,
              count(*) FILTER (WHERE released_at IS NOT NULL)::int AS released,
              count(DISTINCT tenant_id) FILTER (WHERE admitted_at IS NULL AND released_at IS NULL)::int
                AS tenants
         FROM build_admissions`,
    );
    const { rows: reasons } = await this.raw.query(
      `SELECT reason, count(*)::int AS n FROM build_admissions
        WHERE admitted_at IS NULL AND released_at IS NULL GROUP BY reason ORDER BY n DESC`,
    );
    this.counts = counts[0];
    console.log(
      `seeded in ${seconds(nowMs() - began)}: ${int(this.counts.waiting)} builds waiting in ` +
        `${this.counts.tenants} tenants (${int(SEED.burst)} of them one tenant's burst, started ` +
        `first), ${this.counts.running} running (KILN_MAX_RUNNING ${SEED.running}: no slot free), ` +
        `${int(this.counts.released)} released admissions of finished builds; ` +
        `${this.seeded.weighted} tenants weigh 2, ${this.seeded.capped} have their own limit of 1 ` +
        `and run one build; reasons: ${reasons.map((r) => `${r.reason} ${int(r.n)}`).join(', ')}`,
    );
  }

  /** Back to the seeded state: every admission as seeded, every seeded build in_progress. */
  async restore() {
    await this.raw.query('BEGIN');
    await this.raw.query('TRUNCATE build_admissions');
    await this.raw.query(
      'INSERT INTO build_admissions OVERRIDING SYSTEM VALUE SELECT * FROM bench_admissions',
    );
    await this.raw.query(
      `UPDATE builds b SET status = 'in_progress', completed_at = NULL, updated_at = o.updated_at
         FROM bench_open o WHERE b.id = o.id AND b.status <> 'in_progress'`,
    );
    await this.raw.query('COMMIT');
    await this.raw.query('VACUUM ANALYZE builds, build_admissions');
  }

  /**
   * A running build ends: the one admitted first. Its build succeeds and its admission is
   * released (AdmissionStore.release), which frees its slot. Answers its id.
   */
  async endOneRun() {
    const { rows } = await this.raw.query(
      `SELECT build_id FROM build_admissions WHERE admitted_at IS NOT NULL AND released_at IS NULL
        ORDER BY admitted_at, seq LIMIT 1`,
    );
    const id = rows[0].build_id;
    await this.raw.query(
      `UPDATE builds SET status = 'success', completed_at = now(), updated_at = now()
        WHERE id = $1`,
      [id],
    );
    if ((await this.store.release(id)) !== 'running') throw new Error(`${id} was not running`);
    return id;
  }

  /** The database's clock, to find what a measurement admitted. */
  async dbNow() {
    const { rows } = await this.raw.query('SELECT clock_timestamp() AS t');
    return rows[0].t;
  }

  headers(tenantId) {
    return { authorization: `Bearer ${this.token}`, 'x-tenant-id': tenantId };
  }
}

// ---- pass ------------------------------------------------------------------------------------

/**
 * From the seeded state: SLOTS.warmup + SLOTS.measured times, one run ends (untimed) and
 * `admitOne` is timed. Answers the times of the measured ones, what they admitted (in order) and
 * the breakdown `timers` collected.
 */
async function freeSlots(bench, admitOne) {
  await bench.restore();
  const times = [];
  let since;
  for (let i = 0; i < SLOTS.warmup + SLOTS.measured; i++) {
    if (i === SLOTS.warmup) since = await bench.dbNow();
    await bench.endOneRun();
    const t0 = nowMs();
    await admitOne();
    const t1 = nowMs();
    if (i >= SLOTS.warmup) times.push(t1 - t0);
  }
  const { rows } = await bench.raw.query(
    `SELECT build_id, tenant_id FROM build_admissions WHERE admitted_at >= $1
      ORDER BY admitted_at, seq`,
    [since],
  );
  const { rows: running } = await bench.raw.query(
    `SELECT count(*)::int AS n FROM build_admissions
      WHERE admitted_at IS NOT NULL AND released_at IS NULL`,
  );
  return {
    latency: latencySummary(times),
    admitted: rows.map((row) => row.build_id),
    tenants: new Set(rows.map((row) => row.tenant_id)).size,
    running: running[0].n,
  };
}

/** Times each call of `names` on the store instance (Admission calls the same instance). */
function timeStoreCalls(store, names) {
  const spent = Object.fromEntries(names.map((name) => [name, []]));
  for (const name of names) {
    const original = store[name];
    store[name] = async function (...args) {
      const t0 = nowMs();
      try {
        return await original.apply(this, args);
      } finally {
        spent[name].push(nowMs() - t0);
      }
    };
  }
  return {
    spent,
    restore() {
      for (const name of names) delete store[name];
    },
  };
}

async function pass(bench) {
  const began = nowMs();
  const { store, admission, limits } = bench;
  const admit = await freeSlots(bench, () => store.admit(limits));
  const timers = timeStoreCalls(store, ['admit', 'refreshReasons', 'places']);
  let whole;
  try {
    whole = await freeSlots(bench, () => admission.pass());
  } finally {
    timers.restore();
  }
  const fifo = await freeSlots(bench, () => bench.dataSource.query(FIFO));

  const p99Ratio = (run) => run.latency.p99 / fifo.latency.p99;
  const line = (label, run) =>
    `${label}: p50 ${ms(run.latency.p50)} p99 ${ms(run.latency.p99)} max ` +
    `${ms(run.latency.max)} | FIFO p50 ${ms(fifo.latency.p50)} p99 ${ms(fifo.latency.p99)} | ` +
    `ratio ${ratio(p99Ratio(run))} (p99) | goal p99 <= ${GOALS.slotP99Ms} ms: ` +
    `${verdict(run.latency.p99 <= GOALS.slotP99Ms)}`;
  console.log(
    `pass (${load()}): ${int(SLOTS.measured)} freed slots with ${int(bench.counts.waiting)} builds waiting ` +
      `(after ${SLOTS.warmup} unmeasured), one run ended and one admission timed each`,
  );
  console.log(`  ${line('AdmissionStore.admit', admit)}`);
  console.log(`  ${line('Admission.pass (admit + refreshReasons + log lines)', whole)}`);
  const share = (name) => {
    const values = timers.spent[name];
    if (values.length === 0) return `${name} not called`;
    const s = latencySummary(values);
    return `${name} ×${values.length} p50 ${ms(s.p50)} p99 ${ms(s.p99)}`;
  };
  // The warm-up's calls are in the timers too: SLOTS.warmup more of each.
  console.log(
    `  inside the passes (warm-up included): ${share('admit')}, ${share('refreshReasons')}, ` +
      `${share('places')} (the places of builds whose reason changed, for their log lines)`,
  );
  const same =
    admit.admitted.length === whole.admitted.length &&
    admit.admitted.every((id, i) => id === whole.admitted[i]);
  console.log(
    `  admitted: admit ${admit.admitted.length} builds of ${admit.tenants} tenants, pass ` +
      `${whole.admitted.length} of ${whole.tenants} (${same ? 'the same builds in the same order' : 'DIFFERENT builds'}), ` +
      `FIFO ${fifo.admitted.length} of ${fifo.tenants}; running after each: ${admit.running}, ` +
      `${whole.running}, ${fifo.running} (limit ${SEED.running})`,
  );
  await explainPass(bench);
  console.log(`  ${seconds(nowMs() - began)}; ${load()}`);
}

/**
 * Runs `work` and answers every statement kiln's driver sent meanwhile (the in-process app's pg
 * clients share this module's pg: the bench's own client sends nothing then), each with the
 * round trip it went in: several statements without parameters go in one (AdmissionStore.admit
 * joins them with ";\n").
 */
async function captureStatements(work) {
  const statements = [];
  let trips = 0;
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, values, callback) {
    const text = typeof config === 'string' ? config : config?.text;
    const params = (typeof config === 'string' ? values : config?.values) ?? [];
    if (text !== undefined) {
      trips++;
      const parts = params.length === 0 ? text.split(';\n') : [text];
      for (const part of parts) statements.push({ text: part, values: params, trip: trips });
    }
    return original.call(this, config, values, callback);
  };
  try {
    await work();
  } finally {
    pg.Client.prototype.query = original;
  }
  return statements;
}

/**
 * Own time of each node of an EXPLAIN (ANALYZE, FORMAT JSON) plan (ms, over all its loops), and of
 * each part: the CTE, SubPlan or InitPlan the node belongs to ("main" outside any). A CTE Scan
 * counts as nothing of its own: its time is the CTE's, which the CTE's own nodes carry.
 */
function ownTimes(plan) {
  const nodes = [];
  const walk = (node, part) => {
    const here = node['Subplan Name'] ?? part;
    const total = node['Actual Total Time'] * node['Actual Loops'];
    const children = node.Plans ?? [];
    const childTime = children.reduce(
      (sum, child) => sum + child['Actual Total Time'] * child['Actual Loops'],
      0,
    );
    const loops = node['Actual Loops'];
    nodes.push({
      part: here,
      label:
        `${node['Node Type']}${node['Relation Name'] ? ` on ${node['Relation Name']}` : ''}` +
        `${node['Index Name'] ? ` using ${node['Index Name']}` : ''}` +
        `${loops > 1 ? ` ×${int(loops)} loops` : ''} [${here}]`,
      own: node['Node Type'] === 'CTE Scan' ? 0 : Math.max(0, total - childTime),
    });
    for (const child of children) walk(child, here);
  };
  walk(plan, 'main');
  const all = nodes.reduce((sum, node) => sum + node.own, 0);
  const parts = new Map();
  for (const node of nodes) parts.set(node.part, (parts.get(node.part) ?? 0) + node.own);
  const share = (value) => percent((100 * value) / all);
  return {
    nodes: nodes
      .sort((a, b) => b.own - a.own)
      .slice(0, 4)
      .map((node) => `${node.label} ${share(node.own)}`),
    parts: [...parts]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([part, own]) => `${part} ${share(own)}`),
  };
}

/**
 * The statements of one pass right after a slot freed, captured from kiln's own calls, each
 * EXPLAIN ANALYZEd in a transaction rolled back (the same state: one slot free): how long each
 * takes in PostgreSQL, and where.
 */
async function explainPass(bench) {
  await bench.restore();
  await bench.endOneRun();
  // What a pass sends (the transactions, the lock, the admit, the reasons, the log lines), read
  // from one real pass; then, from the same state again, the statements that read the queue
  // explained, each in a transaction rolled back.
  const statements = await captureStatements(async () => {
    await bench.store.places([bench.seeded.tenantIds[0]], bench.limits); // no such build: the SQL
    await bench.admission.pass();
  });
  await bench.restore();
  await bench.endOneRun();
  const passStatements = statements.slice(1);
  const trips = new Set(passStatements.map((s) => s.trip)).size;
  const queueStatements = statements.filter((s) => /\bqueue AS \(/.test(s.text));
  console.log(
    `  one pass with a slot free sent ${passStatements.length} statements in ${trips} round trips, ` +
      `${queueStatements.length - 1} of them over the whole queue (QUEUE CTE); EXPLAIN ANALYZE ` +
      `of those with ${int(bench.counts.waiting)} waiting, one slot free:`,
  );
  const labels = ['places', 'admit', 'refreshReasons'];
  for (const [i, statement] of queueStatements.slice(0, 3).entries()) {
    const explain = async (options) => {
      await bench.raw.query('BEGIN');
      try {
        const { rows } = await bench.raw.query(
          `EXPLAIN (${options}) ${statement.text}`,
          statement.values,
        );
        return rows;
      } finally {
        await bench.raw.query('ROLLBACK');
      }
    };
    // Without per-node timing for the time itself; with it for where the time goes.
    const [plain] = (await explain('ANALYZE, TIMING OFF, FORMAT JSON'))[0]['QUERY PLAN'];
    const [timed] = (await explain('ANALYZE, FORMAT JSON'))[0]['QUERY PLAN'];
    const { nodes, parts } = ownTimes(timed.Plan);
    console.log(
      `    ${labels[i]}: ${ms(plain['Execution Time'])} (planning ${ms(plain['Planning Time'])}); ` +
        `own time by part: ${parts.join(', ')}; by node: ${nodes.join('; ')}`,
    );
    if (EXPLAIN)
      for (const row of await explain('ANALYZE, BUFFERS'))
        console.log(`      ${row['QUERY PLAN']}`);
  }
}

// ---- status ----------------------------------------------------------------------------------

/**
 * The statements Admission.queueOf (what GET …/status adds for an in_progress build) sends for
 * each build, captured from kiln's own call in this process, and each one's execution time in
 * PostgreSQL (EXPLAIN ANALYZE, TIMING OFF).
 */
async function explainQueueOf(bench, builds) {
  for (const [name, row] of Object.entries(builds)) {
    const { rows } = await bench.raw.query(
      'SELECT id, tenant_id, project_id FROM builds WHERE id = $1',
      [row.build_id],
    );
    const build = { id: rows[0].id, tenantId: rows[0].tenant_id, projectId: rows[0].project_id };
    // The first call of the process orders the queue (and reads the outlook); a second, at the
    // same generation, answers from that order.
    for (const call of ['first call', 'again, same generation']) {
      const statements = await captureStatements(() => bench.admission.queueOf([build]));
      const times = [];
      for (const statement of statements) {
        const { rows: plan } = await bench.raw.query(
          `EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${statement.text}`,
          statement.values,
        );
        times.push(
          `${statementName(statement.text)} ${ms(plan[0]['QUERY PLAN'][0]['Execution Time'])}`,
        );
      }
      console.log(
        `  Admission.queueOf of the ${name} build, ${call}: ${statements.length} statements` +
          `${times.length === 0 ? '' : `: ${times.join(', ')}`}`,
      );
    }
  }
}

/** What a statement of Admission.queueOf is, in a few words. */
function statementName(text) {
  if (/\bqueue AS \(/.test(text)) return 'order (QUEUE)';
  if (/percentile_cont/.test(text)) return 'outlook: median run';
  if (/statement_timestamp\(\) - admitted_at/.test(text)) return 'outlook: running';
  if (/build_admissions a ON a\.build_id = ANY/.test(text)) return 'states (and generation)';
  if (/FROM admission_generation/.test(text)) return 'generation';
  return text.trim().slice(0, 40);
}

/** CPU time so far of the server and of PostgreSQL, and when it was read. */
async function cpuSample(bench, server) {
  return {
    server: await cpuMsOf(server.pid),
    postgres: await postgresCpuMs(bench.postgres.dir),
    at: nowMs(),
  };
}

/** One answer of the server to the load's request. */
async function sampleAnswer(baseUrl, { path, headers }) {
  const response = await fetch(`${baseUrl}${path}`, { headers });
  const text = await response.text();
  if (!response.ok) throw new Error(`GET ${path} gave ${response.status}: ${text}`);
  return JSON.parse(text);
}

/** kiln started, warmed up, measured under GET `path` as `tenantId`, stopped. */
async function measure(bench, { path, tenantId }, { moving = false } = {}) {
  const server = await startKilnServer(bench.env);
  const mover = moving ? moveQueue(bench) : undefined;
  try {
    const request = {
      baseUrl: server.baseUrl,
      path,
      headers: bench.headers(tenantId),
      connections: LOAD.connections,
    };
    const answer = await sampleAnswer(server.baseUrl, request);
    // What kiln does with no request: the local runner's admission poll, every second.
    const idleBefore = await cpuSample(bench, server);
    await delay(3000);
    const idleAfter = await cpuSample(bench, server);
    mover?.start();
    await bench.clients.call('load', { ...request, seconds: LOAD.warmupSeconds });
    const before = await cpuSample(bench, server);
    const run = await bench.clients.call('load', { ...request, seconds: LOAD.seconds });
    const after = await cpuSample(bench, server);
    const answered = run.ok + run.non2xx;
    const idleMs = idleAfter.at - idleBefore.at;
    const sampledMs = after.at - before.at;
    return {
      ...run,
      answer,
      rate: run.ok / ((run.t1 - run.t0) / 1000),
      cpu: {
        server: (100 * (after.server - before.server)) / sampledMs,
        serverPerAnswer: (after.server - before.server) / answered,
        postgres: (100 * (after.postgres - before.postgres)) / sampledMs,
        postgresPerAnswer: (after.postgres - before.postgres) / answered,
        idleServer: (100 * (idleAfter.server - idleBefore.server)) / idleMs,
        idlePostgres: (100 * (idleAfter.postgres - idleBefore.postgres)) / idleMs,
      },
      moves: (await mover?.stop()) ?? 0,
    };
  } finally {
    await mover?.stop();
    await server.stop();
  }
}

/**
 * Moves the queue while a load runs: every MOVE_MS the last waiting build leaves the queue and
 * starts again in its old place (AdmissionStore.release, then enqueue): two changes of the queue's
 * generation that leave every place as it was, as a busy installation's starts and ends move it.
 * Answers, once stopped, how many times it moved the queue.
 */
function moveQueue(bench) {
  let running;
  let stopping = false;
  let moves = 0;
  return {
    start() {
      running = (async () => {
        const { rows } = await bench.raw.query(
          `SELECT build_id FROM build_admissions WHERE admitted_at IS NULL AND released_at IS NULL
            ORDER BY seq DESC LIMIT 1`,
        );
        const id = rows[0].build_id;
        while (!stopping) {
          await bench.store.release(id);
          await bench.store.enqueue(id);
          moves++;
          await delay(MOVE_MS);
        }
      })();
    },
    async stop() {
      stopping = true;
      await running;
      return moves;
    },
  };
}

const hasErrors = (run) => run.non2xx > 0 || run.errors > 0 || run.timeouts > 0;

function figure(run) {
  const text = `${int(run.rate)} req/s, p50 ${ms(run.latency.p50)} p99 ${ms(run.latency.p99)}`;
  if (!hasErrors(run)) return text;
  return (
    `WITH ERRORS: ${int(run.non2xx)} non-2xx (${JSON.stringify(run.statuses)}), ` +
    `${int(run.errors)} socket errors, ${int(run.timeouts)} timeouts; ${text} (2xx only)`
  );
}

async function status(bench) {
  const began = nowMs();
  await bench.restore();
  // A waiting build in the middle of the queue, held by the installation's limit only.
  const { rows: waiting } = await bench.raw.query(
    `SELECT build_id, tenant_id FROM build_admissions
      WHERE admitted_at IS NULL AND released_at IS NULL AND reason = 'InstallationLimit'
      ORDER BY seq OFFSET (SELECT count(*) / 2 FROM build_admissions
                            WHERE admitted_at IS NULL AND released_at IS NULL) LIMIT 1`,
  );
  const { rows: running } = await bench.raw.query(
    `SELECT build_id, tenant_id FROM build_admissions
      WHERE admitted_at IS NOT NULL AND released_at IS NULL ORDER BY seq LIMIT 1`,
  );
  const { rows: finished } = await bench.raw.query(
    `SELECT build_id, tenant_id FROM build_admissions WHERE released_at IS NOT NULL
      ORDER BY seq DESC LIMIT 1`,
  );
  const target = ([row]) => ({
    path: `/api/v1/builds/${row.build_id}/status`,
    tenantId: row.tenant_id,
  });
  await explainQueueOf(bench, { waiting: waiting[0], running: running[0] });
  const w = await measure(bench, target(waiting));
  const r = await measure(bench, target(running));
  const f = await measure(bench, target(finished));
  const wm = await measure(bench, target(waiting), { moving: true });
  const rm = await measure(bench, target(running), { moving: true });
  const { rows: still } = await bench.raw.query(
    `SELECT count(*)::int AS n FROM builds b JOIN bench_open o ON o.id = b.id
      WHERE b.status = 'in_progress'`,
  );

  const p99Ratio = w.latency.p99 / r.latency.p99;
  const judge = (met) => ([w, r].some(hasErrors) ? 'MISSED (a run had errors)' : verdict(met));
  console.log(
    `status (${load()}): waiting ${figure(w)} | running ${figure(r)} | ratio ${ratio(p99Ratio)} (p99) ` +
      `(goal waiting <= ${GOALS.waitingOverRunning}× running: ` +
      `${judge(p99Ratio <= GOALS.waitingOverRunning)}); finished ${figure(f)}`,
  );
  const movingRatio = wm.latency.p99 / rm.latency.p99;
  console.log(
    `  while the queue moves (${int(wm.moves)} and ${int(rm.moves)} times, every ${MOVE_MS} ms: ` +
      `each a new order to read): waiting ${figure(wm)} | running ${figure(rm)} | ratio ` +
      `${ratio(movingRatio)} (p99)${[wm, rm].some(hasErrors) ? ' (a run had errors)' : ''}`,
  );
  console.log(
    `  for scale, a finished build's status (no admission query): waiting / finished p99 ` +
      `${ratio(w.latency.p99 / f.latency.p99)}, running / finished ${ratio(r.latency.p99 / f.latency.p99)}`,
  );
  console.log(
    `  GET /api/v1/builds/{id}/status, ${LOAD.connections} connections, ${LOAD.seconds} s ` +
      `after a ${LOAD.warmupSeconds} s warm-up each, one kiln at a time; the waiting build's ` +
      `queue: ${JSON.stringify(w.answer.queue)}; running: ` +
      `${r.answer.queue === undefined ? 'no queue' : `queue ${JSON.stringify(r.answer.queue)}`}`,
  );
  console.log('  CPU over the measured window, 100% = one core:');
  for (const [name, run] of [
    ['waiting', w],
    ['running', r],
    ['finished', f],
    ['waiting, queue moving', wm],
    ['running, queue moving', rm],
  ])
    console.log(
      `    ${name}: ${int(run.ok + run.non2xx)} answers; kiln ${percent(run.cpu.server)} ` +
        `(${ms(run.cpu.serverPerAnswer)} a request), PostgreSQL ${percent(run.cpu.postgres)} ` +
        `(${ms(run.cpu.postgresPerAnswer)} a request); with no request for 3 s before: kiln ` +
        `${percent(run.cpu.idleServer)}, PostgreSQL ${percent(run.cpu.idlePostgres)} (the ` +
        `admission poll)`,
    );
  console.log(
    `  seeded builds still in_progress after the five kilns: ${int(still[0].n)} of ` +
      `${int(bench.counts.waiting + bench.counts.running)}`,
  );
  console.log(`  ${seconds(nowMs() - began)}; ${load()}`);
}

// ---- main ------------------------------------------------------------------------------------

const SECTIONS = { pass, status };

async function main() {
  const wanted = process.argv.slice(2);
  for (const name of wanted)
    if (!(name in SECTIONS)) throw new Error(`unknown section ${name}: ${Object.keys(SECTIONS)}`);
  const bench = new Bench();
  const stop = () => void bench.close().then(() => process.exit(130));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await bench.setUp();
    for (const [name, section] of Object.entries(SECTIONS))
      if (wanted.length === 0 || wanted.includes(name)) await section(bench);
  } finally {
    await bench.close();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
