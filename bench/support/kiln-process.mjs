// kiln as its own process for bench/operator.bench.mjs (kiln-child.mjs, forked with IPC), and a
// throw-away embedded PostgreSQL on /dev/shm for it, as bench/support/kiln.mjs makes one.
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { parse } from 'yaml';
import { createLogger } from '../../dist/common/logger.js';
import { EmbeddedPostgres } from '../../dist/database/embedded-postgres.js';
// The prefix and layout bench/support/kiln.mjs uses: either bench removes the other's leftovers.
import { PREFIX, removeLeftoversOfKilledRuns, ROOT, untilNoClients } from './leftovers.mjs';

const DATABASE = 'kiln_bench';

/** A fresh embedded PostgreSQL (fsync off) in a temporary directory under /dev/shm. */
export async function startPostgres() {
  await removeLeftoversOfKilledRuns();
  const dir = await mkdtemp(`${ROOT}/${PREFIX}${process.pid}-`);
  try {
    const postgres = await EmbeddedPostgres.open({
      dataDir: `${dir}/data`,
      logger: createLogger('warn'),
      ephemeral: true,
    });
    await postgres.ensureDatabase(DATABASE);
    return {
      dir,
      url: postgres.url(DATABASE),
      async close() {
        await untilNoClients(postgres.url('postgres')).catch(() => undefined);
        await postgres.stop().catch(() => undefined);
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * A kiln process's node/V8 flags: OPBENCH_NODE_FLAGS when set (space-separated; '' for none), else
 * what the chart sets as NODE_OPTIONS for that role (values.yaml `api.nodeOptions`,
 * `operator.nodeOptions`; both, the operator's, for KILN_ROLE=all), so kiln runs as installed.
 */
export function nodeFlags(role) {
  const set = process.env.OPBENCH_NODE_FLAGS;
  const flags = set !== undefined ? set : chartNodeOptions(role);
  return flags.split(' ').filter((flag) => flag !== '');
}

/** values.yaml's `nodeOptions` of the chart's component running `role`. */
export function chartNodeOptions(role) {
  const values = parse(
    readFileSync(new URL('../../charts/kiln/values.yaml', import.meta.url), 'utf8'),
  );
  return (role === 'api' ? values.api.nodeOptions : values.operator.nodeOptions) ?? '';
}

/**
 * Starts kiln (bench/support/kiln-child.mjs) with exactly `env` (plus PATH and HOME) and waits
 * until it listens. Its stdout/stderr (pino JSON) are kept: `messages()` counts them by level and
 * message, `tail()` gives the last lines for an error report.
 */
export function startKilnProcess(env) {
  const child = fork(new URL('./kiln-child.mjs', import.meta.url), {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    // The chart's NODE_OPTIONS for the role, or OPBENCH_NODE_FLAGS.
    execArgv: ['--expose-gc', ...nodeFlags(env.KILN_ROLE), ...cpuProfileArgs()],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const lines = [];
  const counts = new Map();
  const keep = (stream) => {
    let carry = '';
    stream.setEncoding('utf8');
    stream.on('data', (text) => {
      const parts = (carry + text).split('\n');
      carry = parts.pop() ?? '';
      for (const line of parts) {
        if (line === '') continue;
        lines.push(line);
        if (lines.length > 200) lines.shift();
        let key = line.slice(0, 200);
        try {
          const entry = JSON.parse(line);
          key = `${levelName(entry.level)}: ${entry.msg}`;
        } catch {
          // not pino's JSON: keep the raw line
        }
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
    });
  };
  keep(child.stdout);
  keep(child.stderr);

  const pending = new Map();
  let next = 0;
  let exited = false;
  const exit = new Promise((done) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const call of pending.values())
        call.fail(new Error(`kiln exited (${code ?? signal}) while answering`));
      pending.clear();
      done({ code, signal });
    }),
  );
  const ready = new Promise((done, fail) => {
    child.on('message', (message) => {
      if (message.ready) {
        done(message.port);
        return;
      }
      const call = pending.get(message.id);
      pending.delete(message.id);
      if (message.error === undefined) call?.done(message.result);
      else call?.fail(new Error(message.error));
    });
    void exit.then(({ code, signal }) =>
      fail(new Error(`kiln exited (${code ?? signal}) before it was ready:\n${lines.join('\n')}`)),
    );
  });

  const kiln = {
    pid: child.pid,
    baseUrl: undefined,
    call(command, args) {
      if (exited) return Promise.reject(new Error('kiln has exited'));
      return new Promise((done, fail) => {
        const id = next++;
        pending.set(id, { done, fail });
        child.send({ id, command, args });
      });
    },
    /** Resident set size from /proc, in bytes. */
    async rss() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
      return kb * 1024;
    },
    messages() {
      return new Map(counts);
    },
    tail() {
      return lines.slice(-40).join('\n');
    },
    /**
     * SIGTERM: a graceful stop (app.close, database close); kiln exits 1 itself past its shutdown
     * timeout + 5 s, and gets SIGKILL after 40 s. Resolves to how it exited, once.
     */
    async stop() {
      if (!exited) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
        await exit;
        clearTimeout(timer);
      }
      return exit;
    },
    ready: ready.then((port) => {
      kiln.baseUrl = `http://127.0.0.1:${port}`;
      return kiln;
    }),
  };
  return kiln;
}

/**
 * OPBENCH_CPU_PROFILE=dir: each kiln process writes a V8 CPU profile (.cpuprofile, for Chrome
 * DevTools or `node --cpu-prof` tooling) into dir when it exits; kiln's SIGTERM stop exits
 * through process.exit, which writes it.
 */
function cpuProfileArgs() {
  const dir = process.env.OPBENCH_CPU_PROFILE;
  return dir ? ['--cpu-prof', '--cpu-prof-dir', dir] : [];
}

function levelName(level) {
  return (
    { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' }[level] ??
    String(level)
  );
}
