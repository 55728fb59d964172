import { randomBytes } from 'node:crypto';
import type { Locator, Page } from 'playwright-core';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import {
  type ConsolePage,
  TestBrowser,
  eventually,
  screenshot,
  seriousA11yViolations,
  submitSignIn,
  text,
} from './support/browser.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { pushPayload, signedDelivery } from './support/git-providers.js';
import { jsonOf } from './support/http.js';
import { type TestApp, startTestApp } from './support/test-app.js';

const PUBLIC_URL = 'https://kiln.example.com';

/**
 * A project's triggers in Chromium, against the real kiln serving dist/console/: an admin creates
 * one and reads its secret once, a git host's signed delivery arrives over HTTP, and the
 * deliveries table shows the build it made.
 */
describe('the console’s project triggers in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let browser: TestBrowser;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_PUBLIC_URL: PUBLIC_URL, KILN_TRIGGER_WORK_INTERVAL_MS: '200' },
    });
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

  async function signedIn(email: string): Promise<ConsolePage & { close: () => Promise<void> }> {
    const opened = await browser.open(kiln.baseUrl);
    await opened.page.goto('/sign-in');
    await submitSignIn(opened.page, email);
    await opened.page.waitForURL((url) => url.pathname === '/');
    return { ...opened, close: () => opened.context.close() };
  }

  const row = (within: Page | Locator, name: string | RegExp): Locator =>
    within.locator('tbody tr').filter({ hasText: name });

  /** A push to main, signed with `secret` and sent over HTTP to the webhook URL's path. */
  async function push(webhookUrl: string, secret: string, after: string): Promise<number> {
    const payload = pushPayload('github', {
      ref: 'refs/heads/main',
      after,
      pusher: 'ada',
      author: { name: 'Ada Lovelace', email: 'ada@example.com' },
    });
    const delivery = signedDelivery('github', secret, 'push', payload);
    // KILN_PUBLIC_URL names a host of its own: the test server listens on a random port.
    const response = await fetch(new URL(new URL(webhookUrl).pathname, kiln.baseUrl), {
      method: 'POST',
      headers: delivery.headers,
      body: new Uint8Array(delivery.body),
    });
    return response.status;
  }

  it('lets an admin create a trigger, read its secret once, and follow a push to its build', async () => {
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Projects' })
        .click();
      await page.getByRole('link', { name: 'Triggers of web' }).click();
      await page.waitForURL((url) => url.pathname === `/projects/${seeded.projectA}/triggers`);
      await eventually(async () =>
        expect(await text(page.getByRole('heading', { level: 1 }))).toBe('Triggers of web'),
      );
      await page.getByText('No trigger yet.').waitFor();

      await page.getByLabel('Name', { exact: true }).fill('main-pushes');
      await page.getByLabel('Provider').selectOption('github');
      await page.getByRole('checkbox', { name: /^tag:/ }).check();
      await page.getByLabel('Branches').fill('main release/*');
      await page.getByLabel('Concurrency').selectOption('latest-only');
      await page.getByRole('button', { name: 'Create trigger' }).click();

      const shownSecret = page.getByLabel('Secret', { exact: true });
      await shownSecret.waitFor();
      const secret = await shownSecret.inputValue();
      const webhookUrl = await page.getByLabel('Webhook URL', { exact: true }).inputValue();
      expect(secret).toMatch(/^whsec_/);
      const [trigger] = (
        await jsonOf(await admin.request('GET', `/projects/${seeded.projectA}/triggers`))
      ).triggers;
      expect(trigger).toMatchObject({
        name: 'main-pushes',
        provider: 'github',
        events: ['push', 'tag'],
        branches: ['main', 'release/*'],
        concurrency: 'latest-only',
        webhook_url: `${PUBLIC_URL}/api/v1/hooks/${trigger.id}`,
      });
      expect(webhookUrl).toBe(trigger.webhook_url);
      expect(await text(page.getByRole('alert'))).toContain('it will not be shown again');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-trigger-created');

      await page.getByRole('button', { name: 'Done, I have copied it' }).click();
      expect(await page.content()).not.toContain(secret);
      const listed = row(page, /^main-pushes/);
      expect(await text(listed)).toMatch(
        /^main-pushesGitHubpush, tagmain release\/\*latest-onlyoffyes/,
      );
      expect(await text(listed)).toContain(trigger.webhook_url);
      await listed.getByRole('button', { name: 'Deliveries' }).click();
      const deliveries = page.getByRole('region', { name: 'Recent deliveries of main-pushes' });
      await deliveries.getByText('No delivery yet').waitFor();

      const after = randomBytes(20).toString('hex');
      expect(await push(webhookUrl, secret, after)).toBe(202);

      const delivered = row(deliveries, after.slice(0, 12));
      await eventually(async () => expect(await text(delivered)).toContain('built'), 20_000);
      expect(await text(delivered)).toMatch(/pushrefs\/heads\/main[0-9a-f]{12}adabuilt/);
      const [recorded] = (
        await jsonOf(await admin.request('GET', `/triggers/${trigger.id}/deliveries`))
      ).deliveries;
      expect(recorded).toMatchObject({ outcome: 'built', commit: after });
      const build = delivered.getByRole('link', { name: /^Build / });
      expect(await build.getAttribute('href')).toBe(`/builds/${recorded.build_id}`);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-trigger-deliveries');

      await build.click();
      await page.waitForURL((url) => url.pathname === `/builds/${recorded.build_id}`);
      await eventually(async () =>
        expect(await text(page.locator('main'))).toContain(after.slice(0, 12)),
      );
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);

  it('rotates a trigger’s secret, showing the new one once, and deletes the trigger', async () => {
    const created = await jsonOf(
      await admin.request('POST', `/projects/${seeded.projectA}/triggers`, {
        name: 'tags',
        provider: 'gitea',
        events: ['tag'],
      }),
    );
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page.goto(`/projects/${seeded.projectA}/triggers`);
      const listed = row(page, /^tags/);
      await listed.getByRole('button', { name: 'Rotate secret…' }).click();
      await page.getByRole('button', { name: 'Rotate the secret of tags' }).click();

      const shown = page.getByLabel('Secret', { exact: true });
      await shown.waitFor();
      const secret = await shown.inputValue();
      expect(secret).toMatch(/^whsec_/);
      expect(secret).not.toBe(created.secret);
      expect(await push(created.webhook_url, created.secret, randomBytes(20).toString('hex'))).toBe(
        401,
      );
      await page.getByRole('button', { name: 'Done, I have copied it' }).click();

      await listed.getByRole('button', { name: 'Delete…' }).click();
      await page.getByRole('button', { name: 'Delete tags' }).click();
      await eventually(async () => expect(await listed.count()).toBe(0));
      expect(await text(page.getByRole('status').filter({ hasText: 'deleted' }))).toBe(
        'Trigger tags deleted.',
      );
      expect((await admin.request('GET', `/triggers/${created.id}`)).status).toBe(404);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('tells a developer the page is not theirs; the API refuses them too', async () => {
    const { page, problems, close } = await signedIn(seeded.users.developer.email);
    try {
      await page.goto(`/projects/${seeded.projectA}/triggers`);

      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toContain(
          "cannot manage the projects' build triggers",
        ),
      );
      const developer = await tokenFor(kiln.baseUrl, seeded.users.developer.email);
      const listed = await fetch(`${kiln.baseUrl}/api/v1/projects/${seeded.projectA}/triggers`, {
        headers: { authorization: `Bearer ${developer}`, 'x-tenant-id': seeded.tenantA },
      });
      expect(listed.status).toBe(403);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
