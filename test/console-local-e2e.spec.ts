import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { TestBrowser, eventually, screenshot, submitSignIn, text } from './support/browser.js';
import { ApiClient } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { LocalRegistry } from './support/registry.js';
import { type TestApp, startTestApp } from './support/test-app.js';

/** A FROM scratch image that runs a step printing a line (busybox from the host, no pull). */
const DOCKERFILE = [
  'FROM scratch',
  'COPY busybox /bin/busybox',
  'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
  'RUN echo "hello from kiln" > /greeting && cat /greeting',
  '',
].join('\n');

/**
 * The console with the real local runner: a build started with a click runs in buildah, its
 * output arrives in the browser live, and the image lands in a real registry.
 */
describe('the console with the local runner (real buildah, real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-console-local-');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let browser: TestBrowser;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    repo.commit('main', { busybox: { copyFrom: '/bin/busybox' }, Dockerfile: DOCKERFILE });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
      },
    });
    seeded = await seedTenancy(kiln);
    // A file:// repository is fine for a test; the API accepts only network URLs.
    await kiln.dataSource.query(
      'UPDATE projects SET git_repository_url = $1, name = $2 WHERE id = $3',
      [repo.url, 'web', seeded.projectA],
    );
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    browser = await TestBrowser.launch();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await kiln?.close();
    await registry?.stop();
    await rm(dataDir, { recursive: true, force: true });
    if (repo !== undefined) await rm(repo.dir, { recursive: true, force: true });
  });

  const rowTexts = (page: Page) =>
    page.$$eval('.log .line .msg', (rows) => rows.map((row) => row.textContent ?? ''));

  it('starts a FROM scratch build with a click, streams its output over the WebSocket, and pushes the image', async () => {
    const build = await admin.createBuild(seeded.projectA, 'main');
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/sign-in');
      await submitSignIn(page, seeded.users.admin.email);
      await page.waitForURL((url) => url.pathname === '/');
      await page.goto(`/builds/${build.id}`);

      await page.getByRole('button', { name: 'Start' }).click();
      // The step's own output, over the log WebSocket (replayed from line 0, then live).
      await eventually(async () => {
        const lines = await rowTexts(page);
        expect(lines.some((line) => line.includes('hello from kiln'))).toBe(true);
      }, 120_000);
      await eventually(
        async () => expect(await text(page.locator('h1 .badge'))).toBe('success'),
        120_000,
      );
      await eventually(async () =>
        expect(await page.getAttribute('.log-panel [data-state]', 'data-state')).toBe('ended'),
      );
      await screenshot(page, 'build-local-success');

      // Every stored line was shown once, in order.
      const stored = (await (
        await admin.request('GET', `/builds/${build.id}/logs?limit=1000`)
      ).json()) as { logs: Array<{ message: string }> };
      const shown = await page.$$eval('.log .line', (rows) =>
        rows.map((row) => Number(row.getAttribute('data-seq'))),
      );
      expect(shown).toEqual(stored.logs.map((_, i) => i));
      expect(await registry.tags('kiln/web')).toContain(String(build.build_number));
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 240_000);
});
