import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { fakeBuilderBin } from './support/fake-builders.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { processesMentioning } from './support/processes.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const JWT_SECRET = 'kiln-jwt-secret-that-must-never-reach-a-build';
const ADMIN_PASSWORD = 'bootstrap-admin-password-never-in-a-build';
const LOG_CAP = 256 * 1024;
const BUILD_SECRET = 'tok-s3cr3t-value-0042';
const DATABASE_LOST = 'kiln lost its database while this build ran; retry it';
/** Names of kiln's own state: no child process may see one. */
const KILN_STATE = /^(KILN_|PG|DATABASE_URL=)/;

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return []; // it ended while we looked
  }
}

describe('the local runner keeps kiln’s secrets and internals to itself', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-hardening-');
  const bin = fakeBuilderBin();
  const saved = { ...process.env };
  let database: TestDatabase;
  let proxy: TcpProxy;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  beforeAll(async () => {
    database = await createTestDatabase();
    const real = new URL(database.url);
    proxy = await TcpProxy.start({ host: real.hostname, port: Number(real.port) });
    repo = new GitRepo();
    repo.commit('env', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
        'RUN env && sleep 2',
        '',
      ].join('\n'),
    });
    // Wizard builds check out the default branch: the buildx secret test needs a shell there.
    repo.commit('main', { busybox: { copyFrom: '/bin/busybox' } });
    const env = {
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      KILN_JWT_SECRET: JWT_SECRET,
      KILN_BOOTSTRAP_ADMIN_EMAIL: 'root@kiln.example',
      KILN_BOOTSTRAP_ADMIN_PASSWORD: ADMIN_PASSWORD,
      DATABASE_URL: proxy.proxied(database.url),
    };
    // As in production, kiln's process environment holds what its configuration was read from.
    Object.assign(process.env, env);
    kiln = await startTestApp({
      database: { url: env.DATABASE_URL, drop: () => Promise.resolve() },
      env: {
        ...env,
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOG_MAX_BYTES_PER_BUILD: String(LOG_CAP),
      },
    });
    seeded = await seedTenancy(kiln);
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      seeded.projectA,
    ]);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
  }, 60_000);

  afterAll(async () => {
    proxy.restore();
    await kiln.close();
    await proxy.stop();
    await database.drop();
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
    await rm(dataDir, { recursive: true, force: true });
    await rm(bin, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  /** The build once it is over; answers kiln gives while its database is away are skipped. */
  async function finished(id: string, timeoutMs = 30_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const response = await admin.request('GET', `/builds/${id}`);
      const build = await jsonOf(response);
      if (response.status === 200 && !['queued', 'in_progress'].includes(build.status))
        return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await sleep(200);
    }
  }

  async function messagesOf(id: string): Promise<string[]> {
    const { logs } = await jsonOf(await admin.request('GET', `/builds/${id}/logs?limit=1000`));
    return logs.map((line: { message: string }) => line.message);
  }

  async function failureReasonOf(id: string): Promise<string> {
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      id,
    ]);
    return row.failure_reason;
  }

  async function createWizardBuild(manifest: Record<string, unknown>): Promise<string> {
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    const body = await jsonOf(response);
    if (response.status !== 201) throw new Error(`create gave ${response.status}`);
    return body.data.id as string;
  }

  function packerManifest(variables: Record<string, string>): Record<string, unknown> {
    const manifest = wizardManifest('packer');
    (manifest['build_config'] as Record<string, unknown>)['variables'] = variables;
    return manifest;
  }

  async function start(id: string): Promise<void> {
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
  }

  it.each([
    ['paketo', () => wizardManifest('paketo')],
    ['packer', () => packerManifest({ mode: 'env' })],
  ])(
    'gives %s none of kiln’s variables, only the machine’s and the build’s declared ones',
    async (_method, manifest) => {
      const id = await createWizardBuild(manifest());
      await start(id);

      expect((await finished(id)).status).toBe('success');
      const messages = await messagesOf(id);
      const log = messages.join('\n');
      expect(messages).toContain('CI=true'); // manifest.environment
      expect(messages).toContain(`PATH=${process.env['PATH']}`);
      expect(messages.filter((line) => KILN_STATE.test(line))).toEqual([]);
      for (const value of [
        JWT_SECRET,
        ADMIN_PASSWORD,
        database.url,
        new URL(database.url).password,
      ])
        expect(log).not.toContain(value);
    },
  );

  it('runs buildah without kiln’s variables: neither buildah nor a RUN step sees one', async () => {
    const build = await admin.createBuild(seeded.projectA, 'env');
    await start(build.id);

    const seen = new Map<number, string[]>();
    let status = 'in_progress';
    while (status === 'in_progress') {
      for (const pid of processesMentioning(build.id)) seen.set(pid, environOf(pid));
      status = (await jsonOf(await admin.request('GET', `/builds/${build.id}`))).status;
      await sleep(50);
    }

    expect(status).toBe('success');
    expect(seen.size).toBeGreaterThan(0);
    const variables = [...seen.values()].flat();
    expect(variables).toContain('BUILDAH_ISOLATION=chroot');
    expect(variables.filter((variable) => KILN_STATE.test(variable))).toEqual([]);
    const messages = await messagesOf(build.id);
    expect(messages).toContain('HOME=/'); // the RUN step's `env`
    expect(messages.filter((line) => KILN_STATE.test(line))).toEqual([]);
  });

  it('stops a builder whose output passes four times the log cap and fails the build, saying why', async () => {
    const id = await createWizardBuild(packerManifest({ mode: 'flood' }));
    await start(id);

    const build = await finished(id);

    expect(build.status).toBe('failed');
    expect(build.error_message).toBe(
      `packer printed more than ${4 * LOG_CAP} bytes of output, so kiln stopped the build (the limit is 4 × KILN_LOG_MAX_BYTES_PER_BUILD)`,
    );
    expect(await failureReasonOf(id)).toBe('BuildFailed');
    expect(readdirSync(`${dataDir}/builds/${id}`)).not.toContain('output.spool');
  });

  it('shows the tenant an unexpected error only as a trace id, under which kiln logs the error', async () => {
    const id = await createWizardBuild(packerManifest({ mode: 'env' }));
    // The work directory cannot be made: a file stands where the builds directory should be.
    await mkdir(`${dataDir}/builds`, { recursive: true });
    await rename(`${dataDir}/builds`, `${dataDir}/builds.away`);
    await writeFile(`${dataDir}/builds`, '');
    let build: any;
    try {
      await start(id);
      build = await finished(id);
    } finally {
      await rm(`${dataDir}/builds`);
      await rename(`${dataDir}/builds.away`, `${dataDir}/builds`);
    }

    expect(build.status).toBe('failed');
    const match =
      /^the local runner failed unexpectedly; kiln's log has the details \(trace ([0-9a-f-]{36})\)$/.exec(
        build.error_message,
      );
    expect(match).not.toBeNull();
    expect(await failureReasonOf(id)).toBe('InternalError');
    expect((await messagesOf(id)).join('\n')).not.toContain(dataDir);
    const logged = kiln.logs.find((line) => line['trace_id'] === match![1]);
    expect(logged).toMatchObject({ level: 'error', build_id: id });
    expect(JSON.stringify(logged)).toContain('ENOTDIR');
  });

  it('stores a failure message that quotes a registered secret with the secret masked', async () => {
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: `FROM scratch\nRUN ["/opt/${BUILD_SECRET}"]\n`,
      platforms: ['linux/amd64'],
      secrets: { API_TOKEN: BUILD_SECRET },
    });
    const id = await createWizardBuild(manifest);
    await start(id);

    const build = await finished(id);

    expect(build.status).toBe('failed');
    expect(build.error_message).toMatch(/building at STEP "RUN \/opt\/\*\*\*"/);
    expect(build.error_message).not.toContain(BUILD_SECRET);
    expect((await messagesOf(id)).join('\n')).not.toContain(BUILD_SECRET);
  });

  it('mounts a buildx secret as a secret file of the build, never a build arg, and masks it when printed', async () => {
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
        'RUN --mount=type=secret,id=API_TOKEN echo "token=$(cat /run/secrets/API_TOKEN)"',
        'RUN test ! -e /run/secrets/API_TOKEN && echo "not in the image"',
        '',
      ].join('\n'),
      platforms: ['linux/amd64'],
      secrets: { API_TOKEN: BUILD_SECRET },
    });
    const id = await createWizardBuild(manifest);
    await start(id);

    const build = await finished(id);
    const messages = (await messagesOf(id)).join('\n');

    expect({ status: build.status, error: build.error_message }).toEqual({
      status: 'success',
      error: null,
    });
    // Printed by the RUN step: the value reached the build, and the log holds it masked.
    expect(messages).toContain('token=***');
    expect(messages).toContain('not in the image');
    expect(messages).not.toContain(BUILD_SECRET);
    // Nothing of it stays on disk once the build is over.
    expect(existsSync(join(dataDir, 'builds', id, 'run'))).toBe(false);
  });

  it('runs a build whose database goes away as it begins, holding its lines until the database is back', async () => {
    const id = await createWizardBuild(packerManifest({ mode: 'env' }));
    // The runner reads nothing but the spec it was handed: its first database write is the
    // build's first log line, and the database goes away right then.
    const tripped = proxy.cutWhenClientSends('INTO build_logs');
    await admin.request('POST', `/builds/${id}/start`);
    await tripped;
    await sleep(1_500);
    proxy.restore();

    const build = await finished(id);

    expect(build).toMatchObject({ status: 'success', error_message: null });
    const messages = await messagesOf(id);
    expect(messages[0]).toMatch(/^\[kiln\] running on linux\/\S+ with the local runner$/);
    expect(messages).not.toContain(`ERROR: [kiln] ${DATABASE_LOST}`);
  });

  it('records the outcome of a build that ends while the database is briefly away', async () => {
    const id = await createWizardBuild(packerManifest({ mode: 'pause', seconds: '3' }));
    await start(id);
    const deadline = Date.now() + 20_000;
    while (!(await messagesOf(id)).includes('building')) {
      if (Date.now() > deadline) throw new Error('the builder never started');
      await sleep(100);
    }
    const before = await jsonOf(await admin.request('GET', `/builds/${id}`));

    proxy.cut(); // the builder is asleep: it ends, and the build with it, while this lasts
    await sleep(5_000);
    proxy.restore();

    expect(before.status).toBe('in_progress');
    expect(await finished(id)).toMatchObject({ status: 'success', error_message: null });
  });
});
