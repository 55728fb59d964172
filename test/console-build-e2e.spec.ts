import type { Page } from 'playwright-core';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BuildArtifacts } from '../src/artifacts/build-artifacts.js';
import { LogSink } from '../src/logs/log-sink.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import {
  type ConsolePage,
  TestBrowser,
  eventually,
  screenshot,
  seriousA11yViolations,
  text,
  submitSignIn,
} from './support/browser.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { type TestApp, startTestApp } from './support/test-app.js';

const ESC = '\u001b';
const FIXTURES = join(__dirname, '..', 'src', 'artifacts', 'fixtures');

/**
 * The build page end to end in Chromium: status, actions by role and state, and the log, live over
 * the WebSocket (through a TCP proxy the test cuts, to see it resume) and paged for a finished
 * build of 100,000 lines.
 */
describe('the console’s build page in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let runner: FakeRunner;
  let sink: LogSink;
  let proxy: TcpProxy;
  let browser: TestBrowser;
  /** The console as the browser reaches it: through the proxy. */
  let origin: string;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    sink = kiln.app.get(LogSink);
    const { hostname, port } = new URL(kiln.baseUrl);
    proxy = await TcpProxy.start({ host: hostname, port: Number(port) });
    origin = proxy.proxied(kiln.baseUrl).replace(/\/$/, '');
    browser = await TestBrowser.launch();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await proxy?.stop();
    await kiln?.close();
  });

  async function signedIn(email: string): Promise<ConsolePage & { close: () => Promise<void> }> {
    const opened = await browser.open(origin);
    await opened.page.goto('/sign-in');
    await submitSignIn(opened.page, email);
    await opened.page.waitForURL((url) => url.pathname === '/');
    return { ...opened, close: () => opened.context.close() };
  }

  /** The seqs of the log rows in the DOM, in order. */
  const renderedSeqs = (page: Page) =>
    page.$$eval('.log .line', (rows) => rows.map((row) => Number(row.getAttribute('data-seq'))));

  const connectionState = (page: Page) =>
    page.getAttribute('.log-panel [data-state]', 'data-state');

  const statusOf = async (id: string) =>
    ((await (await admin.request('GET', `/builds/${id}`)).json()) as { status: string }).status;

  it('starts a build, shows its log live, resumes after a dropped connection with no gap or repeat, and cancels it', async () => {
    const build = await admin.createBuild(seeded.projectA, 'live');
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page.goto(`/builds/${build.id}`);
      await page.getByRole('button', { name: 'Start' }).click();
      await eventually(async () =>
        expect(await text(page.locator('.actions [role=status]'))).toBe('Build started.'),
      );
      await eventually(async () => expect(await connectionState(page)).toBe('live'));
      await eventually(async () =>
        expect(await text(page.locator('h1'))).toMatch(/^web #\d+ in progress$/),
      );

      await sink.append(build.id as string, [
        { text: `${ESC}[1;31mred and bold${ESC}[0m plain` },
        ...Array.from({ length: 29 }, (_, i) => ({ text: `before the cut ${i + 1}` })),
      ]);
      await eventually(async () => expect(await renderedSeqs(page)).toHaveLength(30));
      expect(await text(page.locator('.log .line[data-seq="0"] .fg-1.bold'))).toBe('red and bold');
      expect(await text(page.locator('.log'))).not.toContain(ESC);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'build-live');

      // The network drops: every connection through the proxy is reset, and lines go on.
      proxy.cut();
      await eventually(async () => expect(await connectionState(page)).toBe('reconnecting'));
      await sink.append(
        build.id as string,
        Array.from({ length: 20 }, (_, i) => ({ text: `during the cut ${i + 1}` })),
      );
      proxy.restore();

      await eventually(async () => expect(await connectionState(page)).toBe('live'));
      await eventually(async () =>
        expect(await renderedSeqs(page)).toEqual(Array.from({ length: 50 }, (_, i) => i)),
      );
      expect(await text(page.locator('.log .line[data-seq="49"]'))).toContain('during the cut 20');

      await page.getByRole('button', { name: 'Cancel…' }).click();
      await page.getByLabel('Reason (optional)').fill('wrong branch');
      await page.getByRole('button', { name: /^Cancel build #/ }).click();
      await eventually(async () =>
        expect(await text(page.locator('.actions [role=status]'))).toBe('Build cancelled.'),
      );
      expect(await statusOf(build.id as string)).toBe('cancelled');
      await eventually(async () => expect(await text(page.locator('h1 .badge'))).toBe('cancelled'));
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows step n of m with the time left, and pauses and resumes following the log', async () => {
    // One successful build before it: the ETA is its start plus the project's median run time.
    const earlier = (await admin.createBuild(seeded.projectA, 'progress-history')).id as string;
    expect((await admin.request('POST', `/builds/${earlier}/start`)).status).toBe(200);
    await runner.succeed(earlier);
    const build = await admin.createBuild(seeded.projectA, 'progress');
    const id = build.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    await runner.progress(id, 2, 5);
    await sink.append(
      id,
      Array.from({ length: 200 }, (_, i) => ({ text: `line ${i + 1}` })),
    );
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    const log = page.locator('.log');
    const scrollTop = () => log.evaluate((box) => box.scrollTop);
    const atEnd = () =>
      log.evaluate((box) => box.scrollTop + box.clientHeight >= box.scrollHeight - 20);
    try {
      await page.goto(`/builds/${id}`);
      await eventually(async () =>
        expect(await text(page.locator('.progress label'))).toMatch(
          /^Step 2 of 5 · (about \d+ s left|past its usual run time)$/,
        ),
      );
      expect(await page.locator('progress').getAttribute('value')).toBe('40');

      // Following: the newest line is in sight.
      await eventually(async () => expect(await renderedSeqs(page)).toContain(199));
      await eventually(async () => expect(await atEnd()).toBe(true));

      // Paused: new lines arrive, the view stays where it is.
      await page.getByRole('button', { name: 'Pause' }).click();
      await log.evaluate((box) => (box.scrollTop = 0));
      await sink.append(id, [{ text: 'while paused' }]);
      await eventually(async () =>
        expect(await text(page.locator('.log-panel [data-state]'))).toContain('201 lines'),
      );
      expect(await scrollTop()).toBe(0);

      // Following again: back to the end, the new line in sight.
      await page.getByRole('button', { name: 'Follow' }).click();
      await eventually(async () => expect(await atEnd()).toBe(true));
      expect(await renderedSeqs(page)).toContain(200);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows why a build failed, retries it and deletes the retry', async () => {
    const build = await admin.createBuild(seeded.projectA, 'failing');
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    await sink.append(build.id as string, [{ text: 'RUN make' }, { text: 'error: no rule' }]);
    await runner.fail(build.id as string, 'BuildFailed', 'step 2/3 exited with code 2');
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page.goto(`/builds/${build.id}`);
      await eventually(async () =>
        expect(await text(page.locator('.failure'))).toContain('step 2/3 exited with code 2'),
      );
      expect(await text(page.locator('.failure'))).toContain('A build step failed (BuildFailed)');
      await eventually(async () => expect(await connectionState(page)).toBe('ended'));
      expect(await renderedSeqs(page)).toEqual([0, 1]);
      expect(await page.getByRole('button', { name: 'Start' }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Cancel…' }).count()).toBe(0);
      expect(await seriousA11yViolations(page)).toEqual([]);
      await screenshot(page, 'build-failed');

      await page.getByRole('button', { name: 'Retry' }).click();
      await page.waitForURL((url) => url.pathname !== `/builds/${build.id}`);
      const retryId = new URL(page.url()).pathname.split('/').pop()!;
      await eventually(async () => expect(await text(page.locator('h1 .badge'))).toBe('queued'));
      expect(await statusOf(retryId)).toBe('queued');

      await page.getByRole('button', { name: 'Delete…' }).click();
      await page.getByRole('button', { name: /^Delete build #/ }).click();
      await page.waitForURL((url) => url.pathname === '/');
      expect((await admin.request('GET', `/builds/${retryId}`)).status).toBe(404);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('summarises the SBOM and the scan a build uploaded', async () => {
    const manifest = wizardManifest('kaniko');
    manifest['name'] = 'with artifacts';
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    const id = ((await response.json()) as { data: { id: string } }).data.id;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    const artifacts = kiln.app.get(BuildArtifacts);
    for (const [kind, fixture] of [
      ['sbom', 'sbom-syft.spdx.json'],
      ['scan', 'trivy-alpine-310.json'],
    ] as const) {
      const bytes = await readFile(join(FIXTURES, fixture));
      await artifacts.receive(id, kind, { bytes, receivedBytes: bytes.length });
    }
    await runner.succeed(id);
    const scan = (await (await admin.request('GET', `/builds/${id}/scan`)).json()) as {
      summary: Record<string, number>;
    };
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page.goto(`/builds/${id}`);
      // The page asks for the SBOM and the scan apart and shows each as it comes.
      await eventually(async () => {
        const shown = await text(page.locator('.artifacts'));
        expect(shown).toContain('SBOM by syft (spdx-json): 3 packages');
        expect(shown).toContain(
          `Scan by trivy: ${scan.summary['critical']} critical, ${scan.summary['high']} high`,
        );
      });
      expect(await seriousA11yViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows a viewer no action at all, whatever the build’s state', async () => {
    const queued = await admin.createBuild(seeded.projectA, 'viewer-queued');
    const failed = await admin.createBuild(seeded.projectA, 'viewer-failed');
    expect((await admin.request('POST', `/builds/${failed.id}/start`)).status).toBe(200);
    await runner.fail(failed.id as string);
    const { page, problems, close } = await signedIn(seeded.users.viewer.email);
    try {
      for (const build of [queued, failed]) {
        await page.goto(`/builds/${build.id}`);
        await page.locator('h1 .badge').waitFor();
        await page.locator('.log-panel').waitFor();
        for (const name of ['Start', 'Cancel…', 'Retry', 'Delete…']) {
          expect({ name, count: await page.getByRole('button', { name }).count() }).toEqual({
            name,
            count: 0,
          });
        }
      }
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('pages a finished log of 100,000 lines, keeps the DOM small, searches, jumps and downloads it all', async () => {
    const build = await admin.createBuild(seeded.projectA, 'long-log');
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    // What LogSink would store, written in one statement to keep the test short.
    await kiln.dataSource.query(
      `WITH lines AS (
         INSERT INTO build_log_lines (build_id, seq, ts, level, message)
         SELECT $1, n, now(), 'INFO', 'line ' || (n + 1) || ' of the long log' FROM generate_series(0, 99999) n
         RETURNING octet_length(message) AS bytes)
       INSERT INTO build_logs (build_id, lines, bytes) SELECT $1, count(*), sum(bytes) FROM lines`,
      [build.id],
    );
    await runner.succeed(build.id as string);
    const { page, problems, close } = await signedIn(seeded.users.admin.email);
    try {
      await page.goto(`/builds/${build.id}`);
      await eventually(async () => expect(await connectionState(page)).toBe('ended'), 60_000);
      expect(await text(page.locator('.log-panel [data-state]'))).toContain('100,000 lines');

      // Only the rows in sight (plus a margin) are in the DOM.
      expect((await renderedSeqs(page)).length).toBeLessThan(200);

      await page.getByLabel('Go to line').fill('50000');
      await page.getByRole('button', { name: 'Go' }).click();
      await eventually(async () =>
        expect(await page.locator('.log .line.current').getAttribute('data-seq')).toBe('49999'),
      );
      expect((await renderedSeqs(page)).length).toBeLessThan(200);

      await page.getByLabel('Search', { exact: true }).fill('line 77777 of');
      await page.getByRole('button', { name: 'Next' }).click();
      await eventually(async () =>
        expect(await page.locator('.log .line.current').getAttribute('data-seq')).toBe('77776'),
      );
      expect(await text(page.locator('.log-bar [aria-live=polite]'))).toBe('1 of 1 matches');

      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('button', { name: 'Download' }).click(),
      ]);
      const lines = (await readFile(await download.path(), 'utf8')).trimEnd().split('\n');
      expect(lines).toHaveLength(100_000);
      expect(lines[0]).toMatch(/ INFO line 1 of the long log$/);
      expect(lines[99_999]).toMatch(/ INFO line 100000 of the long log$/);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  }, 120_000);
});
