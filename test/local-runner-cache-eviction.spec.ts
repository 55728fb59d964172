import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { ProjectsService } from '../src/projects/projects.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { cacheDirOf, imagesIn } from './support/layer-cache.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * KILN_LOCAL_CACHE_MAX_BYTES=1: any two caches are over the bound, so after each build every
 * cache but the one just used goes (the newest is kept even alone over the bound).
 */
describe('the local runner’s layer caches past KILN_LOCAL_CACHE_MAX_BYTES', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-cache-evict-');
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let otherProject: string;

  beforeAll(async () => {
    repo = new GitRepo();
    repo.commit('main', {
      busybox: { copyFrom: '/bin/busybox' },
      Dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
        'RUN echo cached > /m',
        '',
      ].join('\n'),
    });
    kiln = await startTestApp({
      env: { KILN_RUNNER: 'local', KILN_DATA_DIR: dataDir, KILN_LOCAL_CACHE_MAX_BYTES: '1' },
    });
    seeded = await seedTenancy(kiln);
    otherProject = (
      await kiln.app
        .get(ProjectsService)
        .create(seeded.tenantA, 'api', 'https://git.example.com/a/api.git')
    ).id;
    await kiln.dataSource.query(
      'UPDATE projects SET git_repository_url = $1 WHERE id IN ($2, $3)',
      [repo.url, seeded.projectA, otherProject],
    );
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
  }, 60_000);

  afterAll(async () => {
    await kiln.close();
    await rm(dataDir, { recursive: true, force: true });
    await rm(repo.dir, { recursive: true, force: true });
  });

  async function built(projectId: string): Promise<void> {
    const created = await admin.createBuild(projectId, 'main');
    expect((await admin.request('POST', `/builds/${created.id}/start`)).status).toBe(200);
    const deadline = Date.now() + 120_000;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${created.id}`));
      if (build.status === 'success') return;
      if (!['queued', 'in_progress'].includes(build.status))
        throw new Error(`build ${created.id} ${build.status}: ${build.error_message}`);
      if (Date.now() > deadline) throw new Error(`build ${created.id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  /** Waits until the cache directory is gone (eviction runs after the build is recorded). */
  async function gone(dir: string): Promise<boolean> {
    const deadline = Date.now() + 30_000;
    while (existsSync(dir)) {
      if (Date.now() > deadline) return false;
      await new Promise((done) => setTimeout(done, 100));
    }
    return true;
  }

  it('evicts the least recently used project’s cache, whole, and keeps the one just used', async () => {
    const first = cacheDirOf(dataDir, seeded.tenantA, seeded.projectA);
    const second = cacheDirOf(dataDir, seeded.tenantA, otherProject);
    await built(seeded.projectA);
    expect(imagesIn(first)).not.toEqual([]);

    await built(otherProject);

    expect(await gone(first)).toBe(true);
    expect(imagesIn(second)).not.toEqual([]);

    // Used again, the first project's cache is the newest: now the other one goes.
    await built(seeded.projectA);

    expect(await gone(second)).toBe(true);
    expect(imagesIn(first)).not.toEqual([]);
  }, 300_000);
});
