// The two servers of bench/api.bench.mjs, each its own process: kiln as it is deployed
// (`node dist/main.js`, configured by its environment alone) and the bare NestJS app
// (bare-app.mjs). Each listens on 127.0.0.1 at a port chosen here and is ready once GET /healthz
// answers 200. Also the CPU time of a process and of the embedded PostgreSQL, from /proc.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { delay, nowMs } from './stats.mjs';

const KILN_MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const BARE_APP = fileURLToPath(new URL('./bare-app.mjs', import.meta.url));

/**
 * kiln from dist/main.js with exactly `env` (plus PATH, HOME, the host and port). With
 * `cpuProfileDir`, V8 writes a CPU profile of the whole process there when it exits (kiln's
 * SIGTERM shutdown ends in process.exit, which writes it).
 */
export function startKilnServer(env, { cpuProfileDir } = {}) {
  const profile =
    cpuProfileDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', cpuProfileDir];
  return startServer('kiln', KILN_MAIN, env, profile);
}

/**
 * kiln's environment as the benches run its API: the local runner, its data under `dataDir`, a
 * fresh JWT secret, warnings only, no rate limit to speak of, `admin` bootstrapped; `extra` on top.
 */
export function kilnApiEnv({ databaseUrl, dataDir, admin }, extra = {}) {
  return {
    DATABASE_URL: databaseUrl,
    KILN_ROLE: 'api',
    KILN_RUNNER: 'local',
    KILN_DATA_DIR: dataDir,
    KILN_JWT_SECRET: randomBytes(32).toString('hex'),
    KILN_JWT_TTL_SECONDS: '86400',
    KILN_LOG_LEVEL: 'warn',
    KILN_RATE_LIMIT_READS: '1000000',
    KILN_RATE_LIMIT_WRITES: '1000000',
    KILN_BOOTSTRAP_ADMIN_EMAIL: admin.email,
    KILN_BOOTSTRAP_ADMIN_PASSWORD: admin.password,
    ...extra,
  };
}

/**
 * Runs kiln once with `env`: it migrates the database and bootstraps the admin (and its `default`
 * tenant). Answers the admin's token, logged in through `clients` (client-process.mjs).
 */
export async function bootstrapKiln(env, clients, admin) {
  const kiln = await startKilnServer(env);
  try {
    return await clients.call('login', { baseUrl: kiln.baseUrl, ...admin });
  } finally {
    await kiln.stop();
  }
}

/** The bare app (bare-app.mjs) with the same environment as kiln. */
export function startBareServer(env) {
  return startServer('the bare app', BARE_APP, env, []);
}

/** A port nothing listens on now (the server binds it a moment later). */
function freePort() {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => done(port));
    });
  });
}

async function startServer(name, script, env, execArgv) {
  const port = await freePort();
  const child = spawn(process.execPath, [...execArgv, script], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/tmp',
      ...env,
      KILN_HOST: '127.0.0.1',
      PORT: String(port),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  const keep = (stream) => {
    stream.setEncoding('utf8');
    stream.on('data', (text) => {
      for (const line of text.split('\n')) if (line !== '') lines.push(line);
      lines.splice(0, Math.max(0, lines.length - 40));
    });
  };
  keep(child.stdout);
  keep(child.stderr);
  let exited;
  const exit = new Promise((done) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      done(exited);
    }),
  );

  const server = {
    name,
    pid: child.pid,
    baseUrl: `http://127.0.0.1:${port}`,
    /** Its last lines of output, for an error report. */
    tail: () => lines.join('\n'),
    /** SIGTERM, SIGKILL after 40 s; resolves to how it exited. */
    async stop() {
      if (exited === undefined) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
        await exit;
        clearTimeout(timer);
      }
      return exit;
    },
  };
  const deadline = nowMs() + 60_000;
  for (;;) {
    if (exited !== undefined)
      throw new Error(
        `${name} exited (${exited.code ?? exited.signal}) before it was ready:\n${server.tail()}`,
      );
    const ok = await fetch(`${server.baseUrl}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return server;
    if (nowMs() > deadline) {
      await server.stop();
      throw new Error(`${name} was not ready after 60 s:\n${server.tail()}`);
    }
    await delay(100);
  }
}
