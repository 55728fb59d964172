import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { TriggerWorker } from '../src/triggers/trigger-worker.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { type BareRepository, GitDaemon } from './support/git-daemon.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { LocalRegistry } from './support/registry.js';
import { scrape, sumOf } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const DOCKERFILE = 'FROM scratch\nCOPY hello.txt /hello.txt\n';

/**
 * Polling, end to end: a real git daemon that real pushes change, kiln's `git ls-remote` of it, and
 * the local runner (real git clone, real buildah, a real registry) building the polled commit.
 */
describe('builds from polled repositories', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-poll-');
  let registry: LocalRegistry;
  let daemon: GitDaemon;
  let remote: BareRepository;
  let work: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let trigger: { id: string };

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    daemon = new GitDaemon();
    await daemon.start();
    remote = daemon.bareRepository('web.git');
    work = new GitRepo();
    remote.pushCommit(work, 'main', { 'hello.txt': 'first\n', Dockerfile: DOCKERFILE });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        // Passes run when the test asks (runPass), not on their own between its steps.
        KILN_TRIGGER_WORK_INTERVAL_MS: '300000',
        KILN_POLL_TIMEOUT_SECONDS: '10',
      },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const patched = await admin.request('PATCH', `/projects/${seeded.projectA}`, {
      name: 'web',
      git_repository_url: remote.url,
    });
    expect(patched.status).toBe(200);
    const created = await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
      name: 'poller',
      provider: 'gitea',
      events: ['push', 'tag'],
      branches: ['main'],
      tags: ['v*'],
      poll_interval_seconds: 60,
    });
    expect(created.status).toBe(201);
    trigger = (await created.json()) as { id: string };
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await registry?.stop();
    await daemon?.remove();
    await rm(dataDir, { recursive: true, force: true });
    if (work !== undefined) await rm(work.dir, { recursive: true, force: true });
  });

  /** Makes the trigger due now and runs one pass of the trigger work, as the schedule would. */
  async function poll(): Promise<void> {
    await kiln.dataSource.query('UPDATE triggers SET next_poll_at = now() WHERE id = $1', [
      trigger.id,
    ]);
    await kiln.app.get(TriggerWorker).runPass();
  }

  async function deliveries(): Promise<Array<Record<string, any>>> {
    return (await jsonOf(await admin.request('GET', `/triggers/${trigger.id}/deliveries`)))
      .deliveries;
  }

  async function finished(id: string): Promise<Record<string, any>> {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  it('records the refs at the first poll and builds nothing', async () => {
    await poll();

    expect(await deliveries()).toEqual([]);
    const read = await jsonOf(await admin.request('GET', `/triggers/${trigger.id}`));
    expect(read.poll_error).toBeNull();
  });

  it('builds a pushed commit at the next poll: cloned, built and pushed for real', async () => {
    const commit = remote.pushCommit(work, 'main', { 'hello.txt': 'second\n' });

    await poll();

    const [delivery] = await deliveries();
    expect(delivery).toMatchObject({
      delivery_id: `poll:refs/heads/main:${commit}`,
      event: 'push',
      commit,
      outcome: 'built',
    });
    const build = await finished(delivery!.build_id);
    expect(build).toMatchObject({
      status: 'success',
      git_branch: 'main',
      git_commit: commit,
      trigger: { id: trigger.id, event: 'push', pusher: null },
    });
    expect(await registry.tags('kiln/web')).toContain(String(build.build_number));
  }, 120_000);

  it('builds one build of the last commit when several pushes come between two polls', async () => {
    remote.pushCommit(work, 'main', { 'hello.txt': 'third\n' });
    remote.pushCommit(work, 'main', { 'hello.txt': 'fourth\n' });
    const last = remote.pushCommit(work, 'main', { 'hello.txt': 'fifth\n' });
    const before = (await deliveries()).length;

    await poll();

    const now = await deliveries();
    expect(now.length - before).toBe(1);
    expect(now[0]).toMatchObject({ commit: last, outcome: 'built' });
    expect((await finished(now[0]!.build_id)).status).toBe('success');
  }, 120_000);

  it('builds a new tag matching its patterns at the tag, and passes another by', async () => {
    const commit = remote.commitOf('refs/heads/main');
    remote.pushTag(work, 'v1.0.0', commit, { annotated: true });
    remote.pushTag(work, 'nightly', commit);

    await poll();

    const recent = await deliveries();
    const tagged = recent.find((d) => d.ref === 'refs/tags/v1.0.0');
    expect(tagged).toMatchObject({ event: 'tag', commit, outcome: 'built' });
    expect(recent.find((d) => d.ref === 'refs/tags/nightly')).toMatchObject({
      outcome: 'filtered',
    });
    const build = await finished(tagged!.build_id);
    expect(build).toMatchObject({
      status: 'success',
      error_message: null,
      git_branch: 'v1.0.0',
      git_commit: commit,
    });
  }, 120_000);

  it('records why a poll failed, builds nothing, and catches up once the repository is back', async () => {
    await daemon.stop();
    const before = (await deliveries()).length;
    try {
      await poll();
      const failed = await jsonOf(await admin.request('GET', `/triggers/${trigger.id}`));
      expect(failed.poll_error).toMatch(
        /listing the refs of git:\/\/127\.0\.0\.1:\d+\/web\.git failed/,
      );
      expect((await deliveries()).length).toBe(before);
      const metrics = await scrape(`${kiln.baseUrl}/metrics`);
      expect(sumOf(metrics, 'kiln_trigger_polls_total', { result: 'error' })).toBe(1);
      expect(sumOf(metrics, 'kiln_trigger_polls_total', { result: 'success' })).toBeGreaterThan(2);
    } finally {
      await daemon.start();
    }
    const missed = remote.pushCommit(work, 'main', { 'hello.txt': 'while away\n' });

    await poll();

    const healed = await jsonOf(await admin.request('GET', `/triggers/${trigger.id}`));
    expect(healed.poll_error).toBeNull();
    const [latest] = await deliveries();
    expect(latest).toMatchObject({ commit: missed, outcome: 'built' });
    expect((await finished(latest!.build_id)).status).toBe('success');
  }, 120_000);
});
