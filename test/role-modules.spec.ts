import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_JWT_SECRET, TEST_SECRETS_KEY } from './support/auth.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { KILN_MAIN } from './support/operator-process.js';
import { freePort } from './support/processes.js';

const ROOT = join(__dirname, '..');
const TRACE = join(__dirname, 'support', 'module-trace', 'register.mjs');
const CLIENT_NODE = '/node_modules/@kubernetes/client-node/';
const SWAGGER = '/node_modules/@nestjs/swagger/';

/** What `node dist/main.js` loaded in one life: module URLs, as the loader and require saw them. */
interface Life {
  readonly modules: string[];
  /** GET /api/v1/openapi.json as it answered, when the role serves the API. */
  readonly document?: Buffer;
  /** What it printed on stdout and stderr. */
  readonly output: string;
}

/**
 * Issue 32 item 5, in a process as deployed: `node dist/main.js` (after `make build`) with the
 * loader hooks of test/support/module-trace/ recording every module it loads from start, through
 * ready and a request, to its SIGTERM exit (docs/adr/0051-api-role-memory.md).
 */
describe('the modules each role loads (node dist/main.js)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-role-modules-'));
  let database: TestDatabase;
  let kubeconfig: string;

  beforeAll(async () => {
    if (!existsSync(KILN_MAIN)) throw new Error(`${KILN_MAIN} is missing: run \`make build\``);
    database = await createTestDatabase();
    // Nothing listens there: the client connects on its first request, which fails and is retried.
    kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), 'http://127.0.0.1:9');
  });

  afterAll(async () => {
    await database?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  async function lifeOf(name: string, env: Record<string, string>): Promise<Life> {
    const home = mkdtempSync(join(dir, `${name}-`));
    const trace = join(home, 'modules.txt');
    const port = await freePort();
    const child = spawn(process.execPath, ['--import', TRACE, KILN_MAIN], {
      env: {
        PATH: process.env['PATH'],
        HOME: home,
        PORT: String(port),
        KILN_HOST: '127.0.0.1',
        DATABASE_URL: database.url,
        KILN_DATA_DIR: join(home, 'data'),
        KILN_JWT_SECRET: TEST_JWT_SECRET,
        KILN_SECRETS_KEY: TEST_SECRETS_KEY,
        KILN_LOG_LEVEL: 'warn',
        KILN_MODULE_TRACE: trace,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    try {
      await healthy(child, `http://127.0.0.1:${port}`, () => output);
      let document: Buffer | undefined;
      if (env['KILN_ROLE'] === 'api') {
        const response = await fetch(`http://127.0.0.1:${port}/api/v1/openapi.json`);
        expect(response.status).toBe(200);
        document = Buffer.from(await response.arrayBuffer());
      }
      child.kill('SIGTERM');
      expect({ exit: await exited, output }).toEqual({ exit: 0, output: expect.any(String) });
      return { modules: readFileSync(trace, 'utf8').split('\n').filter(Boolean), document, output };
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }

  it('the api role with the local runner loads neither @kubernetes/client-node nor @nestjs/swagger, and serves the generated document byte for byte', async () => {
    const { modules, document } = await lifeOf('api-local', {
      KILN_ROLE: 'api',
      KILN_RUNNER: 'local',
    });

    expect(modules).toEqual(expect.arrayContaining([expect.stringContaining('/dist/main.js')]));
    expect(modules.filter((url) => url.includes(CLIENT_NODE))).toEqual([]);
    expect(modules.filter((url) => url.includes(SWAGGER))).toEqual([]);
    expect(modules.filter((url) => url.includes('/dist/operator/'))).toEqual([]);
    expect(document?.equals(readFileSync(join(ROOT, 'dist', 'openapi.json')))).toBe(true);
  });

  it('the all role without a cluster (make run on a laptop) loads neither @kubernetes/client-node nor the operator, and says its loop is not running', async () => {
    const { modules, output } = await lifeOf('all-local', {
      KILN_ROLE: 'all',
      KILN_RUNNER: 'local',
    });

    expect(modules.filter((url) => url.includes(CLIENT_NODE))).toEqual([]);
    expect(modules.filter((url) => url.includes('/dist/operator/operator.module.js'))).toEqual([]);
    expect(modules).toEqual(
      expect.arrayContaining([expect.stringContaining('/dist/operator/operator-idle.module.js')]),
    );
    expect(output).toContain(
      'operator: no kubeconfig or service account found; the reconcile loop is not running',
    );
  });

  it('the api role with the Kubernetes runner loads @kubernetes/client-node, not the operator', async () => {
    const { modules } = await lifeOf('api-kubernetes', {
      KILN_ROLE: 'api',
      KILN_RUNNER: 'kubernetes',
      KUBECONFIG: kubeconfig,
    });

    expect(modules.filter((url) => url.includes(CLIENT_NODE)).length).toBeGreaterThan(0);
    expect(modules.filter((url) => url.includes('/dist/operator/operator.module.js'))).toEqual([]);
    expect(modules.filter((url) => url.includes(SWAGGER))).toEqual([]);
  });

  it('the operator role loads @kubernetes/client-node and the operator, never @nestjs/swagger', async () => {
    const { modules } = await lifeOf('operator', {
      KILN_ROLE: 'operator',
      KILN_RUNNER: 'kubernetes',
      KUBECONFIG: kubeconfig,
    });

    expect(modules.filter((url) => url.includes(CLIENT_NODE)).length).toBeGreaterThan(0);
    expect(modules).toEqual(
      expect.arrayContaining([expect.stringContaining('/dist/operator/operator.module.js')]),
    );
    expect(modules.filter((url) => url.includes(SWAGGER))).toEqual([]);
  });
});

/** Waits for /healthz to answer 200; fails with the child's output if it exits first. */
async function healthy(child: ChildProcess, url: string, output: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`kiln exited before it was ready:\n${output()}`);
    }
    try {
      if ((await fetch(`${url}/healthz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`kiln was not ready:\n${output()}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}
