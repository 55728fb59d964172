import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { type Delivery, pushPayload, signedDelivery } from './support/git-providers.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The `kiln` HTTP CLI as `make build` compiles it (scripts/build-cli.sh). */
const CLI = join(__dirname, '..', 'dist', 'cli', 'http', 'kiln.js');
const PUBLIC_URL = 'https://kiln.example.com';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

const sha = (): string => randomBytes(20).toString('hex');

/**
 * `kiln trigger …` end to end: the compiled CLI against a real kiln, and webhook deliveries
 * signed with the secret the CLI printed, as a git host would send them.
 */
describe('kiln trigger (the compiled CLI against a real kiln)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let token: string;
  const home = mkdtempSync(join(tmpdir(), 'kiln-cli-triggers-'));

  /** Runs `kiln` as a CI job would: KILN_URL, KILN_TOKEN and KILN_TENANT, no file. */
  function run(args: string[], input?: string): Promise<Run> {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: home,
        KILN_URL: kiln.baseUrl,
        KILN_TOKEN: token,
        KILN_TENANT: seeded.tenantA,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return new Promise((done) => child.on('close', (status) => done({ status, stdout, stderr })));
  }

  async function json(args: string[]): Promise<any> {
    const result = await run([...args, '-o', 'json']);
    if (result.status !== 0) throw new Error(`kiln ${args.join(' ')}: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  /**
   * POSTs a delivery to the webhook URL kiln gave. The test server listens on a random port, so
   * KILN_PUBLIC_URL names a host of its own: the URL's path is sent to the test server.
   */
  function deliver(webhookUrl: string, delivery: Delivery): Promise<Response> {
    return fetch(new URL(new URL(webhookUrl).pathname, kiln.baseUrl), {
      method: 'POST',
      headers: delivery.headers,
      body: new Uint8Array(delivery.body),
    });
  }

  function push(secret: string, after: string, files: string[]): Delivery {
    const payload = pushPayload('github', {
      ref: 'refs/heads/main',
      after,
      pusher: 'ada',
      author: { name: 'Ada Lovelace', email: 'ada@example.com' },
      files: [{ modified: files }],
    });
    return signedDelivery('github', secret, 'push', payload);
  }

  /** `kiln trigger deliveries` once no delivery is pending any more. */
  async function settledDeliveries(id: string): Promise<Array<Record<string, any>>> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const { deliveries } = await json(['trigger', 'deliveries', id]);
      if (deliveries.every((d: { outcome: string }) => d.outcome !== 'pending')) return deliveries;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('deliveries stayed pending');
  }

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_PUBLIC_URL: PUBLIC_URL, KILN_TRIGGER_WORK_INTERVAL_MS: '200' },
    });
    seeded = await seedTenancy(kiln);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  });

  afterAll(async () => {
    await kiln?.close();
    await rm(home, { recursive: true, force: true });
  });

  /** The trigger the lifecycle tests below share, as `kiln trigger create` printed it. */
  let trigger: { id: string; secret: string; webhookUrl: string };

  it('creates a trigger from its options and prints its secret once, beside its webhook URL', async () => {
    const created = await run([
      'trigger',
      'create',
      '--project',
      'web',
      '--name',
      'main-pushes',
      '--provider',
      'github',
      '--event',
      'push',
      '--event',
      'tag',
      '--branch',
      'main',
      '--branch',
      'release/*',
      '--tag',
      'v*',
      '--path',
      'services/api/**',
      '--build-arg',
      'VERSION=1.2',
      '--concurrency',
      'latest-only',
      '--status-api',
      'https://api.github.com',
      '--status-repo',
      'acme/web',
      '--status-token',
      'vault:kv/data/ci/github#token',
    ]);

    expect(created.status).toBe(0);
    const id = /created trigger main-pushes \(([0-9a-f-]{36})\) in project web/.exec(
      created.stderr,
    )![1]!;
    expect(created.stderr).toMatch(/the secret is shown only now: .* never shows it again/);
    const webhookUrl = `${PUBLIC_URL}/api/v1/hooks/${id}`;
    expect(created.stdout).toMatch(new RegExp(`^Webhook URL: ${webhookUrl}$`, 'm'));
    const secret = /^Secret: +(\S+)$/m.exec(created.stdout)![1]!;
    expect(secret).toMatch(/^whsec_/);
    trigger = { id, secret, webhookUrl };

    const shown = await json(['trigger', 'show', id]);
    expect(shown).toEqual(
      expect.objectContaining({
        id,
        project_id: seeded.projectA,
        name: 'main-pushes',
        provider: 'github',
        events: ['push', 'tag'],
        branches: ['main', 'release/*'],
        tags: ['v*'],
        paths: ['services/api/**'],
        build: { form: 'reference', build_args: { VERSION: '1.2' } },
        start: true,
        concurrency: 'latest-only',
        poll_interval_seconds: null,
        status: {
          api_url: 'https://api.github.com',
          repository: 'acme/web',
          token: 'vault:kv/data/ci/github#token',
          context: 'kiln',
        },
        enabled: true,
        webhook_url: webhookUrl,
      }),
    );
    expect(shown).not.toHaveProperty('secret');
  });

  it('shows a trigger and lists the project’s triggers for people, never with the secret', async () => {
    const shown = await run(['trigger', 'show', trigger.id]);
    const listed = await run(['trigger', 'list', '--project', 'web']);

    expect(shown.status).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`^Webhook URL: +${trigger.webhookUrl}$`, 'm'));
    expect(shown.stdout).toMatch(/^Branches: +main, release\/\*$/m);
    expect(shown.stdout).toMatch(/^Builds: +the reference form, VERSION=1\.2$/m);
    expect(shown.stdout).toMatch(
      /^Statuses: +kiln on acme\/web at https:\/\/api\.github\.com, token vault:kv\/data\/ci\/github#token$/m,
    );
    expect(listed.status).toBe(0);
    expect(listed.stdout).toMatch(
      new RegExp(
        `^${trigger.id} +main-pushes +github +push,tag +main,release/\\* +latest-only +- +yes$`,
        'm',
      ),
    );
    for (const { stdout } of [shown, listed]) expect(stdout).not.toContain(trigger.secret);
  });

  it('lists a push signed with the printed secret as built, with its build', async () => {
    const after = sha();

    const response = await deliver(
      trigger.webhookUrl,
      push(trigger.secret, after, ['services/api/main.go']),
    );

    expect(response.status).toBe(202);
    const [delivery] = await settledDeliveries(trigger.id);
    expect(delivery).toMatchObject({
      event: 'push',
      ref: 'refs/heads/main',
      commit: after,
      pusher: 'ada',
      outcome: 'built',
      build_id: expect.any(String),
    });
    const build = await jsonOf(await admin.request('GET', `/builds/${delivery!['build_id']}`));
    expect(build).toMatchObject({
      git_commit: after,
      trigger: { id: trigger.id, event: 'push', pusher: 'ada' },
    });
    const table = await run(['trigger', 'deliveries', trigger.id]);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^RECEIVED +EVENT +REF +COMMIT +PUSHER +OUTCOME +BUILD +DETAIL$/m);
    expect(table.stdout).toMatch(
      new RegExp(
        `push +refs/heads/main +${after.slice(0, 12)} +ada +built +${delivery!['build_id']}`,
      ),
    );
  });

  it('lists a push the path filter passes by as filtered, with the reason, and builds nothing', async () => {
    const response = await deliver(trigger.webhookUrl, push(trigger.secret, sha(), ['docs/a.md']));

    expect(response.status).toBe(202);
    const [delivery] = await settledDeliveries(trigger.id);
    expect(delivery).toMatchObject({ outcome: 'filtered', build_id: null });
    expect(delivery!['detail']).toMatch(/^no changed file matches .*services\/api\/\*\*/);
  });

  it('changes what is given, keeping the rest of the commit status target', async () => {
    const updated = await json([
      'trigger',
      'update',
      trigger.id,
      '--status-context',
      'kiln/web',
      '--branch',
      'main',
      '--concurrency',
      'serial',
      '--disabled',
    ]);

    expect(updated).toMatchObject({
      branches: ['main'],
      tags: ['v*'],
      concurrency: 'serial',
      enabled: false,
      status: {
        api_url: 'https://api.github.com',
        repository: 'acme/web',
        token: 'vault:kv/data/ci/github#token',
        context: 'kiln/web',
      },
    });
    const enabled = await json(['trigger', 'update', trigger.id, '--enabled', '--no-status']);
    expect(enabled).toMatchObject({ enabled: true, status: null, concurrency: 'serial' });
  });

  it('rotates the secret: the new one is printed once, and the old one is refused', async () => {
    const rotated = await run(['trigger', 'rotate-secret', trigger.id]);

    expect(rotated.status).toBe(0);
    expect(rotated.stderr).toMatch(/the secret is shown only now/);
    const secret = /^Secret: +(\S+)$/m.exec(rotated.stdout)![1]!;
    expect(secret).not.toBe(trigger.secret);
    const files = ['services/api/main.go'];
    expect((await deliver(trigger.webhookUrl, push(trigger.secret, sha(), files))).status).toBe(
      401,
    );
    expect((await deliver(trigger.webhookUrl, push(secret, sha(), files))).status).toBe(202);
    const [delivery] = await settledDeliveries(trigger.id);
    expect(delivery).toMatchObject({ outcome: 'built' });
    trigger = { ...trigger, secret };
  });

  it('deletes the trigger; kiln then knows it no more and refuses its webhook', async () => {
    const deleted = await run(['trigger', 'delete', trigger.id]);
    const shown = await run(['trigger', 'show', trigger.id]);

    expect(deleted).toMatchObject({ status: 0, stderr: `deleted trigger ${trigger.id}\n` });
    expect(shown.status).toBe(3);
    expect(shown.stderr).toMatch(/^kiln: .*not found/im);
    expect(await json(['trigger', 'list', '--project', 'web'])).toEqual({ triggers: [] });
    const files = ['services/api/main.go'];
    expect((await deliver(trigger.webhookUrl, push(trigger.secret, sha(), files))).status).toBe(
      401,
    );
  });

  it('prints the API’s error and each field it names, and exits 3, for a trigger kiln refuses', async () => {
    const refused = await run([
      'trigger',
      'create',
      '-p',
      'web',
      '--name',
      'bad',
      '--provider',
      'gitlab',
      '--branch',
      '[unclosed',
      '--concurrency',
      'serial',
      '--no-start',
    ]);
    const tooOften = await run([
      'trigger',
      'create',
      '-p',
      'web',
      '--name',
      'bad',
      '--provider',
      'gitlab',
      '--poll',
      '30',
    ]);

    expect(refused).toMatchObject({ status: 3, stdout: '' });
    expect(refused.stderr).toMatch(/^kiln: Invalid trigger/);
    expect(refused.stderr).toMatch(/^ {2}branches: "\[unclosed": \S/m);
    expect(refused.stderr).toMatch(/^ {2}concurrency: serial needs start: true/m);
    expect(tooOften).toMatchObject({ status: 3, stdout: '' });
    expect(tooOften.stderr).toMatch(/^ {2}poll_interval_seconds: .* less than 60$/m);
    for (const { stderr } of [refused, tooOften]) expect(stderr).not.toMatch(/^\s+at /m);
    expect(await json(['trigger', 'list', '--project', 'web'])).toEqual({ triggers: [] });
  });

  it('refuses a trigger whose manifest kiln cannot build, naming the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-cli-trigger-manifest-'));
    const manifest = join(dir, 'manifest.yaml');
    writeFileSync(manifest, 'name: web\ntype: kaniko\nbuild_config:\n  build_type: kaniko\n');
    try {
      const refused = await run([
        'trigger',
        'create',
        '-p',
        'web',
        '--name',
        'from-manifest',
        '--provider',
        'gitea',
        '--manifest',
        manifest,
      ]);

      expect(refused.status).toBe(3);
      expect(refused.stderr).toMatch(/^ {2}build\.manifest\.\S+: /m);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [['trigger', 'create', '-p', 'web', '--name', 'x', '--provider', 'svn'], /Allowed choices/],
    [
      ['trigger', 'create', '-p', 'web', '--name', 'x', '--provider', 'github', '--event', 'merge'],
      /Allowed choices are push, tag, pull_request/,
    ],
    [['trigger', 'create', '-p', 'web', '--name', 'x'], /required option '--provider/],
    [
      [
        'trigger',
        'create',
        '-p',
        'web',
        '--name',
        'x',
        '--provider',
        'github',
        '--status-api',
        'https://api.github.com',
      ],
      /--status-api, --status-repo and --status-token \(missing: --status-repo, --status-token\)/,
    ],
    [
      ['trigger', 'create', '-p', 'nope', '--name', 'x', '--provider', 'github'],
      /the tenant has no project named nope/,
    ],
    [['trigger', 'update', '00000000-0000-4000-8000-000000000000'], /nothing to change/],
  ])('prints the usage problem and exits 64 for `kiln %j`', async (args, message) => {
    const result = await run(args);

    expect(result.status).toBe(64);
    expect(result.stderr).toMatch(message);
  });
});
