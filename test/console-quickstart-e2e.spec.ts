import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import { TestBrowser, eventually, screenshot, submitSignIn, text } from './support/browser.js';
import { LocalRegistry } from './support/registry.js';
import { type TestApp, startTestApp } from './support/test-app.js';

const ADMIN = { email: 'admin@example.com', password: 'change me, please' };

/**
 * README's quick start with clicks only: kiln as `make run` starts it (local runner, a bootstrap
 * admin, a local registry), then sign in, the wizard's kaniko build of `FROM scratch`, Start, the
 * log, and the image in the registry. Nothing is prepared through the API. The other methods the
 * local runner builds (buildx, container) run from the wizard the same way.
 */
describe('the README quick start, with clicks only', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-quickstart-');
  let registry: LocalRegistry;
  let kiln: TestApp;
  let browser: TestBrowser;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
        KILN_BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      },
    });
    browser = await TestBrowser.launch();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await kiln?.close();
    await registry?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  const field = (page: Page, label: string) => page.getByLabel(label, { exact: true });
  const next = async (page: Page, title: string) => {
    await page.getByRole('button', { name: 'Next' }).click();
    await eventually(async () =>
      expect(await text(page.getByRole('heading', { level: 2 }))).toContain(title),
    );
  };

  /** Signs in as the bootstrap admin and opens the wizard's method step for `method`. */
  async function wizardFor(page: Page, method: string, name: string): Promise<void> {
    await page.goto('/');
    await page.waitForURL('**/sign-in');
    await submitSignIn(page, ADMIN.email, ADMIN.password);
    await page.waitForURL((url) => url.pathname === '/');
    await page.getByRole('banner').getByRole('link', { name: 'New build' }).click();
    await eventually(async () =>
      expect(await text(page.getByRole('heading', { level: 2 }))).toContain('Project and form'),
    );
    await field(page, 'Project').selectOption({ index: 1 });
    await next(page, 'Build method');
    await page.getByRole('radio', { name: new RegExp(`^${method}:`) }).check();
    await field(page, 'Name (optional)').fill(name);
    await next(page, 'Method settings');
  }

  /** From the method settings on: tags, create, start, success, the image in the registry. */
  async function finishAndRun(page: Page, repository: string, tag: string): Promise<void> {
    await next(page, 'Build configuration');
    await next(page, 'Tags and environment');
    await field(page, 'Tags').fill(`${registry.address}/${repository}:${tag}`);
    await next(page, 'Review');
    await page.getByRole('button', { name: 'Create build' }).click();
    await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));
    await page.getByRole('button', { name: 'Start' }).click();
    await eventually(
      async () => expect(await text(page.locator('h1 .badge'))).toBe('success'),
      120_000,
    );
    expect(await registry.tags(repository)).toContain(tag);
  }

  it('runs a buildx build from the wizard in buildah and pushes it', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await wizardFor(page, 'buildx', 'buildx hello');
      await field(page, 'Dockerfile').fill('FROM scratch\nLABEL method=buildx\n');
      await finishAndRun(page, 'kiln/buildx-hello', 'v1');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 240_000);

  it('runs a container build (base image and instructions) from the wizard in buildah and pushes it', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await wizardFor(page, 'container', 'container hello');
      await field(page, 'Base image').fill('scratch');
      await field(page, 'Instructions').fill('LABEL method=container\n');
      await finishAndRun(page, 'kiln/container-hello', 'v1');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 240_000);

  it('builds FROM scratch through the wizard and pushes the image', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await wizardFor(page, 'kaniko', 'hello');
      await field(page, 'Dockerfile').fill('FROM scratch\nLABEL hello=world\n');
      await field(page, 'Registry repository').fill(`${registry.address}/kiln/hello`);
      await next(page, 'Build configuration');
      await next(page, 'Tags and environment');
      await field(page, 'Tags').fill('v1');
      await next(page, 'Review');
      await page.getByRole('button', { name: 'Create build' }).click();
      await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));

      await page.getByRole('button', { name: 'Start' }).click();
      await eventually(
        async () => expect(await text(page.locator('h1 .badge'))).toBe('success'),
        120_000,
      );
      await eventually(async () =>
        expect(await page.getAttribute('.log-panel [data-state]', 'data-state')).toBe('ended'),
      );
      expect(await page.locator('.log .line').count()).toBeGreaterThan(0);
      await screenshot(page, 'quickstart-success');
      // v1, and the fallback tag that lists its signed provenance (docs/provenance.md).
      expect((await registry.tags('kiln/hello')).sort()).toEqual([
        expect.stringMatching(/^sha256-[0-9a-f]{64}$/),
        'v1',
      ]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 240_000);
});
