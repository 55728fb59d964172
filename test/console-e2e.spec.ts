import type { Page } from 'playwright-core';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import {
  TestBrowser,
  eventually,
  screenshot,
  seriousA11yViolations,
  text,
  submitSignIn,
} from './support/browser.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { type TestApp, startTestApp } from './support/test-app.js';

/**
 * The web console end to end: headless Chromium (Debian's, through playwright-core) against the
 * real kiln serving dist/console/ (`make build`) on a real Postgres. Every page is also checked
 * with axe-core and for anything the Content-Security-Policy refused.
 */
describe('the web console in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let browser: TestBrowser;
  const created: Array<Record<string, any>> = [];

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    created.push(await admin.createBuild(seeded.projectA, 'main'));
    created.push(await admin.createBuild(seeded.projectA, 'feature/login'));
    const runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    expect((await admin.request('POST', `/builds/${created[0]!.id}/start`)).status).toBe(200);
    await runner.succeed(created[0]!.id as string);
    browser = await TestBrowser.launch();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await kiln?.close();
  });

  const signIn = submitSignIn;

  async function expectAccessible(page: Page): Promise<void> {
    expect(await seriousA11yViolations(page)).toEqual([]);
  }

  it('signs in with e-mail and password and shows the tenant’s builds, newest first', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/');
      await page.waitForURL('**/sign-in');
      await expectAccessible(page);
      await screenshot(page, 'sign-in');

      await signIn(page, seeded.users.admin.email);

      await page.waitForURL((url) => url.pathname === '/');
      const rows = page.locator('table.builds tbody tr');
      await rows.first().waitFor();
      expect(await rows.count()).toBe(2);
      await eventually(async () => expect(await text(rows.nth(0))).toContain('web #2'));
      await eventually(async () => expect(await text(rows.nth(0))).toContain('feature/login'));
      await eventually(async () => expect(await text(rows.nth(0))).toContain('queued'));
      await eventually(async () => expect(await text(rows.nth(1))).toContain('web #1'));
      await eventually(async () => expect(await text(rows.nth(1))).toContain('success'));
      await eventually(async () =>
        expect(await text(page.getByRole('status'))).toContain('2 builds'),
      );
      await expectAccessible(page);
      await screenshot(page, 'builds-list');

      // Filters go to the API as its own query, and live in the URL.
      await page.getByLabel('Status').selectOption('success');
      await page.waitForURL((url) => url.searchParams.get('status') === 'success');
      await eventually(async () =>
        expect(await page.locator('table.builds tbody tr').count()).toBe(1),
      );
      await eventually(async () =>
        expect(await text(page.locator('table.builds tbody tr').first())).toContain('web #1'),
      );

      // The token is kept for this tab only: never in a cookie or localStorage.
      expect(await context.cookies()).toEqual([]);
      expect(await page.evaluate(() => localStorage.length)).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('shows the API’s message for a wrong password and stays on sign-in', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/sign-in');
      await signIn(page, seeded.users.admin.email, 'not the password');

      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toMatch(/invalid|incorrect|password/i),
      );
      expect(new URL(page.url()).pathname).toBe('/sign-in');
      await expectAccessible(page);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('lets a member of two tenants pick one, and scopes the list to it', async () => {
    const tenancy = kiln.app.get(TenancyService);
    const user = await tenancy.createUser('two-tenants@example.com', PASSWORD);
    await tenancy.addMember(seeded.tenantA, user.email, 'viewer');
    await tenancy.addMember(seeded.tenantB, user.email, 'developer');
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/sign-in');
      await signIn(page, user.email);

      await page.waitForURL('**/tenants');
      await eventually(async () =>
        expect(await text(page.getByRole('button', { name: /tenant-a/ }))).toContain('viewer'),
      );
      await eventually(async () =>
        expect(await text(page.getByRole('button', { name: /tenant-b/ }))).toContain('developer'),
      );
      await expectAccessible(page);
      await screenshot(page, 'tenants');

      await page.getByRole('button', { name: /tenant-b/ }).click();
      await page.waitForURL((url) => url.pathname === '/');
      await eventually(async () =>
        expect(await text(page.getByRole('status'))).toContain('0 builds'),
      );
      await eventually(async () =>
        expect(await text(page.getByRole('banner'))).toContain('tenant-b (developer)'),
      );
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('returns to sign-in when the token is refused, and back to the same page after', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await page.goto('/sign-in');
      await signIn(page, seeded.users.admin.email);
      await page.waitForURL((url) => url.pathname === '/');
      await page.goto('/?status=queued&sort_order=asc');
      await eventually(async () =>
        expect(await page.locator('table.builds tbody tr').count()).toBe(1),
      );

      // The API stops accepting the token (as when it expires): the next request gets 401.
      await page.evaluate(() => {
        const key = 'kiln.session';
        const session = JSON.parse(sessionStorage.getItem(key)!) as { token: string };
        sessionStorage.setItem(key, JSON.stringify({ ...session, token: 'expired.token.here' }));
      });
      await page.reload();

      await page.waitForURL((url) => url.pathname === '/sign-in' && url.search === '?expired=1');
      await eventually(async () =>
        expect(await text(page.getByRole('status'))).toContain('session has ended'),
      );
      await signIn(page, seeded.users.admin.email);
      await page.waitForURL((url) => url.search === '?status=queued&sort_order=asc');
      await eventually(async () =>
        expect(await page.getByLabel('Status').inputValue()).toBe('queued'),
      );
      await eventually(async () => expect(await page.getByLabel('Order').inputValue()).toBe('asc'));
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('pages and sorts the list, refreshes it while a build is active, and signs out', async () => {
    // Tenant B: 21 builds of its own, one more than a page.
    const adminB = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
    const builds: Array<Record<string, any>> = [];
    for (let i = 0; i < 21; i++) builds.push(await adminB.createBuild(seeded.projectB, `b-${i}`));
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    const rows = () => page.locator('table.builds tbody tr');
    try {
      await page.goto('/sign-in');
      await signIn(page, seeded.users.adminB.email);
      await page.waitForURL((url) => url.pathname === '/');
      await eventually(async () => expect(await rows().count()).toBe(20));
      expect(await text(page.getByRole('status'))).toContain('21 builds');
      expect(await text(rows().first())).toContain('secret-b #21');

      await page.getByRole('button', { name: 'Next' }).click();
      await page.waitForURL((url) => url.searchParams.get('page') === '2');
      await eventually(async () => expect(await rows().count()).toBe(1));
      expect(await text(rows().first())).toContain('secret-b #1');
      await page.getByRole('button', { name: 'Previous' }).click();
      await eventually(async () => expect(await rows().count()).toBe(20));

      await page.getByLabel('Order').selectOption('asc');
      await eventually(async () => expect(await text(rows().first())).toContain('secret-b #1'));

      // A build on the page changes state: the list shows it without a reload.
      expect((await adminB.request('POST', `/builds/${builds[0]!.id}/start`)).status).toBe(200);
      await eventually(
        async () => expect(await text(rows().first())).toContain('in progress'),
        20_000,
      );

      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.waitForURL('**/sign-in');
      expect(await page.evaluate(() => sessionStorage.getItem('kiln.session'))).toBeNull();
      await page.goto('/');
      await page.waitForURL('**/sign-in');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('fits a narrow screen: nothing but the table scrolls sideways', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl, { width: 360 });
    try {
      await page.goto('/sign-in');
      await signIn(page, seeded.users.admin.email);
      await page.locator('table.builds tbody tr').first().waitFor();

      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await screenshot(page, 'builds-list-narrow');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
