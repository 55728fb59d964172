import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import {
  TestBrowser,
  eventually,
  screenshot,
  seriousA11yViolations,
  submitSignIn,
  text,
} from './support/browser.js';
import { ApiClient } from './support/builds.js';
import { type TestApp, startTestApp } from './support/test-app.js';

/**
 * A started build that waits to run, as the console shows it (docs/admission.md): the real app
 * with the local runner and a limit of 0 running builds, so every started build waits first in
 * line for the installation's limit, with no estimate (nothing has run to guess from).
 */
describe('the console shows a waiting build in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let browser: TestBrowser;

  beforeAll(async () => {
    kiln = await startTestApp({ env: { KILN_RUNNER: 'local', KILN_MAX_RUNNING: '0' } });
    seeded = await seedTenancy(kiln);
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
  });

  it('shows its place in line in the list and its place and why on its page, and drops both once it is cancelled', async () => {
    const build = await admin.createBuild(seeded.projectA, 'main');
    const started = await admin.request('POST', `/builds/${build.id}/start`);
    expect(started.status).toBe(200);
    expect(((await started.json()) as { queue?: unknown }).queue).toMatchObject({
      position: 1,
      reason: 'InstallationLimit',
      estimated_start: null,
    });

    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/sign-in');
      await submitSignIn(page, seeded.users.admin.email);
      await page.waitForURL((url) => url.pathname === '/');

      const row = page.locator('table.builds tbody tr', { hasText: `#${build.build_number}` });
      await eventually(async () =>
        expect(await text(row.locator('td').nth(1))).toBe('in progress waiting: 1st in line'),
      );
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'builds-list-waiting');

      await row.getByRole('link').click();
      await page.waitForURL((url) => url.pathname === `/builds/${build.id}`);
      const queue = page.locator('.queue');
      await eventually(async () =>
        expect(await text(queue.locator('strong'))).toBe('waiting: 1st in line'),
      );
      expect(await text(queue)).toContain(
        'this installation runs no builds now: its limit on running builds (KILN_MAX_RUNNING) is 0 (InstallationLimit)',
      );
      expect(await text(page.locator('h1 .badge'))).toBe('in progress');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'build-waiting');

      // Once it no longer waits, the page is as for any other build: no queue left to show.
      expect((await admin.request('POST', `/builds/${build.id}/cancel`, {})).status).toBe(200);
      await eventually(
        async () => expect(await text(page.locator('h1 .badge'))).toBe('cancelled'),
        15_000,
      );
      expect(await queue.count()).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
