import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { BuildLifecycle } from '../src/lifecycle/build-lifecycle.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { Retention } from '../src/retention/retention.service.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The `kiln` HTTP CLI as `make build` compiles it (scripts/build-cli.sh). */
const CLI = join(__dirname, '..', 'dist', 'cli', 'http', 'kiln.js');

const BUSYBOX =
  'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n';
/** 600 numbered lines over about 2.5 s: the log is still being written while it is followed. */
const MANY_LINES = `${BUSYBOX}RUN i=1; while [ $i -le 600 ]; do echo "line $i"; if [ $((i % 25)) -eq 0 ]; then sleep 0.1; fi; i=$((i+1)); done\n`;

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A running `kiln` process: its output so far, and how it ended. */
class KilnProcess {
  stdout = '';
  stderr = '';
  readonly ended: Promise<Run>;

  constructor(readonly child: ChildProcess) {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (this.stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.stderr += chunk));
    this.ended = new Promise((done) =>
      child.on('close', (status) => done({ status, stdout: this.stdout, stderr: this.stderr })),
    );
  }

  /** Resolves once standard output or error matches `pattern`. */
  async saw(pattern: RegExp, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(this.stdout) && !pattern.test(this.stderr)) {
      if (this.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`kiln never printed ${pattern}:\n${this.stdout}\n${this.stderr}`);
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  }
}

/**
 * A TCP proxy in front of kiln that cuts each of the first `cuts` WebSocket connections once it
 * has passed `bytes` bytes from kiln to the client: a network that drops mid-stream.
 */
class CuttingProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  cut = 0;

  private constructor(
    private readonly target: number,
    private readonly cuts: number,
    private readonly bytes: number,
  ) {
    this.server = createServer((client) => this.accept(client));
  }

  static async start(target: number, cuts: number, bytes: number): Promise<CuttingProxy> {
    const proxy = new CuttingProxy(target, cuts, bytes);
    await new Promise<void>((done) => proxy.server.listen(0, '127.0.0.1', done));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private accept(client: Socket): void {
    const upstream = connect(this.target, '127.0.0.1');
    this.sockets.add(client).add(upstream);
    let webSocket: boolean | undefined;
    let relayed = 0;
    client.on('data', (chunk: Buffer) => {
      webSocket ??= /^upgrade: websocket/im.test(chunk.toString('latin1'));
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
      relayed += chunk.length;
      if (webSocket === true && this.cut < this.cuts && relayed > this.bytes) {
        this.cut += 1;
        webSocket = false;
        client.destroy();
        upstream.destroy();
      }
    });
    for (const [socket, other] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.sockets.delete(socket);
        other.destroy();
      });
    }
  }
}

const quote = (word: string) => `'${word.replace(/'/g, `'\\''`)}'`;

// ANSI escape sequences, as the CLI drops them when its output is not a terminal.
const ANSI =
  // eslint-disable-next-line no-control-regex
  /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)|\u001b[@-Z\\-_]/g;

describe('the kiln CLI over HTTP (compiled, against a real kiln, buildah and registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-cli-http-');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  /** The HOME of the logged-in user of these tests. */
  const home = mkdtempSync(join(tmpdir(), 'kiln-cli-home-'));
  const configFile = join(home, '.config', 'kiln', 'config.json');

  function start(
    args: string[],
    options: { input?: string; env?: Record<string, string>; terminal?: boolean } = {},
  ) {
    const env = { PATH: process.env['PATH'] ?? '', HOME: home, ...options.env };
    // On a terminal: util-linux `script` runs kiln on a pseudo-terminal, whose line discipline
    // turns a typed Ctrl-C (\x03) into SIGINT, as a shell's terminal does. `exec`: no shell in
    // between to take the SIGINT too and end with it.
    const child = options.terminal
      ? spawn(
          'script',
          ['-qefc', `exec ${[process.execPath, CLI, ...args].map(quote).join(' ')}`, '/dev/null'],
          {
            env,
            stdio: ['pipe', 'pipe', 'pipe'],
          },
        )
      : spawn(process.execPath, [CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    if (!options.terminal) child.stdin.end(options.input);
    return new KilnProcess(child);
  }

  const run = (args: string[], options: { input?: string; env?: Record<string, string> } = {}) =>
    start(args, options).ended;

  function dockerfile(text: string): string {
    const path = join(mkdtempSync(join(tmpdir(), 'kiln-cli-df-')), 'Dockerfile');
    writeFileSync(path, text);
    return path;
  }

  async function logMessages(id: string): Promise<string[]> {
    const page = await jsonOf(await admin.request('GET', `/builds/${id}/logs?limit=1000`));
    return page.logs.map((line: { message: string }) => line.message.replace(ANSI, ''));
  }

  const createdId = (stderr: string) => /created build #\d+ \(([0-9a-f-]{36})\)/.exec(stderr)![1]!;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('slow', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: `${BUSYBOX}RUN echo sleeping && sleep 120\n`,
    });
    repo.commit('many', { busybox: { copyFrom: '/bin/busybox' }, Dockerfile: MANY_LINES });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_CANCEL_GRACE_SECONDS: '2',
      },
    });
    seeded = await seedTenancy(kiln);
    // A file:// repository is fine for a test; the API accepts only network URLs.
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      seeded.projectA,
    ]);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );

    const login = await run(
      ['login', kiln.baseUrl, '--email', seeded.users.admin.email, '--password-stdin'],
      { input: `${PASSWORD}\n` },
    );
    if (login.status !== 0) throw new Error(`kiln login failed: ${login.stderr}`);
  }, 60_000);

  afterAll(async () => {
    // A test that failed half-way may have left a slow build running: kiln would wait for it.
    if (admin !== undefined) {
      const running = await jsonOf(
        await admin.request('GET', '/builds?status=in_progress&limit=100'),
      );
      for (const { id } of running.builds) await admin.request('POST', `/builds/${id}/cancel`, {});
    }
    await kiln?.close();
    await registry?.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(home, { recursive: true, force: true });
    if (repo !== undefined) await rm(repo.dir, { recursive: true, force: true });
  }, 60_000);

  it('logs in with the password on standard input and keeps URL, token and tenant in a file only its owner can read', async () => {
    const stored = JSON.parse(await readFile(configFile, 'utf8'));

    expect(stored).toEqual({
      url: kiln.baseUrl,
      token: expect.any(String),
      tenant: seeded.tenantA,
    });
    expect(statSync(configFile).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, '.config', 'kiln')).mode & 0o777).toBe(0o700);
    const projects = await run(['project', 'list', '-o', 'json']);
    expect(projects.status).toBe(0);
    expect(JSON.parse(projects.stdout).projects.map((p: { name: string }) => p.name)).toEqual([
      'web',
    ]);
  });

  it('runs a FROM scratch Dockerfile build, streams its whole log once, pushes the image and exits 0', async () => {
    const path = dockerfile('FROM scratch\nLABEL kiln.test=cli\n');

    const result = await run([
      'build',
      'run',
      '--project',
      'web',
      '--method',
      'kaniko',
      '--dockerfile',
      path,
      '--tag',
      'cli-ok',
    ]);

    expect(result).toMatchObject({ status: 0, stderr: expect.stringMatching(/succeeded/) });
    const id = createdId(result.stderr);
    expect(result.stdout.trimEnd().split('\n')).toEqual(await logMessages(id));
    expect(result.stdout).toMatch(/^STEP 1\/2: FROM scratch$/m);
    expect(result.stderr).toMatch(/^\[kiln\] step 1\/2\n[\s\S]*^\[kiln\] step 2\/2$/m);
    expect(await registry.tags('kiln/web')).toContain('cli-ok');
  }, 90_000);

  it('exits 1 when the build fails, saying why', async () => {
    const path = dockerfile('FROM scratch\nRUN ["/no/such/program"]\n');

    const result = await run([
      'build',
      'run',
      '-p',
      'web',
      '--method',
      'kaniko',
      '--dockerfile',
      path,
      '-t',
      'cli-fails',
    ]);

    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/build #\d+ \([0-9a-f-]{36}\) failed/);
    const build = await jsonOf(await admin.request('GET', `/builds/${createdId(result.stderr)}`));
    expect(build.status).toBe('failed');
  }, 90_000);

  it('cancels the build on SIGINT without a terminal, and exits 2', async () => {
    const running = start(['build', 'run', '--project', 'web', '--branch', 'slow']);
    await running.saw(/^sleeping$/m);

    running.child.kill('SIGINT');
    const result = await running.ended;

    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/cancelling build #\d+[\s\S]*was cancelled/);
    const build = await jsonOf(await admin.request('GET', `/builds/${createdId(result.stderr)}`));
    expect(build.status).toBe('cancelled');
  }, 90_000);

  it('asks on a terminal at Ctrl-C, and cancels the build on yes (exit 2)', async () => {
    const running = start(['build', 'run', '--project', 'web', '--branch', 'slow'], {
      terminal: true,
    });
    await running.saw(/sleeping\r$/m); // after the progress line's erasure

    const id = createdId(running.stdout);
    try {
      running.child.stdin!.write('\u0003');
      await running.saw(/Cancel build #\d+ \([0-9a-f-]{36}\)\? \[y\/N\]/);
      running.child.stdin!.write('y\r');
      const result = await running.ended;

      expect(result.status).toBe(2);
      // The progress line, redrawn in place under the log.
      expect(result.stdout).toContain('\r\u001b[2K████████████████████ step 4/4  ');
      expect(result.stdout).toMatch(/cancelling build #\d+[\s\S]*was cancelled/);
      expect((await jsonOf(await admin.request('GET', `/builds/${id}`))).status).toBe('cancelled');
    } finally {
      await admin.request('POST', `/builds/${id}/cancel`, {}); // a failed test leaves none running
    }
  }, 90_000);

  it('asks on a terminal at Ctrl-C, and leaves the build running on no (exit 130)', async () => {
    const running = start(['build', 'run', '--project', 'web', '--branch', 'slow'], {
      terminal: true,
    });
    await running.saw(/sleeping\r$/m); // after the progress line's erasure
    const id = createdId(running.stdout);

    try {
      running.child.stdin!.write('\u0003');
      await running.saw(/\[y\/N\]/);
      running.child.stdin!.write('n\r');
      const result = await running.ended;

      expect(result.status).toBe(130);
      expect(result.stdout).toContain(`keeps running; follow it with: kiln logs -f ${id}`);
      expect((await jsonOf(await admin.request('GET', `/builds/${id}`))).status).toBe(
        'in_progress',
      );
    } finally {
      await admin.request('POST', `/builds/${id}/cancel`, {});
    }
  }, 90_000);

  it('exits 2 when someone else cancels the build it follows', async () => {
    const running = start(['build', 'run', '--project', 'web', '--branch', 'slow']);
    await running.saw(/^sleeping$/m);

    const cancel = await run(['build', 'cancel', createdId(running.stderr), '-o', 'json']);
    const result = await running.ended;

    expect(cancel.status).toBe(0);
    expect(JSON.parse(cancel.stdout)).toMatchObject({ status: 'cancelled' });
    expect(result.status).toBe(2);
  }, 90_000);

  it('resumes a WebSocket cut mid-log at the next line: every line once, in order', async () => {
    const proxy = await CuttingProxy.start(Number(new URL(kiln.baseUrl).port), 2, 16_384);
    try {
      const result = await run(['build', 'run', '--project', 'web', '--branch', 'many'], {
        env: { KILN_URL: proxy.url },
      });

      expect(result.status).toBe(0);
      expect(proxy.cut).toBe(2);
      expect(result.stderr.match(/the log stream dropped; resuming at line \d+/g)).toHaveLength(2);
      const printed = result.stdout.trimEnd().split('\n');
      expect(printed).toEqual(await logMessages(createdId(result.stderr)));
      expect(printed.filter((line) => /^line \d+$/.test(line))).toEqual(
        Array.from({ length: 600 }, (_, i) => `line ${i + 1}`),
      );
    } finally {
      await proxy.stop();
    }
  }, 90_000);

  it('creates and starts a build, follows its log to the end, and pages it from a line', async () => {
    const path = dockerfile('FROM scratch\nLABEL kiln.test=logs\n');
    const created = await run([
      'build',
      'create',
      '-p',
      'web',
      '--method',
      'kaniko',
      '--dockerfile',
      path,
      '-t',
      'cli-logs',
      '-o',
      'json',
    ]);
    const { id } = JSON.parse(created.stdout);
    expect((await run(['build', 'start', id])).status).toBe(0);

    const followed = await run(['logs', id, '-f']);
    const paged = await run(['logs', id, '--since-line', '3']);
    const json = await run(['logs', id, '-o', 'json']);

    const messages = await logMessages(id);
    expect(followed.status).toBe(0);
    expect(followed.stdout.trimEnd().split('\n')).toEqual(messages);
    expect(paged.stdout.trimEnd().split('\n')).toEqual(messages.slice(3));
    expect(
      json.stdout
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line).seq),
    ).toEqual(messages.map((_, i) => i));
    const status = await run(['build', 'status', id, '-o', 'json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ build_id: id, status: 'success' });
  }, 90_000);

  it('prints the API’s error and details, never a stack, and exits 3 when kiln refuses', async () => {
    const missing = await run(['build', 'get', '00000000-0000-4000-8000-000000000000']);
    const invalid = await run(['build', 'create', '-p', 'web', '--method', 'kaniko', '-t', 'v1']);

    expect(missing).toMatchObject({ status: 3, stdout: '' });
    expect(missing.stderr).toMatch(/^kiln: .*not found/im);
    expect(invalid.status).toBe(3);
    expect(invalid.stderr).toMatch(
      /^ {2}manifest\.build_config\.dockerfile: Dockerfile content is required for Kaniko builds$/m,
    );
    for (const { stderr } of [missing, invalid]) expect(stderr).not.toMatch(/^\s+at /m);
  });

  it('prints records as JSON or YAML with -o', async () => {
    const json = await run(['build', 'list', '-o', 'json', '--limit', '100']);
    const yaml = await run(['project', 'get', 'web', '-o', 'yaml']);

    expect(json.status).toBe(0);
    const list = JSON.parse(json.stdout);
    expect(list).toMatchObject({ page: 1, limit: 100, builds: expect.any(Array) });
    expect(list.builds.length).toBeGreaterThan(0);
    expect(yaml.status).toBe(0);
    expect(parseYaml(yaml.stdout)).toMatchObject({ id: seeded.projectA, name: 'web' });
  });

  it.each([
    [['build', 'list', '--bogus'], /unknown option '--bogus'[\s\S]*Usage: kiln build list/],
    [['frobnicate'], /unknown command 'frobnicate'[\s\S]*Usage: kiln/],
    [['build', 'list', '-o', 'xml'], /Allowed choices are table, json, yaml/],
    [['logs'], /missing required argument 'build'/],
    [['build', 'run', '--project', 'web'], /say what to build/],
  ])('prints the usage and exits 64 for `kiln %j`', async (args, message) => {
    const result = await run(args);

    expect(result.status).toBe(64);
    expect(result.stderr).toMatch(message);
  });

  it('says how to log in, and exits 64, with neither a login nor KILN_TOKEN', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'kiln-cli-nobody-'));
    try {
      const result = await run(['build', 'list'], { env: { HOME: empty, KILN_URL: kiln.baseUrl } });

      expect(result.status).toBe(64);
      expect(result.stderr).toMatch(/not logged in: run `kiln login` or set KILN_TOKEN/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });

  it('sets, lists and removes registry settings, and sets and shows git credentials, as settings:manage', async () => {
    const harbor = {
      address: 'harbor.example.com',
      namespace: 'team',
      username: 'robot$ci',
      password: 'vault:kv/data/harbor#token',
    };

    const set = await run(['settings', 'registry', 'set', 'harbor', '-f', '-', '-o', 'json'], {
      input: JSON.stringify(harbor),
    });
    const listed = await run(['settings', 'registry', 'list', '-o', 'json']);
    const credentials = await run([
      'project',
      'git-credentials',
      'web',
      '--username',
      'ci',
      '--password',
      'vault:kv/data/git#token',
    ]);
    const shown = await run(['project', 'git-credentials', 'web', '-o', 'json']);
    const removed = await run(['settings', 'registry', 'remove', 'harbor']);
    const unknown = await run(['settings', 'registry', 'set', 'dockerhub', '-f', '-'], {
      input: '{}',
    });

    expect(set.status).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ type: 'harbor', settings: harbor });
    expect(JSON.parse(listed.stdout).registries).toEqual([
      expect.objectContaining({ type: 'harbor', settings: harbor }),
    ]);
    expect(credentials.status).toBe(0);
    expect(JSON.parse(shown.stdout)).toEqual({
      username: 'ci',
      password: 'vault:kv/data/git#token',
    });
    expect(removed.status).toBe(0);
    expect(
      JSON.parse((await run(['settings', 'registry', 'list', '-o', 'json'])).stdout).registries,
    ).toEqual([]);
    expect(unknown.status).toBe(64);
  });

  it('pins and unpins a build, and previews what retention would delete in the tenant', async () => {
    const lifecycle = kiln.app.get(BuildLifecycle);
    const project = await kiln.app.get(ProjectsService).create(seeded.tenantA, 'retention-cli');
    const ended: string[] = [];
    for (const branch of ['old', 'new']) {
      const { id } = (await admin.createBuild(project.id, branch)) as { id: string };
      await lifecycle.start(seeded.tenantA, id);
      await lifecycle.succeed(id);
      ended.push(id);
    }
    const [older, newer] = ended as [string, string];
    await kiln.app.get(Retention).setTenantPolicy(seeded.tenantA, { keepLast: 1 });
    try {
      const kept = await run(['build', 'keep', newer]);
      const shown = await run(['build', 'get', newer, '-o', 'json']);
      const preview = await run(['retention', 'preview', '-o', 'json', '--limit', '1000']);
      const table = await run(['retention', 'preview']);
      const policy = await run(['retention', 'policy']);
      const unkept = await run(['build', 'unkeep', newer, '-o', 'json']);
      const everyTenant = await run(['retention', 'preview', '--all']);
      const expected = await jsonOf(
        await admin.request('GET', '/settings/retention/preview?limit=1000'),
      );

      expect(kept).toMatchObject({ status: 0 });
      expect(kept.stdout).toMatch(`(${newer}) is kept: retention never deletes it`);
      expect(JSON.parse(shown.stdout)).toMatchObject({ id: newer, keep: true });
      expect(preview.status).toBe(0);
      expect(JSON.parse(preview.stdout)).toEqual(expected);
      expect(expected.builds).toContainEqual(
        expect.objectContaining({ id: older, project_id: project.id, rule: 'count' }),
      );
      expect(expected.builds).not.toContainEqual(expect.objectContaining({ id: newer }));
      expect(table.stdout).toMatch(new RegExp(`^${older} .* count$`, 'm'));
      expect(policy.stdout).toMatch(/each project keeps its newest 1 finished builds$/m);
      expect(JSON.parse(unkept.stdout)).toMatchObject({ id: newer, keep: false });
      // The tenant's admin is not an installation administrator.
      expect(everyTenant.status).toBe(3);
    } finally {
      await kiln.app.get(Retention).setTenantPolicy(seeded.tenantA, { keepLast: null });
    }
  });

  it('changes the password and goes on with the token kiln answers, while the old one is refused', async () => {
    const own = mkdtempSync(join(tmpdir(), 'kiln-cli-developer-'));
    const env = { HOME: own };
    try {
      const email = seeded.users.developer.email;
      expect(
        (
          await run(['login', kiln.baseUrl, '--email', email, '--password-stdin'], {
            env,
            input: PASSWORD,
          })
        ).status,
      ).toBe(0);
      const file = join(own, '.config', 'kiln', 'config.json');
      const before = JSON.parse(await readFile(file, 'utf8')).token;

      const changed = await run(['password', '--password-stdin'], {
        env,
        input: `${PASSWORD}\na new long password\n`,
      });

      expect(changed.status).toBe(0);
      const after = JSON.parse(await readFile(file, 'utf8')).token;
      expect(after).not.toBe(before);
      expect((await run(['build', 'list'], { env })).status).toBe(0);
      const old = await run(['build', 'list'], { env: { ...env, KILN_TOKEN: before } });
      expect(old.status).toBe(3);
      const relogin = await run(['login', kiln.baseUrl, '--email', email, '--password-stdin'], {
        env,
        input: 'a new long password\n',
      });
      expect(relogin.status).toBe(0);
    } finally {
      await rm(own, { recursive: true, force: true });
    }
  });

  it('works in CI with only KILN_URL and an API token in KILN_TOKEN, writing no file', async () => {
    const created = await run(['token', 'create', '--name', 'ci', '-o', 'json']);
    expect(created.status).toBe(0);
    const { token } = JSON.parse(created.stdout);
    const ci = mkdtempSync(join(tmpdir(), 'kiln-cli-ci-'));
    try {
      const env = {
        HOME: ci,
        XDG_CONFIG_HOME: join(ci, 'config'),
        KILN_URL: kiln.baseUrl,
        KILN_TOKEN: token,
      };

      const whoami = await run(['whoami', '-o', 'json'], { env });
      const builds = await run(['build', 'list', '-o', 'json'], { env });

      expect(whoami.status).toBe(0);
      expect(JSON.parse(whoami.stdout)).toMatchObject({
        email: seeded.users.admin.email,
        tenant_id: seeded.tenantA,
        token: { name: 'ci', tenant_id: seeded.tenantA },
      });
      expect(builds.status).toBe(0);
      expect(JSON.parse(builds.stdout).builds.length).toBeGreaterThan(0);
      expect(existsSync(join(ci, 'config'))).toBe(false);
    } finally {
      await rm(ci, { recursive: true, force: true });
    }
  });
});
