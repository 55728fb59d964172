import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { statementProblems } from './support/provenance.js';
import { LocalRegistry } from './support/registry.js';
import { processesMentioning } from './support/processes.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const BUSYBOX_DOCKERFILE = [
  'FROM scratch',
  'COPY busybox /bin/busybox',
  'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
  'RUN echo "hello from kiln" > /greeting && cat /greeting',
  '',
].join('\n');

function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
}

describe('the local runner (real buildah, real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-local-');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let token: string;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('main', {
      'hello.txt': 'hello\n',
      Dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
    });
    repo.commit('busybox', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: BUSYBOX_DOCKERFILE,
    });
    repo.commit('broken', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: BUSYBOX_DOCKERFILE.replace('cat /greeting', 'cat /missing-file'),
    });
    repo.commit('slow', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: BUSYBOX_DOCKERFILE.replace('cat /greeting', 'echo sleeping && sleep 120'),
    });
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
    await kiln.dataSource.query(
      'UPDATE projects SET git_repository_url = $1, name = $2 WHERE id = $3',
      [repo.url, 'web', seeded.projectA],
    );
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  }, 60_000);

  afterAll(async () => {
    await kiln.close();
    await registry.stop();
    await rm(dataDir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  async function finished(id: string, timeoutMs = 60_000): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  async function startBuild(branch: string): Promise<string> {
    const build = await admin.createBuild(seeded.projectA, branch);
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    return build.id as string;
  }

  const logsOf = async (id: string) =>
    (await jsonOf(await admin.request('GET', `/builds/${id}/logs?limit=1000`))).logs;

  it('builds a FROM scratch + COPY image from the repository and pushes it to the registry', async () => {
    const id = await startBuild('main');

    const build = await finished(id);

    expect(build).toMatchObject({
      status: 'success',
      error_message: null,
      completed_at: expect.any(String),
    });
    expect(await registry.tags('kiln/web')).toContain(String(build.build_number));
    const messages = (await logsOf(id)).map((l: any) => l.message);
    expect(messages).toEqual(
      expect.arrayContaining([expect.stringMatching(/^STEP 1\/2: FROM scratch/)]),
    );
    expect(messages).toContain(`[kiln] pushed ${registry.address}/kiln/web:${build.build_number}`);
  });

  it('runs RUN steps on a busybox base, stores every line with its step, and reports progress 100', async () => {
    const build = await admin.createBuild(seeded.projectA, 'busybox');
    const stream = new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${build.id}/logs/stream`,
      {
        headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA },
      },
    );
    await stream.opened;
    await admin.request('POST', `/builds/${build.id}/start`);

    const done = await finished(build.id);
    const closed = await stream.closed;

    expect(done.status).toBe('success');
    const logs = await logsOf(build.id);
    expect(logs.map((l: any) => l.message)).toContain('hello from kiln');
    expect(logs.find((l: any) => l.message.startsWith('STEP 4/4'))?.metadata).toMatchObject({
      step: '4/4',
      container: 'build',
    });
    const status = await jsonOf(await admin.request('GET', `/builds/${build.id}/status`));
    expect(status.progress).toEqual({ current_step: 4, total_steps: 4, percentage: 100 });
    expect(closed).toEqual({ code: 1000, reason: 'success' });
    expect(stream.messages.map((m) => m.seq)).toEqual(logs.map((_: unknown, i: number) => i));
  });

  it('fails a build whose RUN step fails, naming the step, and succeeds on retry once the input is fixed', async () => {
    const id = await startBuild('broken');

    const failed = await finished(id);

    expect(failed.status).toBe('failed');
    expect(failed.error_message).toMatch(/STEP|cat \/missing-file|exit status/);
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      id,
    ]);
    expect(row.failure_reason).toBe('BuildFailed');

    repo.commit('broken', { Dockerfile: BUSYBOX_DOCKERFILE });
    const retried = await jsonOf(await admin.request('POST', `/builds/${id}/retry`));
    await admin.request('POST', `/builds/${retried.id}/start`);
    expect((await finished(retried.id)).status).toBe('success');
  });

  it('cancels a long RUN within seconds, leaving no process and keeping the logs up to the cancel', async () => {
    const id = await startBuild('slow');
    const deadline = Date.now() + 30_000;
    while (!(await logsOf(id)).some((l: any) => l.message === 'sleeping')) {
      if (Date.now() > deadline) throw new Error('the build never reached its sleep');
      await new Promise((done) => setTimeout(done, 200));
    }
    expect(processesMentioning(id).length).toBeGreaterThan(0);

    const cancelled = await admin.request('POST', `/builds/${id}/cancel`, { reason: 'too slow' });

    expect(cancelled.status).toBe(200);
    // The RUN sleeps 120 s: a build that waited for it would not have ended within finished's 60 s.
    expect((await finished(id, 60_000)).status).toBe('cancelled');
    expect(processesMentioning(id)).toEqual([]);
    expect((await logsOf(id)).map((l: any) => l.message)).toContain('sleeping');
    expect(readdirSync(`${dataDir}/builds/${id}`)).not.toContain('source');
  });

  it("fails a build that outlives its spec's timeout as TimedOut, stopping it and keeping its log", async () => {
    const build = await admin.createBuild(seeded.projectA, 'slow');
    // The timeout is captured in the spec at create (KILN_BUILD_TIMEOUT_SECONDS): shorten it.
    await kiln.dataSource.query(
      `UPDATE builds SET spec = jsonb_set(spec, '{timeoutSeconds}', '5') WHERE id = $1`,
      [build.id],
    );
    await admin.request('POST', `/builds/${build.id}/start`);

    const ended = await finished(build.id);

    expect(ended.status).toBe('failed');
    expect(ended.error_message).toMatch(/ran longer than its timeout of 5 s/);
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      build.id,
    ]);
    expect(row.failure_reason).toBe('TimedOut');
    expect(processesMentioning(build.id)).toEqual([]);
    expect((await logsOf(build.id)).map((l: any) => l.message)).toContain('sleeping');
  });

  const missingTools = (['paketo', 'packer'] as const).filter(
    (type) => !onPath(type === 'paketo' ? 'pack' : 'packer'),
  );
  const packerOnPath = onPath('packer');
  // Skipped tests show only as a count unless jest is verbose: say once, loudly, what is not run.
  if (!packerOnPath)
    console.warn('local-runner.spec: skipping the packer build: needs `packer` on PATH');
  if (missingTools.length === 0) {
    console.warn(
      'local-runner.spec: skipping the missing-CLI failure: `pack` and `packer` are both on PATH',
    );
  }

  (packerOnPath ? it : it.skip)(
    `runs a JSON packer template (validate, then build) when packer is installed, keeping what its manifest lists${
      packerOnPath ? '' : ' (skipped: needs `packer` on PATH)'
    }`,
    async () => {
      const manifest = wizardManifest('packer');
      (manifest['build_config'] as Record<string, unknown>)['packer_template'] = JSON.stringify({
        builders: [
          { type: 'null', communicator: 'none' },
          { type: 'file', name: 'greeting', target: 'greeting.txt', content: 'hello' },
        ],
        provisioners: [{ type: 'shell-local', inline: ['echo built-by-packer'] }],
        'post-processors': [{ type: 'manifest', output: 'build-manifest.json' }],
      });
      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });
      const { data } = await jsonOf(response);
      await admin.request('POST', `/builds/${data.id}/start`);

      const build = await finished(data.id);

      // What packer made is what its signed provenance names (nothing to attach it to).
      expect(build).toMatchObject({ status: 'success', provenance: 'stored-only' });
      const { statement } = await jsonOf(
        await admin.request('GET', `/builds/${data.id}/provenance`),
      );
      expect(statementProblems(statement)).toEqual([]);
      const digest = statement.subject[0].digest.sha256 as string;
      const packer = { manifestDigest: `sha256:${digest}`, artifacts: statement.subject };
      const messages = (await logsOf(data.id)).map((l: any) => l.message);
      expect(messages.join('\n')).toContain('built-by-packer');
      // packer runs the two builds at once: their order in the manifest is the order they ended.
      expect(packer.artifacts).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ name: 'null:Null', digest: { sha256: digest } }),
          expect.objectContaining({ name: 'file:File', digest: { sha256: digest } }),
        ]),
      );
      expect(packer.artifacts).toHaveLength(2);
      expect(packer.manifestDigest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(messages).toContain(
        `[kiln] packer's manifest build-manifest.json names 2 artifacts (${packer?.manifestDigest})`,
      );
    },
  );

  (missingTools.length > 0 ? it.each(missingTools) : it.skip.each(['paketo'] as const))(
    `fails a %s build without its CLI, saying what is missing${
      missingTools.length > 0 ? '' : ' (skipped: `pack` and `packer` are both on PATH)'
    }`,
    async (type) => {
      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest: wizardManifest(type),
      });
      const { data } = await jsonOf(response);
      await admin.request('POST', `/builds/${data.id}/start`);

      const build = await finished(data.id);

      expect(build.status).toBe('failed');
      expect(build.error_message).toMatch(
        new RegExp(`${type === 'paketo' ? 'pack' : 'packer'}.*not installed.*Kubernetes runner`),
      );
      const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
        data.id,
      ]);
      expect(row.failure_reason).toBe('InvalidSpec');
    },
  );

  it('deletes the local image of a deleted build', async () => {
    const id = await startBuild('main');
    await finished(id);
    expect(readdirSync(`${dataDir}/builds`)).toContain(id);

    expect((await admin.request('DELETE', `/builds/${id}`)).status).toBe(204);

    expect(readdirSync(`${dataDir}/builds`)).not.toContain(id);
  });

  describe('with one build slot', () => {
    let single: TestApp;
    let client: ApiClient;
    let projectId: string;

    beforeAll(async () => {
      single = await startTestApp({
        env: {
          KILN_RUNNER: 'local',
          KILN_DATA_DIR: `${dataDir}/single`,
          KILN_LOCAL_MAX_PARALLEL: '1',
          KILN_CANCEL_GRACE_SECONDS: '1',
        },
      });
      const s = await seedTenancy(single);
      projectId = s.projectA;
      await single.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
        repo.url,
        projectId,
      ]);
      client = new ApiClient(
        single,
        await tokenFor(single.baseUrl, s.users.admin.email),
        s.tenantA,
      );
    });

    afterAll(async () => {
      await single.close();
    });

    it('makes a second started build wait, in progress with its place in the queue and a log line saying so, until the first ends', async () => {
      const first = await client.createBuild(projectId, 'slow');
      await client.request('POST', `/builds/${first.id}/start`);
      const second = await client.createBuild(projectId, 'main');
      await client.request('POST', `/builds/${second.id}/start`);

      const logsOfSecond = async () =>
        (await jsonOf(await client.request('GET', `/builds/${second.id}/logs`))).logs.map(
          (l: any) => l.message,
        );
      let logs: string[] = [];
      for (let i = 0; i < 100 && logs.length === 0; i++) {
        await new Promise((done) => setTimeout(done, 50));
        logs = await logsOfSecond();
      }
      const waiting = await jsonOf(await client.request('GET', `/builds/${second.id}/status`));
      // KILN_LOCAL_MAX_PARALLEL is the installation's limit with the local runner.
      expect(waiting).toMatchObject({
        status: 'in_progress',
        progress: null,
        queue: { position: 1, reason: 'InstallationLimit' },
      });
      expect(logs).toEqual([
        '[kiln] waiting to run: all 1 build slots of this installation are in use (1st in line)',
      ]);

      await client.request('POST', `/builds/${first.id}/cancel`);
      const deadline = Date.now() + 60_000;
      let status = 'in_progress';
      while (status === 'in_progress' && Date.now() < deadline) {
        await new Promise((done) => setTimeout(done, 200));
        status = (await jsonOf(await client.request('GET', `/builds/${second.id}`))).status;
      }
      expect(status).toBe('success');
    });
  });

  it('fails builds a previous kiln process left running, on start', async () => {
    const orphan = await admin.createBuild(seeded.projectA, 'orphan');
    await kiln.dataSource.query(
      `UPDATE builds SET status = 'in_progress', started_at = now(), runner_ref = 'local:999999' WHERE id = $1`,
      [orphan.id],
    );

    const restarted = await startTestApp({
      database: {
        url: (kiln.dataSource.options as { url: string }).url,
        drop: () => Promise.resolve(),
      },
      env: { KILN_RUNNER: 'local', KILN_DATA_DIR: `${dataDir}/restarted` },
    });
    await restarted.close();

    const build = await jsonOf(await admin.request('GET', `/builds/${orphan.id}`));
    expect(build).toMatchObject({
      status: 'failed',
      error_message: 'kiln restarted while this build ran; retry it',
    });
  });
});
