import type { Locator, Page } from 'playwright-core';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { PASSWORD, type Seeded, seedTenancy, tokenFor } from './support/auth.js';
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
import { type TestApp, startTestApp } from './support/test-app.js';

const NEWCOMER = 'newcomer@example.com';

/**
 * The tenant admin pages end to end in Chromium: members, projects, settings and API tokens, each
 * shown only to the roles that may use it, against the real kiln serving dist/console/.
 */
describe('the console’s admin pages in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let browser: TestBrowser;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    await kiln.app.get(TenancyService).createUser(NEWCOMER, PASSWORD);
    const admin = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    await new ApiClient(kiln, admin, seeded.tenantA).createBuild(seeded.projectA, 'main');
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

  const navLinks = async (page: Page) =>
    (await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents()).map(
      (link) => link.trim(),
    );

  async function open(page: Page, label: string, path: string): Promise<void> {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label }).click();
    await page.waitForURL((url) => url.pathname === path);
    await page.getByRole('heading', { level: 1 }).waitFor();
  }

  const row = (page: Page, name: string | RegExp): Locator =>
    page.locator('table.list tbody tr').filter({ hasText: name });

  const listBuilds = (token: string) =>
    fetch(`${kiln.baseUrl}/api/v1/builds`, { headers: { authorization: `Bearer ${token}` } });

  it('lets a tenant admin add a member, create a project, and create, use and revoke an API token', async () => {
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      expect(await navLinks(page)).toEqual([
        'kiln',
        'Builds',
        'New build',
        'Members',
        'Projects',
        'Settings',
        'Tokens',
      ]);

      // Members: add an existing user with a role; the tenant's last admin keeps the role.
      await open(page, 'Members', '/members');
      await eventually(async () => expect(await row(page, '@example.com').count()).toBe(3));
      await page.getByLabel('E-mail', { exact: true }).fill(NEWCOMER);
      await page.getByLabel('Role', { exact: true }).selectOption('viewer');
      await page.getByRole('button', { name: 'Add member' }).click();
      await eventually(async () =>
        expect(await row(page, NEWCOMER).getByLabel(`Role of ${NEWCOMER}`).inputValue()).toBe(
          'viewer',
        ),
      );
      const me = row(page, seeded.users.admin.email);
      await me.getByLabel(`Role of ${seeded.users.admin.email}`).selectOption('developer');
      await me.getByRole('button', { name: 'Change role' }).click();
      await eventually(async () =>
        expect(await text(me.getByRole('alert'))).toContain("This is the tenant's last admin"),
      );
      expect(await me.getByLabel(`Role of ${seeded.users.admin.email}`).inputValue()).toBe('admin');
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-members');

      // Projects: create one, and give it git credentials (a secret reference).
      await open(page, 'Projects', '/projects');
      await page.getByLabel('Name', { exact: true }).fill('api');
      await page.getByLabel('Git repository URL').fill('https://git.example.com/a/api.git');
      await page.getByRole('button', { name: 'Create project' }).click();
      await eventually(async () =>
        expect(await text(row(page, /^api/))).toContain('https://git.example.com/a/api.git'),
      );
      await row(page, /^api/).getByRole('button', { name: 'Git credentials' }).click();
      await page.getByLabel('User name').fill('kiln-ci');
      await page.getByLabel('Password (secret reference)').fill('vault:kv/data/ci/git#token');
      await page.getByRole('button', { name: 'Save credentials' }).click();
      await eventually(async () =>
        expect(await page.getByText('Git credentials saved.').count()).toBe(1),
      );
      // A project with builds is not deleted: the API's 409 says why.
      await row(page, /^web/).getByRole('button', { name: 'Delete…' }).click();
      await page.getByRole('button', { name: 'Delete web' }).click();
      await eventually(async () =>
        expect(await text(row(page, /^web/).getByRole('alert'))).toContain('still has builds'),
      );
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-projects');

      // Settings: the API's 400 details are shown beside the JSON they are about.
      await open(page, 'Settings', '/settings');
      await page
        .getByLabel('HashiCorp Vault settings (JSON)')
        .fill('{ "address": "https://vault.example.com:8200" }');
      await page.getByRole('button', { name: 'Save HashiCorp Vault' }).click();
      await eventually(async () =>
        expect(await text(page.locator('#f-settings-vault-json-error'))).toBe('auth: is required'),
      );
      expect(await text(page.getByRole('region', { name: 'Admission' }))).toMatch(/Weight\s*1 /);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-settings');

      // Tokens: created, read from the page once, used, revoked.
      await open(page, 'Tokens', '/tokens');
      await page.getByLabel('Name', { exact: true }).fill('ci');
      await page.getByRole('checkbox', { name: /^member:manage/ }).uncheck();
      await page.getByRole('button', { name: 'Create token' }).click();
      const shown = page.getByLabel('Your new token');
      await shown.waitFor();
      const token = await shown.inputValue();
      expect(token).toMatch(/^kiln_[A-Za-z0-9_-]{43}$/);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'admin-token-created');
      expect((await listBuilds(token)).status).toBe(200);

      await page.getByRole('button', { name: 'Done, I have copied it' }).click();
      await eventually(async () => expect(await text(row(page, /^ci/))).toContain('build:list'));
      expect(await text(row(page, /^ci/))).not.toContain('member:manage');
      expect(await page.content()).not.toContain(token);

      await row(page, /^ci/).getByRole('button', { name: 'Revoke…' }).click();
      await page.getByRole('button', { name: 'Revoke ci' }).click();
      await eventually(async () => expect(await row(page, /^ci/).count()).toBe(0));
      await eventually(async () => expect((await listBuilds(token)).status).toBe(401));
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 60_000);

  it('shows a developer Tokens but not Members, Projects or Settings', async () => {
    const { page, problems, close } = await signedIn(seeded.users.developer.email);
    try {
      expect(await navLinks(page)).toEqual(['kiln', 'Builds', 'New build', 'Tokens']);

      await open(page, 'Tokens', '/tokens');
      const offered = page.getByRole('group', { name: 'Permissions' }).getByRole('checkbox');
      await eventually(async () => expect(await offered.count()).toBe(4));
      expect(
        (await page.getByRole('group', { name: 'Permissions' }).textContent()) ?? '',
      ).not.toMatch(/member:manage|project:manage|settings:manage|build:delete|token:manage/);

      // A page typed into the address bar says the role cannot use it; the API would refuse.
      await page.goto('/members');
      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toContain('cannot manage its members'),
      );
      const developer = await tokenFor(kiln.baseUrl, seeded.users.developer.email);
      const members = await fetch(`${kiln.baseUrl}/api/v1/members`, {
        headers: { authorization: `Bearer ${developer}`, 'x-tenant-id': seeded.tenantA },
      });
      expect(members.status).toBe(403);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
