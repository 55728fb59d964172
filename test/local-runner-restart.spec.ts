import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from './support/auth.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { KILN_MAIN } from './support/operator-process.js';
import { freePort, processesMentioning } from './support/processes.js';
import {
  descendantsOf,
  membersOf,
  type ProcessEntry,
  stillRunning,
} from './support/process-tree.js';

const ADMIN = { email: 'admin@example.com', password: 'a long enough password' };
const SLOW_DOCKERFILE = [
  'FROM scratch',
  'COPY busybox /bin/busybox',
  'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
  'RUN echo sleeping && sleep 120',
  '',
].join('\n');

/** `node dist/main.js` with the local runner: a process of its own, so it can be SIGKILLed alone. */
class KilnProcess {
  private output = '';
  readonly exited: Promise<void>;

  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
  ) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.exited = new Promise((done) => child.once('exit', () => done()));
  }

  static async start(env: Record<string, string>): Promise<KilnProcess> {
    const port = await freePort();
    const child = spawn(process.execPath, [KILN_MAIN], {
      env: { PATH: process.env['PATH'], PORT: String(port), KILN_HOST: '127.0.0.1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const kiln = new KilnProcess(`http://127.0.0.1:${port}`, child);
    await kiln.ready();
    return kiln;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  get log(): string {
    return this.output;
  }

  private async ready(): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (!this.running) throw new Error(`kiln exited before it was ready:\n${this.output}`);
      try {
        if ((await fetch(`${this.url}/readyz`)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`kiln was not ready:\n${this.output}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  /** SIGKILL to kiln alone, as the OOM killer or `kill -9` sends it: its children are not told. */
  async killAlone(): Promise<void> {
    process.kill(this.pid, 'SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 20_000);
    await this.exited;
    clearTimeout(timer);
  }
}

/**
 * kiln (local runner) SIGKILLed while buildah runs a build's RUN step: the builder, in a process
 * group of its own, outlives kiln; the next kiln on the same data directory and database stops
 * it before it is ready, fails the build, and cleans the build's directory up as a cancel does
 * (docs/adr/0033-local-child-processes.md).
 */
describe('the local runner after kiln was SIGKILLed mid-build', () => {
  const dir = mkdtempSync('/dev/shm/kiln-restart-');
  const dataDir = join(dir, 'data');
  let database: TestDatabase;
  let repo: GitRepo;
  let env: Record<string, string>;
  const kilns: KilnProcess[] = [];
  let builder: ProcessEntry[] = [];

  beforeAll(async () => {
    if (!existsSync(KILN_MAIN)) throw new Error(`${KILN_MAIN} is missing: run \`make build\``);
    database = await createTestDatabase();
    repo = new GitRepo();
    repo.commit('slow', { busybox: { copyFrom: '/bin/busybox' }, Dockerfile: SLOW_DOCKERFILE });
    env = {
      HOME: dir,
      DATABASE_URL: database.url,
      KILN_RUNNER: 'local',
      KILN_DATA_DIR: dataDir,
      KILN_JWT_SECRET: TEST_JWT_SECRET,
      KILN_SECRETS_KEY: TEST_SECRETS_KEY,
      KILN_CANCEL_GRACE_SECONDS: '5',
      KILN_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      KILN_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
    };
  }, 30_000);

  afterAll(async () => {
    for (const kiln of kilns) await kiln.stop();
    // Without the fix the builder outlives both kilns: do not leave it running.
    for (const entry of stillRunning(builder)) process.kill(entry.pid, 'SIGKILL');
    await database.drop();
    await rm(dir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  }, 60_000);

  /** buildah's working containers in a store (a project's layer cache). */
  function workingContainers(storeDir: string): string[] {
    const storage = ['--root', join(storeDir, 'storage'), '--runroot', join(storeDir, 'runroot')];
    const out = execFileSync(
      'buildah',
      [...storage, '--storage-driver', 'vfs', 'containers', '--quiet'],
      { encoding: 'utf8' },
    );
    return out.split('\n').filter((line) => line !== '');
  }

  async function client(kiln: KilnProcess) {
    const bootstrap = /"tenant_id":"([^"]+)".*"project_id":"([^"]+)"/.exec(kilns[0]!.log);
    if (bootstrap === null) throw new Error(`kiln did not bootstrap:\n${kilns[0]!.log}`);
    const [, tenantId, projectId] = bootstrap;
    const login = await fetch(`${kiln.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ADMIN),
    });
    const headers = {
      authorization: `Bearer ${(await jsonOf(login)).access_token}`,
      'x-tenant-id': tenantId!,
      'content-type': 'application/json',
    };
    return {
      projectId: projectId!,
      call: async (method: string, path: string, body?: unknown) =>
        jsonOf(
          await fetch(`${kiln.url}/api/v1${path}`, {
            method,
            headers,
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          }),
        ),
    };
  }

  it('stops the processes of a build a SIGKILLed kiln left running, fails the build as restarted and cleans up after it', async () => {
    const first = await KilnProcess.start(env);
    kilns.push(first);
    const api = await client(first);
    // A file:// repository is fine for a test; the API accepts only network URLs.
    const db = new pg.Client({ connectionString: database.url });
    await db.connect();
    await db.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      api.projectId,
    ]);
    await db.end();
    const build = await api.call('POST', '/builds', {
      project_id: api.projectId,
      git_branch: 'slow',
    });
    await api.call('POST', `/builds/${build.id}/start`);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { logs } = await api.call('GET', `/builds/${build.id}/logs?limit=1000`);
      if (logs.some((line: { message: string }) => line.message === 'sleeping')) break;
      if (Date.now() > deadline)
        throw new Error(`the build never reached its sleep:\n${first.log}`);
      await new Promise((done) => setTimeout(done, 200));
    }
    builder = descendantsOf(first.pid);
    const groups = new Set(builder.map((entry) => entry.pgid));
    expect(builder.map((entry) => entry.command)).toContainEqual('sleep 120');

    await first.killAlone();

    // The defect this guards against: a SIGKILLed kiln takes none of its builders with it.
    expect(stillRunning(builder)).toEqual(builder);
    const buildDir = join(dataDir, 'builds', build.id);
    // The build runs in its project's layer cache (docs/adr/0055-local-layer-cache.md).
    const [row] = await (async () => {
      const query = new pg.Client({ connectionString: database.url });
      await query.connect();
      try {
        return (
          await query.query<{ tenant_id: string }>('SELECT tenant_id FROM builds WHERE id = $1', [
            build.id,
          ])
        ).rows;
      } finally {
        await query.end();
      }
    })();
    const cacheDir = join(dataDir, 'cache', row?.tenant_id ?? 'no-build-row', api.projectId);
    expect(workingContainers(cacheDir)).not.toEqual([]);

    const second = await KilnProcess.start(env);
    kilns.push(second);

    // Ready means started up: whatever the new kiln stops, it has stopped by now.
    expect(stillRunning(builder)).toEqual([]);
    expect(membersOf(groups)).toEqual([]);
    expect(processesMentioning(build.id)).toEqual([]);
    const failed = await (await client(second)).call('GET', `/builds/${build.id}`);
    expect(failed).toMatchObject({
      status: 'failed',
      error_message: 'kiln restarted while this build ran; retry it',
    });
    // As after a cancel: the checkout and run directory gone, no record of a group left.
    expect(readdirSync(buildDir)).toEqual([]);
    expect(workingContainers(cacheDir)).toEqual([]);
  }, 180_000);
});
