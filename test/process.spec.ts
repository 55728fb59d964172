import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import { jsonOf } from './support/http.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { freePort, isAlive } from './support/processes.js';

// These tests run the compiled kiln (`make build`, part of `make test`) as a real process.
const MAIN = join(__dirname, '..', 'dist', 'main.js');
const CLI = join(__dirname, '..', 'dist', 'cli', 'kiln-admin.js');

function baseEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env['PATH'], HOME: process.env['HOME'], KILN_RUNNER: 'local', ...extra };
}

async function waitFor(url: string, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return Date.now() - started;
    } catch {
      // not listening yet
    }
    if (Date.now() - started > timeoutMs)
      throw new Error(`${url} not ready within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

describe('the kiln process', () => {
  beforeAll(() => {
    if (!existsSync(MAIN))
      throw new Error(`${MAIN} is missing: run \`make build\` (make test does)`);
  });

  it('stops on PORT=abc with one message naming PORT', () => {
    const result = spawnSync('node', [MAIN], {
      env: baseEnv({ PORT: 'abc', KILN_ROLE: 'bogus' }),
      encoding: 'utf8',
    });

    expect(result.status).toBe(2);
    expect(result.stderr).toContain('PORT: an integer from 1 to 65535, got "abc"');
    expect(result.stderr).toContain('KILN_ROLE: one of api|operator|all, got "bogus"');
    expect(result.stdout).toBe('');
  });

  describe('started on an embedded PostgreSQL', () => {
    const dataDir = mkdtempSync('/dev/shm/kiln-process-');
    let kiln: ChildProcess;
    let baseUrl: string;
    let stdout = '';
    let exited: Promise<number | null>;

    beforeAll(async () => {
      const port = await freePort();
      baseUrl = `http://127.0.0.1:${port}`;
      kiln = spawn('node', [MAIN], {
        env: baseEnv({
          PORT: String(port),
          KILN_DATA_DIR: dataDir,
          KILN_JWT_SECRET: 's'.repeat(40),
          KILN_BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
          KILN_BOOTSTRAP_ADMIN_PASSWORD: 'a long enough password',
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      kiln.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      kiln.stderr!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      exited = new Promise((done) => kiln.on('exit', done));
      await waitFor(`${baseUrl}/readyz`, 30_000);
    }, 40_000);

    afterAll(async () => {
      if (kiln.exitCode === null) kiln.kill('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    });

    it('serves the Error body for an unknown API route', async () => {
      const response = await fetch(`${baseUrl}/api/v1/nope`);

      expect(response.status).toBe(404);
      expect(await jsonOf(response)).toMatchObject({
        code: 'NOT_FOUND',
        error: 'No route for GET /api/v1/nope',
      });
    });

    it('writes structured JSON logs that say where the database lives', () => {
      const lines = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);

      expect(lines.length).toBeGreaterThan(0);
      expect(
        lines.every((l) => typeof l['level'] === 'string' && typeof l['time'] === 'string'),
      ).toBe(true);
      expect(lines.find((l) => l['msg'] === 'embedded PostgreSQL started')).toMatchObject({
        clusterDir: expect.stringContaining('/postgres'),
      });
      expect(stdout).not.toContain('s'.repeat(40));
    });

    it('lets the CLI migrate the same database while kiln runs', async () => {
      // Run asynchronously: a spawnSync would stall this process's event loop for the whole
      // migrate, past the server's keep-alive timeout, and the next fetch would reuse a socket
      // kiln had already closed.
      const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
        (done) => {
          const child = spawn('node', [CLI, 'migrate', '--json'], {
            env: baseEnv({ KILN_DATA_DIR: dataDir }),
          });
          let out = '';
          let err = '';
          child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
          child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
          child.on('close', (status) => done({ status, stdout: out, stderr: err }));
        },
      );

      expect(result.stderr).toBe('');
      expect(result.status).toBe(0);
      expect(JSON.parse(result.stdout)).toEqual({ applied: [] });
    });

    it('finishes a request in flight on SIGTERM, closes log streams with 1001, stops PostgreSQL and exits 0', async () => {
      await fetch(`${baseUrl}/readyz`); // kiln still serves after the CLI left
      const bootstrap = JSON.parse(
        stdout.split('\n').find((line) => line.includes('"bootstrap:'))!,
      );
      const login = await fetch(`${baseUrl}/api/v1/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'admin@example.com', password: 'a long enough password' }),
      });
      const headers = {
        authorization: `Bearer ${(await jsonOf(login)).access_token}`,
        'x-tenant-id': bootstrap.tenant_id,
        'content-type': 'application/json',
      };
      const build = await jsonOf(
        await fetch(`${baseUrl}/api/v1/builds`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ project_id: bootstrap.project_id, git_branch: 'main' }),
        }),
      );
      const stream = new LogStreamClient(
        `${baseUrl.replace('http', 'ws')}/api/v1/builds/${build.id}/logs/stream`,
        {
          headers,
        },
      );
      await stream.opened;
      const postmasterPid = Number(
        readFileSync(
          JSON.parse(readFileSync(join(dataDir, 'postgres.json'), 'utf8')).clusterDir +
            '/postmaster.pid',
          'utf8',
        ).split('\n')[0],
      );
      const body = '{"hello": "world"}';
      const inFlight = new Promise<{ status: number; body: string }>((done, fail) => {
        const req = request(`${baseUrl}/api/v1/slow-upload`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
        });
        req.on('response', (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => done({ status: res.statusCode ?? 0, body: text }));
        });
        req.on('error', fail);
        req.write(body.slice(0, 5));
        setTimeout(() => {
          kiln.kill('SIGTERM');
          setTimeout(() => req.end(body.slice(5)), 500);
        }, 200);
      });

      const answered = await inFlight;
      const code = await exited;

      expect(answered.status).toBe(404);
      expect(JSON.parse(answered.body)).toMatchObject({ code: 'NOT_FOUND' });
      expect(code).toBe(0);
      expect(await stream.closed).toMatchObject({ code: 1001 });
      expect(stdout).toContain('"msg":"kiln stopped"');
      expect(isAlive(postmasterPid)).toBe(false);
    });
  });
});
