import type { Page, Route } from 'playwright-core';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
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

type Method = 'kaniko' | 'buildx' | 'container' | 'paketo' | 'packer';

/**
 * The New build wizard end to end: headless Chromium against the real kiln serving dist/console/
 * on a real Postgres. Each build is created by clicking and typing only, and what the review step
 * showed is compared with what the API stored.
 */
describe('the console’s New build wizard in Chromium', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let browser: TestBrowser;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
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

  async function signIn(page: Page, email: string): Promise<void> {
    await page.goto('/sign-in');
    await submitSignIn(page, email);
    await page.waitForURL((url) => url.pathname === '/');
  }

  async function expectAccessible(page: Page): Promise<void> {
    expect(await seriousA11yViolations(page)).toEqual([]);
  }

  const next = (page: Page) => page.getByRole('button', { name: 'Next' });
  const heading = (page: Page) => page.getByRole('heading', { level: 2 });

  /** Goes on to the step titled `title`; focus lands on its heading. */
  async function goOn(page: Page, title: string): Promise<void> {
    await next(page).click();
    await eventually(async () => expect(await text(heading(page))).toContain(title));
    await eventually(async () =>
      expect(await heading(page).evaluate((h) => h === document.activeElement)).toBe(true),
    );
    await expectAccessible(page);
  }

  /** The message shown for a control, found through its aria-describedby. */
  async function messageOf(page: Page, label: string | RegExp): Promise<string> {
    const ids =
      (await page.getByLabel(label, { exact: true }).getAttribute('aria-describedby')) ?? '';
    const error = ids.split(' ').find((id) => id.endsWith('-error'));
    return error === undefined ? '' : text(page.locator(`[id="${error}"]`));
  }

  async function messageOfGroup(page: Page, legend: string): Promise<string> {
    const group = page.getByRole('group', { name: legend, exact: true });
    const ids = (await group.getAttribute('aria-describedby')) ?? '';
    const error = ids.split(' ').find((id) => id.endsWith('-error'));
    return error === undefined ? '' : text(page.locator(`[id="${error}"]`));
  }

  /** Opens the wizard from the header and starts a manifest build of `method` in project web. */
  async function startManifest(page: Page, method: Method): Promise<void> {
    await page.getByRole('banner').getByRole('link', { name: 'New build' }).click();
    await page.waitForURL('**/builds/new');
    await eventually(async () => expect(await text(heading(page))).toContain('Project and form'));
    await expectAccessible(page);
    await page.getByLabel('Project', { exact: true }).selectOption({ label: 'web' });
    await goOn(page, 'Build method');
    await page.getByRole('radio', { name: new RegExp(`^${method}:`) }).check();
    await page.getByLabel('Name (optional)', { exact: true }).fill(`${method} from the wizard`);
  }

  /** Fills the method's own fields as a user would. */
  const METHOD_FIELDS: Record<Method, (page: Page) => Promise<void>> = {
    kaniko: async (page) => {
      await page.getByLabel('Dockerfile', { exact: true }).fill('FROM alpine:3.20\nRUN true\n');
      await page
        .getByLabel('Registry repository', { exact: true })
        .fill('registry.example.com/team/app');
    },
    buildx: async (page) => {
      await page.getByLabel('Dockerfile', { exact: true }).fill('FROM alpine:3.20\n');
      await page
        .getByLabel('Platforms (optional)', { exact: true })
        .fill('linux/amd64, linux/arm64');
      await page.getByLabel('Cache to (optional)', { exact: true }).fill('type=inline');
      await page
        .getByLabel('Cache from (optional)', { exact: true })
        .fill('type=registry,ref=r.example.com/a:c\n');
      await page.getByRole('button', { name: 'Add secrets' }).click();
      await page.getByLabel('Secrets 1 name', { exact: true }).fill('npm');
      await page
        .getByLabel('Secrets 1 value', { exact: true })
        .fill('vault:kv/data/team/npm#token');
    },
    container: async (page) => {
      await page.getByLabel('Base image', { exact: true }).fill('docker.io/library/alpine:3.20');
      await page
        .getByLabel('Instructions', { exact: true })
        .fill('RUN apk add curl\n\n  CMD ["curl"]\n');
    },
    paketo: async (page) => {
      await page.getByRole('radio', { name: 'paketobuildpacks/builder:full' }).check();
      await page
        .getByLabel('Buildpacks (optional)', { exact: true })
        .fill('paketo-buildpacks/nodejs');
      await page.getByRole('button', { name: 'Add buildpack environment' }).click();
      await page
        .getByLabel('Buildpack environment 1 name', { exact: true })
        .fill('BP_NODE_VERSION');
      await page.getByLabel('Buildpack environment 1 value', { exact: true }).fill('20.*');
    },
    packer: async (page) => {
      await page
        .getByLabel('Packer template', { exact: true })
        .fill(JSON.stringify({ builders: [{ type: 'docker', image: 'alpine' }] }));
    },
  };

  it.each(['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const)(
    'creates a %s build and stores the manifest the review step showed',
    async (method) => {
      const { page, problems, context } = await browser.open(kiln.baseUrl);
      try {
        await signIn(page, seeded.users.developer.email);
        await startManifest(page, method);
        await goOn(page, 'Method settings');
        await METHOD_FIELDS[method](page);
        if (method === 'kaniko') await screenshot(page, 'wizard-method-kaniko');
        await goOn(page, 'Build configuration');
        await page.getByLabel('Scan tool', { exact: true }).selectOption('grype');
        await page.getByRole('button', { name: 'Add variables' }).click();
        await page.getByLabel('Variables 1 name', { exact: true }).fill('region');
        await page.getByLabel('Variables 1 value', { exact: true }).fill('eu-west-1');
        await goOn(page, 'Tags and environment');
        await page.getByLabel('Tags', { exact: true }).fill(' latest, v1 ,, ');
        await page.getByRole('button', { name: 'Add environment' }).click();
        await page.getByLabel('Environment 1 name', { exact: true }).fill('CI');
        await page.getByLabel('Environment 1 value', { exact: true }).fill('true');
        await page.getByRole('button', { name: 'Add environment' }).click();
        await page.getByLabel('Environment 2 name', { exact: true }).fill('EMPTY');
        await goOn(page, 'Review');
        if (method === 'kaniko') await screenshot(page, 'wizard-review-kaniko');

        const shown = JSON.parse(await text(page.locator('pre.review-body'))) as {
          manifest: Record<string, any>;
        };
        expect(shown).toMatchObject({ tenant_id: seeded.tenantA, project_id: seeded.projectA });
        if (method === 'buildx') {
          expect(shown.manifest['build_config']).toMatchObject({
            platforms: ['linux/amd64', 'linux/arm64'],
            cache_from: ['type=registry,ref=r.example.com/a:c'],
            secrets: { npm: 'vault:kv/data/team/npm#token' },
          });
        }
        expect(shown.manifest).toMatchObject({
          type: method,
          tags: ['latest', 'v1'],
          environment: { CI: 'true' },
          build_config: {
            build_type: method,
            scan_tool: 'grype',
            variables: { region: 'eu-west-1' },
          },
        });

        await page.getByRole('button', { name: 'Create build' }).click();
        await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));
        const id = new URL(page.url()).pathname.split('/')[2]!;

        const response = await admin.request('GET', `/builds/${id}`);
        expect(response.status).toBe(200);
        expect(await response.json()).toMatchObject({
          id,
          project_id: seeded.projectA,
          status: 'queued',
          git_branch: null,
        });
        // GET /builds/{id} carries no manifest: the stored snapshot is read directly.
        const [row] = await kiln.dataSource.query(
          'SELECT method, config FROM builds WHERE id = $1',
          [id],
        );
        expect(row.method).toBe(method);
        // buildx secrets are sealed before they are stored (ADR 0020): their names match.
        const { secrets, ...config } = shown.manifest['build_config'] as Record<string, unknown>;
        expect(row.config.manifest).toMatchObject({ ...shown.manifest, build_config: config });
        const sealed = (row.config.manifest.build_config.secrets ?? {}) as Record<string, string>;
        expect(Object.keys(sealed)).toEqual(Object.keys(secrets ?? {}));
        for (const value of Object.values(sealed)) expect(value).toMatch(/^kiln-sealed:/);
        // A successful create forgets the draft.
        expect(await page.evaluate(() => sessionStorage.getItem('kiln.newBuild'))).toBeNull();
        expect(problems).toEqual([]);
      } finally {
        await context.close();
      }
    },
    60_000,
  );

  it('creates a build from the repository form', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.developer.email);
      await page.locator('main').getByRole('link', { name: 'New build' }).click();
      await page.getByRole('radio', { name: /project’s repository/ }).check();
      await page.getByLabel('Project', { exact: true }).selectOption({ label: 'web' });
      await goOn(page, 'Source');
      expect(await messageOf(page, 'Branch')).toBe('Branch is required');
      expect(await next(page).isDisabled()).toBe(true);
      await page.getByLabel('Branch', { exact: true }).fill('release/1.0');
      await page.getByLabel('Commit (optional)', { exact: true }).fill('not-hex');
      expect(await messageOf(page, 'Commit (optional)')).toBe(
        'A commit is 7 to 40 hexadecimal characters',
      );
      expect(await next(page).isDisabled()).toBe(true);
      await page.getByLabel('Commit (optional)', { exact: true }).fill('');
      await page.getByRole('button', { name: 'Add build arguments' }).click();
      await page.getByLabel('Build arguments 1 name', { exact: true }).fill('NODE_ENV');
      await page.getByLabel('Build arguments 1 value', { exact: true }).fill('production');
      await goOn(page, 'Review');

      const shown = JSON.parse(await text(page.locator('pre.review-body'))) as Record<string, any>;
      expect(shown).toEqual({
        project_id: seeded.projectA,
        git_branch: 'release/1.0',
        build_args: { NODE_ENV: 'production' },
      });
      await page.getByRole('button', { name: 'Create build' }).click();
      await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));
      const id = new URL(page.url()).pathname.split('/')[2]!;
      expect(await (await admin.request('GET', `/builds/${id}`)).json()).toMatchObject({
        project_id: seeded.projectA,
        git_branch: 'release/1.0',
        status: 'queued',
      });
      const [row] = await kiln.dataSource.query('SELECT config FROM builds WHERE id = $1', [id]);
      expect(row.config).toEqual({ form: 'reference', build_args: { NODE_ENV: 'production' } });
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('shows each wizard message beside its field and keeps Next disabled until it is fixed', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.developer.email);
      await page.goto('/builds/new');
      await eventually(async () =>
        expect(await messageOf(page, 'Project')).toBe('Choose a project'),
      );
      expect(await next(page).isDisabled()).toBe(true);
      await page.getByLabel('Project', { exact: true }).selectOption({ label: 'web' });
      await goOn(page, 'Build method');
      expect(await messageOfGroup(page, 'Build method')).toBe('Choose a build method');
      expect(await next(page).isDisabled()).toBe(true);

      const methodStep = async (method: Method) => {
        await page.getByRole('radio', { name: new RegExp(`^${method}:`) }).check();
        await goOn(page, 'Method settings');
      };
      const expectBlocked = async (blocked: boolean) =>
        eventually(async () => expect(await next(page).isDisabled()).toBe(blocked));

      // kaniko: Dockerfile and registry repository, then the build context.
      await methodStep('kaniko');
      expect(await messageOf(page, 'Dockerfile')).toBe(
        'Dockerfile content is required for Kaniko builds',
      );
      expect(await messageOf(page, 'Registry repository')).toBe(
        'Registry repository is required for Kaniko builds',
      );
      await expectBlocked(true);
      await METHOD_FIELDS.kaniko(page);
      expect(await messageOf(page, 'Dockerfile')).toBe('');
      await expectBlocked(false);
      await goOn(page, 'Build configuration');
      await page.getByLabel('Build context', { exact: true }).fill('');
      expect(await messageOf(page, 'Build context')).toBe(
        'Build context is required for Kaniko builds',
      );
      await expectBlocked(true);
      await page.getByLabel('Build context', { exact: true }).fill('.');
      await expectBlocked(false);
      await goOn(page, 'Tags and environment');
      expect(await messageOf(page, 'Tags')).toBe('At least one tag is required');
      await page.getByLabel('Tags', { exact: true }).fill(' , ');
      await expectBlocked(true);
      await page.getByLabel('Tags', { exact: true }).fill('v1');
      await expectBlocked(false);

      const back = async (title: string) => {
        await page.getByRole('button', { name: 'Back' }).click();
        await eventually(async () => expect(await text(heading(page))).toContain(title));
      };
      await back('Build configuration');
      await back('Method settings');
      await back('Build method');

      // container: base image and instructions (blank lines are not instructions).
      await methodStep('container');
      expect(await messageOf(page, 'Base image')).toBe('Base image is required');
      expect(await messageOf(page, 'Instructions')).toBe(
        'At least one build instruction is required',
      );
      await page.getByLabel('Base image', { exact: true }).fill('alpine:3.20');
      await page.getByLabel('Instructions', { exact: true }).fill('\n   \n');
      expect(await messageOf(page, 'Instructions')).toBe(
        'At least one build instruction is required',
      );
      await expectBlocked(true);
      await page.getByLabel('Instructions', { exact: true }).fill('RUN true');
      await expectBlocked(false);
      await back('Build method');

      // paketo: a builder.
      await methodStep('paketo');
      expect(await messageOfGroup(page, 'Builder')).toBe(
        'Buildpack builder selection is required for Paketo builds',
      );
      await expectBlocked(true);
      await page.getByRole('radio', { name: 'paketobuildpacks/builder:tiny' }).check();
      await expectBlocked(false);
      await back('Build method');

      // packer: a template; JSON is parsed here, HCL left to the server.
      await methodStep('packer');
      expect(await messageOf(page, 'Packer template')).toBe(
        'Packer template is required for Packer builds',
      );
      await expectBlocked(true);
      await page.getByLabel('Packer template', { exact: true }).fill('{"builders": [');
      expect(await messageOf(page, 'Packer template')).toMatch(/^The template is not valid JSON: /);
      await expectBlocked(true);
      await page
        .getByLabel('Packer template', { exact: true })
        .fill('source "docker" "x" { image = "alpine" }');
      await expectBlocked(false);
      expect(await text(page.locator('#f-manifest-build_config-packer_template-hint'))).toContain(
        'the server checks it',
      );
      await back('Build method');

      // buildx: Dockerfile content (the server's message).
      await methodStep('buildx');
      await page.getByLabel('Dockerfile', { exact: true }).fill('');
      expect(await messageOf(page, 'Dockerfile')).toBe(
        'Dockerfile content is required for Buildx builds',
      );
      await expectBlocked(true);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('shows a field the server refused on its step, and keeps the draft over an expired session', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl, { width: 360 });
    try {
      await signIn(page, seeded.users.developer.email);
      await startManifest(page, 'paketo');
      await page.getByLabel('Name (optional)', { exact: true }).fill('n'.repeat(300));
      await goOn(page, 'Method settings');
      await METHOD_FIELDS.paketo(page);
      await goOn(page, 'Build configuration');
      await goOn(page, 'Tags and environment');
      await page.getByLabel('Tags', { exact: true }).fill('v1');
      await goOn(page, 'Review');
      // Nothing but the request body scrolls sideways at 360 px.
      expect(
        await page.evaluate(
          () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
        ),
      ).toBeLessThanOrEqual(0);

      // The API stops accepting the token (as when it expires): sign in again, and come back to
      // the same step with the same draft.
      await page.evaluate(() => {
        const key = 'kiln.session';
        const session = JSON.parse(sessionStorage.getItem(key)!) as { token: string };
        sessionStorage.setItem(key, JSON.stringify({ ...session, token: 'expired.token.here' }));
      });
      await page.reload();
      await page.waitForURL((url) => url.pathname === '/sign-in');
      await submitSignIn(page, seeded.users.developer.email);
      await page.waitForURL('**/builds/new');
      await eventually(async () => expect(await text(heading(page))).toContain('Review'));
      expect(await text(page.locator('pre.review-body'))).toContain(
        'paketobuildpacks/builder:full',
      );

      // The server refuses the 300-character name: back on the method step, beside the field.
      await page.getByRole('button', { name: 'Create build' }).click();
      await eventually(async () => expect(await text(heading(page))).toContain('Build method'));
      await eventually(async () => expect(await messageOf(page, 'Name (optional)')).toMatch(/255/));
      await expectAccessible(page);
      await page.getByLabel('Name (optional)', { exact: true }).fill('short');
      expect(await messageOf(page, 'Name (optional)')).toBe('');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('is usable with the keyboard alone: a repository build from the first Tab to the build page', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    /** Presses Tab until the focused element's accessible description matches, at most 40 times. */
    const tabTo = async (what: string) => {
      for (let presses = 0; presses < 40; presses += 1) {
        await page.keyboard.press('Tab');
        const focused = await page.evaluate(() => {
          const element = document.activeElement as HTMLElement | null;
          const label = element?.id ? document.querySelector(`label[for="${element.id}"]`) : null;
          return `${element?.tagName} ${label?.textContent ?? element?.textContent ?? ''} ${element?.getAttribute('value') ?? ''}`;
        });
        if (focused.includes(what)) return;
      }
      throw new Error(`Tab never reached ${what}`);
    };
    try {
      await signIn(page, seeded.users.developer.email);
      await page.goto('/builds/new');
      await eventually(async () => expect(await text(heading(page))).toContain('Project and form'));
      await tabTo('INPUT  manifest'); // the checked radio of the group
      await page.keyboard.press('ArrowDown');
      expect(await page.getByRole('radio', { name: /project’s repository/ }).isChecked()).toBe(
        true,
      );
      await tabTo('SELECT Project');
      await page.keyboard.type('web');
      await tabTo('BUTTON Next');
      await page.keyboard.press('Enter');
      await eventually(async () => expect(await text(heading(page))).toContain('Source'));
      expect(await heading(page).evaluate((h) => h === document.activeElement)).toBe(true);
      await tabTo('INPUT Branch');
      await page.keyboard.type('main');
      // A build arg added from the keyboard: the new row takes the focus, typing fills it.
      await tabTo('BUTTON Add build arguments');
      await page.keyboard.press('Enter');
      await eventually(async () =>
        expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe(
          'Build arguments 1 name',
        ),
      );
      await page.keyboard.type('VERSION');
      await page.keyboard.press('Tab');
      await page.keyboard.type('1.2.3');
      await tabTo('BUTTON Next');
      await page.keyboard.press('Enter');
      await eventually(async () => expect(await text(heading(page))).toContain('Review'));
      expect(JSON.parse(await text(page.locator('pre.review-body')))).toEqual({
        project_id: seeded.projectA,
        git_branch: 'main',
        build_args: { VERSION: '1.2.3' },
      });
      await tabTo('BUTTON Create build');
      await page.keyboard.press('Enter');
      await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('shows the server’s refusal of a branch on the Source step', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.developer.email);
      await page.goto('/builds/new');
      await page.getByRole('radio', { name: /project’s repository/ }).check();
      await page.getByLabel('Project', { exact: true }).selectOption({ label: 'web' });
      await goOn(page, 'Source');
      // Not a valid git reference: only the server knows git's rules.
      await page.getByLabel('Branch', { exact: true }).fill('feature..x');
      await goOn(page, 'Review');
      await page.getByRole('button', { name: 'Create build' }).click();
      await eventually(async () => expect(await text(heading(page))).toContain('Source'));
      const answer = await admin.request('POST', '/builds', {
        project_id: seeded.projectA,
        git_branch: 'feature..x',
      });
      expect(answer.status).toBe(400);
      const { details } = (await answer.json()) as { details: Record<string, string> };
      expect(details['git_branch']).toBeDefined();
      await eventually(async () =>
        expect(await messageOf(page, 'Branch')).toBe(details['git_branch']),
      );
      await expectAccessible(page);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('lists on the review step what the server refused that no field shows', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.developer.email);
      // kiln maps every detail it sends today onto a wizard field, so the browser answers this
      // one create itself, as a newer server could: a 400 naming a field the wizard has not.
      await page.route('**/api/v1/builds', (route) =>
        route.request().method() === 'POST'
          ? route.fulfill({
              status: 400,
              contentType: 'application/json',
              body: JSON.stringify({
                error: 'Invalid request',
                code: 'INVALID_REQUEST',
                details: { 'manifest.metadata.owner': 'is not allowed' },
              }),
            })
          : route.continue(),
      );
      await startManifest(page, 'paketo');
      await goOn(page, 'Method settings');
      await METHOD_FIELDS.paketo(page);
      await goOn(page, 'Build configuration');
      await goOn(page, 'Tags and environment');
      await page.getByLabel('Tags', { exact: true }).fill('v1');
      await goOn(page, 'Review');
      await page.getByRole('button', { name: 'Create build' }).click();
      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toContain(
          'manifest.metadata.owner: is not allowed',
        ),
      );
      expect(await text(heading(page))).toContain('Review');
      await expectAccessible(page);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('keeps the draft and says so when kiln cannot be reached on create, then creates on retry', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.developer.email);
      await startManifest(page, 'kaniko');
      await goOn(page, 'Method settings');
      await METHOD_FIELDS.kaniko(page);
      await goOn(page, 'Build configuration');
      await goOn(page, 'Tags and environment');
      await page.getByLabel('Tags', { exact: true }).fill('v1');
      await goOn(page, 'Review');
      // The network fails under the create: the connection is dropped before any answer.
      const dropCreate = (route: Route) =>
        route.request().method() === 'POST' ? route.abort('connectionreset') : route.continue();
      await page.route('**/api/v1/builds', dropCreate);
      await page.getByRole('button', { name: 'Create build' }).click();
      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toContain('kiln could not be reached'),
      );
      expect(await text(heading(page))).toContain('Review');
      await page.unroute('**/api/v1/builds', dropCreate);

      await page.getByRole('button', { name: 'Create build' }).click();
      await page.waitForURL((url) => /^\/builds\/[0-9a-f-]{36}$/.test(url.pathname));
      expect(problems.filter((p) => !p.includes('net::ERR_CONNECTION_RESET'))).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('offers a viewer no New build, and refuses the page if opened', async () => {
    const { page, problems, context } = await browser.open(kiln.baseUrl);
    try {
      await signIn(page, seeded.users.viewer.email);
      await page.locator('table.builds, [role=status]').first().waitFor();
      expect(await page.getByRole('link', { name: 'New build' }).count()).toBe(0);
      await page.goto('/builds/new');
      await eventually(async () =>
        expect(await text(page.getByRole('alert'))).toContain('cannot create builds'),
      );
      expect(await page.getByRole('button', { name: 'Next' }).count()).toBe(0);
      await expectAccessible(page);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
