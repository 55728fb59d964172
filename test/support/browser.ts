import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import {
  type Browser,
  type BrowserContext,
  type Locator,
  type Page,
  chromium,
} from 'playwright-core';
import { PASSWORD } from './auth.js';

/** Debian's Chromium, installed by scripts/system-deps.sh; KILN_TEST_CHROMIUM points elsewhere. */
const CHROMIUM = process.env.KILN_TEST_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots of the test run (not committed): README's pictures are taken from here. */
export const SCREENSHOT_DIR = join(__dirname, '..', '..', 'test-results', 'screenshots');

const axeSource = readFileSync(createRequire(__filename).resolve('axe-core/axe.min.js'), 'utf8');

export interface ConsolePage {
  readonly page: Page;
  /** What the browser refused under the Content-Security-Policy, and uncaught page errors. */
  readonly problems: string[];
}

/** A headless Chromium for one suite; each page gets a context of its own (no shared storage). */
export class TestBrowser {
  private constructor(private readonly browser: Browser) {}

  static async launch(): Promise<TestBrowser> {
    // Without the built console every page times out: say why at once (`npx nest build` alone
    // empties dist/, the console with it).
    const index = join(__dirname, '..', '..', 'dist', 'console', 'index.html');
    if (!existsSync(index))
      throw new Error(`${index} is missing: build the console first (make build)`);
    // --no-sandbox: tests run as root in CI containers, where Chromium's sandbox cannot start.
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage'],
    });
    return new TestBrowser(browser);
  }

  async open(
    baseUrl: string,
    options: { width?: number; height?: number } = {},
  ): Promise<ConsolePage & { context: BrowserContext }> {
    const context = await this.browser.newContext({
      baseURL: baseUrl,
      viewport: { width: options.width ?? 1280, height: options.height ?? 800 },
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' && /Content Security Policy|Refused to/.test(message.text()))
        problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    return { page, problems, context };
  }

  async close(): Promise<void> {
    await this.browser.close();
  }
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: unknown[] }>;
}

/**
 * axe-core's serious and critical violations on the page as it is. axe is evaluated through the
 * DevTools protocol, which the page's CSP does not govern, so the console's policy stays strict.
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  // Injected once per document: parsing axe's 500 kB again at every check cost as much as the
  // check itself. A navigation gives a new document, without it.
  const injected = await page.evaluate(() => 'axe' in globalThis);
  if (!injected) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } })
      .axe;
    return (await axe.run()).violations;
  });
  return (violations as AxeViolation[]).filter(
    (v) => v.impact === 'serious' || v.impact === 'critical',
  );
}

/** Saves a full-page screenshot under test-results/screenshots/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/**
 * Retries `check` until it passes or 10 s have gone by (then its last failure is thrown): what
 * @playwright/test's web-first assertions do, for a page that updates after a request.
 */
export async function eventually(check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (failure) {
      if (Date.now() > deadline) throw failure;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** The locator's text, once it is there. */
export const text = async (locator: Locator) => (await locator.textContent()) ?? '';

/** Fills the sign-in form the page shows and submits it; where the console goes next is the caller's to wait for. */
export async function submitSignIn(page: Page, email: string, password = PASSWORD): Promise<void> {
  await page.getByLabel('E-mail', { exact: true }).fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}
