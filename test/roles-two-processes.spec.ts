import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KANIKO_IMAGE } from '../src/build-methods/images.js';
import { wizardManifest } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { jsonOf } from './support/http.js';
import { KubeApiServer } from './support/kube/api-server.js';
import { writeKubeconfig } from './support/kube/kubeconfig.js';
import { numberedLine } from './support/kube/kubelet.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { freePort } from './support/processes.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';

// The compiled kiln (`make build`, part of `make test`), twice: the API and the operator as the
// separate Deployments of a cluster install, on one Postgres and one Kubernetes API server.
const MAIN = join(__dirname, '..', 'dist', 'main.js');
const ADMIN = { email: 'admin@example.com', password: 'a long enough password' };

interface Kiln {
  readonly url: string;
  readonly process: ChildProcess;
  output: string;
}

noteDoubleOnly('KILN_ROLE=api and KILN_ROLE=operator as two processes');

describe('KILN_ROLE=api and KILN_ROLE=operator as two processes', () => {
  let cluster: KubeApiServer;
  let database: TestDatabase;
  let dir: string;
  let api: Kiln;
  let operator: Kiln;

  async function start(role: 'api' | 'operator', kubeconfig: string): Promise<Kiln> {
    const port = await freePort();
    const child = spawn('node', [MAIN], {
      env: {
        PATH: process.env['PATH'],
        HOME: dir,
        PORT: String(port),
        KILN_ROLE: role,
        KILN_RUNNER: 'kubernetes',
        KUBECONFIG: kubeconfig,
        DATABASE_URL: database.url,
        KILN_DATA_DIR: join(dir, role),
        KILN_JWT_SECRET: 's'.repeat(40),
        KILN_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
        KILN_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const kiln: Kiln = { url: `http://127.0.0.1:${port}`, process: child, output: '' };
    child.stdout.on('data', (chunk: Buffer) => (kiln.output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (kiln.output += chunk.toString()));
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        if ((await fetch(`${kiln.url}/readyz`)).status === 200) return kiln;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`${role} did not start:\n${kiln.output}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  async function stop(kiln: Kiln | undefined): Promise<void> {
    if (kiln === undefined || kiln.process.exitCode !== null) return;
    const exited = new Promise((done) => kiln.process.once('exit', done));
    kiln.process.kill('SIGTERM');
    await exited;
  }

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`make build\``);
    cluster = await KubeApiServer.start({
      crdDirectories: ['crds'],
      namespaces: ['default', 'kiln-builds'],
    });
    database = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'kiln-two-roles-'));
    const kubeconfig = writeKubeconfig(join(dir, 'kubeconfig'), cluster.url, 'kiln-builds');
    // The API first: it migrates and bootstraps; the operator then finds both done.
    api = await start('api', kubeconfig);
    operator = await start('operator', kubeconfig);
  }, 90_000);

  afterAll(async () => {
    await stop(api);
    await stop(operator);
    await cluster.stop();
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a build the API accepted, with the log live over the API process, to success', async () => {
    const n = 200;
    cluster.kubelet.script(KANIKO_IMAGE, { lines: n, linesPerSecond: 400 });
    const bootstrap = /"tenant_id":"([^"]+)","user_id":"[^"]+","project_id":"([^"]+)"/.exec(
      api.output,
    );
    expect(bootstrap).not.toBeNull();
    const [, tenantId, projectId] = bootstrap!;
    const login = await fetch(`${api.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ADMIN),
    });
    const { access_token: token } = (await login.json()) as { access_token: string };
    const headers = {
      authorization: `Bearer ${token}`,
      'x-tenant-id': tenantId!,
      'content-type': 'application/json',
    };
    const created = await fetch(`${api.url}/api/v1/builds`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        tenant_id: tenantId,
        project_id: projectId,
        manifest: wizardManifest('kaniko'),
      }),
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect(
      (await fetch(`${api.url}/api/v1/builds/${id}/start`, { method: 'POST', headers })).status,
    ).toBe(200);
    const live = new LogStreamClient(
      `${api.url.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
      { headers: { authorization: headers.authorization, 'x-tenant-id': tenantId! } },
    );
    await live.opened;

    expect(await live.closed).toEqual({ code: 1000, reason: 'success' });

    const printed = Array.from({ length: n }, (_, i) => numberedLine(i + 1, n));
    expect(
      live.messages.filter((m) => m.metadata?.container === 'build').map((m) => m.message),
    ).toEqual(printed);
    const build = await jsonOf(await fetch(`${api.url}/api/v1/builds/${id}`, { headers }));
    expect(build.status).toBe('success');
    // Each process did only its part: the operator serves no API route.
    expect((await fetch(`${operator.url}/api/v1/builds`, { headers })).status).toBe(404);
    expect(api.output).not.toContain('operator started');
    expect(operator.output).toContain('operator started');
  });
});
