import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const MISSING = '6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11';

describe('builds API', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let runner: FakeRunner;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
  });

  afterAll(async () => {
    await kiln.close();
  });

  async function startedBuild(branch: string): Promise<Record<string, any>> {
    const build = await admin.createBuild(seeded.projectA, branch);
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    return build;
  }

  describe('POST /builds (reference form)', () => {
    it('creates a queued build with the next build number and answers the spec subset unwrapped', async () => {
      const response = await admin.request('POST', '/builds', {
        project_id: seeded.projectA,
        git_branch: 'feature/login',
        git_commit: 'ABCDEF1234567',
        build_args: { NODE_ENV: 'production' },
      });

      expect(response.status).toBe(201);
      const body = await jsonOf(response);
      expect(Object.keys(body).sort()).toEqual(
        [
          'build_number',
          'created_at',
          'git_branch',
          'id',
          'project_id',
          'status',
          'updated_at',
        ].sort(),
      );
      expect(body).toMatchObject({
        project_id: seeded.projectA,
        git_branch: 'feature/login',
        status: 'queued',
      });
      const full = await jsonOf(await admin.request('GET', `/builds/${body.id}`));
      expect(full).toMatchObject({
        git_commit: 'abcdef1234567',
        started_at: null,
        completed_at: null,
        error_message: null,
      });
    });

    it('numbers builds of a project 1, 2, 3 and never reuses a number after a delete', async () => {
      const { projectA } = seeded;
      const project = await kiln.app
        .get((await import('../src/projects/projects.service.js')).ProjectsService)
        .create(seeded.tenantA, 'numbering');
      const a = await admin.createBuild(project.id, 'a');
      // Another project's build in between takes none of this project's numbers.
      await admin.createBuild(projectA, 'numbering-elsewhere');
      const b = await admin.createBuild(project.id, 'b');
      expect((await admin.request('DELETE', `/builds/${b.id}`)).status).toBe(204);
      const c = await admin.createBuild(project.id, 'c');

      expect([a.build_number, b.build_number, c.build_number]).toEqual([1, 2, 3]);
      const listed = await jsonOf(
        await admin.request(
          'GET',
          `/builds?project_id=${project.id}&sort_by=build_number&sort_order=asc`,
        ),
      );
      expect(listed.builds.map((build: any) => [build.id, build.build_number])).toEqual([
        [a.id, 1],
        [c.id, 3],
      ]);
    });

    it.each([
      ['project_id missing', { git_branch: 'main' }, 'project_id', /project_id is required/],
      [
        'project_id not a UUID',
        { project_id: 'web', git_branch: 'main' },
        'project_id',
        /project_id must be a UUID/,
      ],
      ['git_branch missing', { project_id: MISSING }, 'git_branch', /git_branch is required/],
      ['an invalid branch', { project_id: MISSING, git_branch: 'a..b' }, 'git_branch', /'\.\.'/],
      [
        'a branch of 256 characters',
        { project_id: MISSING, git_branch: 'b'.repeat(256) },
        'git_branch',
        /255/,
      ],
      [
        'a short commit',
        { project_id: MISSING, git_branch: 'main', git_commit: 'abc12' },
        'git_commit',
        /7 and 40|7 to 40/,
      ],
      [
        'a non-hex commit',
        { project_id: MISSING, git_branch: 'main', git_commit: 'zzzzzzz' },
        'git_commit',
        /hexadecimal/,
      ],
      [
        'non-string build args',
        { project_id: MISSING, git_branch: 'main', build_args: { N: 1 } },
        'build_args',
        /string values/,
      ],
    ])('refuses %s with 400 naming the field', async (_name, body, field, message) => {
      const response = await admin.request('POST', '/builds', body);

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expect(error.code).toBe('INVALID_REQUEST');
      expect(error.details[field]).toMatch(message);
      expect(error.error).toContain(field);
    });

    it.each([
      'status',
      'tenant_id_ref',
      'build_number',
      'created_by',
      'serviceAccountName',
      'privileged',
    ])('refuses the unknown field %s and stores nothing', async (field) => {
      const before = await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds');
      const response = await admin.request('POST', '/builds', {
        project_id: seeded.projectA,
        git_branch: `mass-${field}`,
        [field]: 'x',
      });
      const after = await kiln.dataSource.query('SELECT count(*)::int AS n FROM builds');

      expect(response.status).toBe(400);
      expect((await jsonOf(response)).details[field]).toBe(`property ${field} should not exist`);
      expect(after[0].n).toBe(before[0].n);
    });

    it('answers 404 naming project_id for an unknown project and for another tenant’s project', async () => {
      const unknown = await admin.request('POST', '/builds', {
        project_id: MISSING,
        git_branch: 'main',
      });
      const foreign = await admin.request('POST', '/builds', {
        project_id: seeded.projectB,
        git_branch: 'main',
      });

      for (const response of [unknown, foreign]) {
        expect(response.status).toBe(404);
        expect(await jsonOf(response)).toMatchObject({
          code: 'NOT_FOUND',
          details: { project_id: expect.any(String) },
        });
      }
    });

    it('answers 409 naming the existing build for the same request while the first is queued, and creates it again once that one ended', async () => {
      const first = await admin.createBuild(seeded.projectA, 'dup', { git_commit: 'a1b2c3d' });
      const second = await admin.request('POST', '/builds', {
        project_id: seeded.projectA,
        git_branch: 'dup',
        git_commit: 'a1b2c3d',
      });

      expect(second.status).toBe(409);
      expect(await jsonOf(second)).toMatchObject({
        code: 'CONFLICT',
        error: expect.stringContaining('same configuration'),
        details: { build_id: first.id },
      });
      expect((await admin.request('POST', `/builds/${first.id}/start`)).status).toBe(200);
      expect((await admin.request('POST', `/builds/${first.id}/cancel`)).status).toBe(200);
      const again = await admin.createBuild(seeded.projectA, 'dup', { git_commit: 'a1b2c3d' });
      expect(again.id).not.toBe(first.id);
    });

    it('creates builds of one branch and commit side by side when their build args differ', async () => {
      const api = await admin.createBuild(seeded.projectA, 'mono', {
        git_commit: 'b1b2c3d',
        build_args: { SERVICE: 'api' },
      });
      const worker = await admin.request('POST', '/builds', {
        project_id: seeded.projectA,
        git_branch: 'mono',
        git_commit: 'b1b2c3d',
        build_args: { SERVICE: 'worker' },
      });

      expect(worker.status).toBe(201);
      expect((await jsonOf(worker)).id).not.toBe(api.id);
    });

    it('replays the original build for a repeated Idempotency-Key and refuses the key with another body', async () => {
      const body = { project_id: seeded.projectA, git_branch: 'idem' };
      const first = await admin.request('POST', '/builds', body, { 'idempotency-key': 'req-1' });
      const again = await admin.request('POST', '/builds', body, { 'idempotency-key': 'req-1' });
      const other = await admin.request(
        'POST',
        '/builds',
        { ...body, git_branch: 'idem-2' },
        { 'idempotency-key': 'req-1' },
      );

      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await jsonOf(again)).id).toBe((await jsonOf(first)).id);
      expect(other.status).toBe(409);
      expect(await jsonOf(other)).toMatchObject({
        code: 'CONFLICT',
        details: { 'Idempotency-Key': expect.any(String) },
      });
    });

    it('gives 50 concurrent creates on one project the numbers 1..50 exactly once', async () => {
      const project = await kiln.app
        .get((await import('../src/projects/projects.service.js')).ProjectsService)
        .create(seeded.tenantA, 'concurrent');
      const created = await Promise.all(
        Array.from({ length: 50 }, (_, i) => admin.createBuild(project.id, `c-${i}`)),
      );

      expect(created.map((b) => b.build_number).sort((x, y) => x - y)).toEqual(
        Array.from({ length: 50 }, (_, i) => i + 1),
      );
    });
  });

  describe('POST /builds (wizard form)', () => {
    it.each(['kaniko', 'buildx', 'container', 'paketo', 'packer'] as const)(
      'accepts the manifest the wizard sends for %s and answers { data: Build }',
      async (type) => {
        const response = await admin.request('POST', '/builds', {
          tenant_id: seeded.tenantA,
          project_id: seeded.projectA,
          manifest: wizardManifest(type),
        });

        expect(response.status).toBe(201);
        const body = await jsonOf(response);
        expect(body.data).toMatchObject({
          project_id: seeded.projectA,
          status: 'queued',
          git_branch: null,
        });
        const [row] = await kiln.dataSource.query(
          'SELECT method, config FROM builds WHERE id = $1',
          [body.data.id],
        );
        expect(row.method).toBe(type);
        expect(row.config.manifest.tags).toEqual(['latest', 'v1']);
        expect(row.config.manifest.environment).toEqual({ CI: 'true' });
      },
    );

    it('builds two images of one project side by side, and refuses the same configuration again whatever its name and metadata', async () => {
      const project = await kiln.app
        .get((await import('../src/projects/projects.service.js')).ProjectsService)
        .create(seeded.tenantA, 'monorepo');
      const image = (service: string, name = `${service} image`) => {
        const manifest = wizardManifest('kaniko');
        const config = manifest['build_config'] as Record<string, unknown>;
        config['registry_repository'] = `registry.example.com/team/${service}`;
        config['build_args'] = { SERVICE: service };
        return {
          tenant_id: seeded.tenantA,
          project_id: project.id,
          manifest: { ...manifest, name, metadata: { asked_by: name } },
        };
      };

      const api = await admin.request('POST', '/builds', image('api'));
      const worker = await admin.request('POST', '/builds', image('worker'));
      const apiAgain = await admin.request('POST', '/builds', image('api', 'api, once more'));

      expect([api.status, worker.status, apiAgain.status]).toEqual([201, 201, 409]);
      expect(await jsonOf(apiAgain)).toMatchObject({
        code: 'CONFLICT',
        details: { build_id: (await jsonOf(api)).data.id },
      });
    });

    it.each([
      ['container', { base_image: '' }, 'manifest.base_image', 'Base image is required'],
      [
        'container',
        { instructions: [] },
        'manifest.instructions',
        'At least one build instruction is required',
      ],
      [
        'kaniko',
        { build_config: { dockerfile: '' } },
        'manifest.build_config.dockerfile',
        'Dockerfile content is required for Kaniko builds',
      ],
      [
        'kaniko',
        { build_config: { build_context: '' } },
        'manifest.build_config.build_context',
        'Build context is required for Kaniko builds',
      ],
      [
        'kaniko',
        { build_config: { registry_repository: '' } },
        'manifest.build_config.registry_repository',
        'Registry repository is required for Kaniko builds',
      ],
      [
        'paketo',
        { build_config: { paketo_config: { builder: '' } } },
        'manifest.build_config.paketo_config.builder',
        'Buildpack builder selection is required for Paketo builds',
      ],
      [
        'packer',
        { build_config: { packer_template: '' } },
        'manifest.build_config.packer_template',
        'Packer template is required for Packer builds',
      ],
      ['buildx', { tags: '' }, 'manifest.tags', 'At least one tag is required'],
    ] as const)(
      'refuses a %s manifest with the wizard message "%s"',
      async (type, change, field, message) => {
        const manifest = wizardManifest(type);
        const { build_config: configChange, ...topChange } = change as Record<string, any>;
        Object.assign(manifest, topChange);
        if (configChange !== undefined)
          Object.assign(manifest['build_config'] as object, configChange);

        const response = await admin.request('POST', '/builds', {
          tenant_id: seeded.tenantA,
          project_id: seeded.projectA,
          manifest,
        });

        expect(response.status).toBe(400);
        expect((await jsonOf(response)).details[field]).toBe(message);
      },
    );

    it("captures the spec at create (the project's repository and registry as they were then) and a retry runs the same spec", async () => {
      await kiln.dataSource.query(
        `UPDATE projects SET git_repository_url = $1, default_registry = $2 WHERE id = $3`,
        ['https://git.example.com/a/web.git', 'harbor.example.com/team', seeded.projectA],
      );
      const manifest = wizardManifest('buildx');
      (manifest['build_config'] as Record<string, unknown>)['build_args'] = { B: '2' };
      const created = await jsonOf(
        await admin.request('POST', '/builds', {
          tenant_id: seeded.tenantA,
          project_id: seeded.projectA,
          manifest,
        }),
      );
      const id: string = created.data.id;
      // What the project says later does not change what the build runs.
      await kiln.dataSource.query(
        `UPDATE projects SET git_repository_url = $1, default_registry = NULL WHERE id = $2`,
        ['https://git.example.com/a/moved.git', seeded.projectA],
      );
      await admin.request('POST', `/builds/${id}/start`);

      const expected = {
        version: 1,
        form: 'wizard',
        method: 'buildx',
        config: {
          dockerfile: 'FROM scratch\nCOPY . /\n',
          platforms: ['linux/amd64', 'linux/arm64'],
        },
        source: {
          repository: 'https://git.example.com/a/web.git',
          branch: null,
          commit: null,
          context: '.',
        },
        output: {
          repository: 'harbor.example.com/team/web',
          tags: ['latest', 'v1'],
          registryType: 'harbor',
        },
        sbomTool: 'syft',
        scanTool: 'trivy',
        scanPolicy: null,
        secretManager: 'vault',
        env: { CI: 'true' },
        buildArgs: { B: '2' },
        timeoutSeconds: 3600,
      };
      expect(runner.specs.get(id)).toEqual(expected);

      await runner.fail(id);
      const retried = await jsonOf(await admin.request('POST', `/builds/${id}/retry`));
      await admin.request('POST', `/builds/${retried.id}/start`);

      expect(runner.specs.get(retried.id)).toEqual(expected);
    });

    it('answers 403 when tenant_id differs from X-Tenant-ID', async () => {
      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantB,
        project_id: seeded.projectA,
        manifest: wizardManifest('kaniko'),
      });

      expect(response.status).toBe(403);
    });
  });

  describe('GET /builds', () => {
    it('pages, filters and sorts the tenant’s builds only', async () => {
      const project = await kiln.app
        .get((await import('../src/projects/projects.service.js')).ProjectsService)
        .create(seeded.tenantA, 'listing');
      for (let i = 0; i < 5; i++) await admin.createBuild(project.id, `l-${i}`);

      const page1 = await jsonOf(
        await admin.request(
          'GET',
          `/builds?project_id=${project.id}&limit=2&sort_by=build_number&sort_order=asc`,
        ),
      );
      const page3 = await jsonOf(
        await admin.request(
          'GET',
          `/builds?project_id=${project.id}&limit=2&page=3&sort_by=build_number&sort_order=asc`,
        ),
      );
      const queued = await jsonOf(await admin.request('GET', `/builds?status=queued&limit=100`));

      expect(page1).toMatchObject({ total_count: 5, page: 1, limit: 2, has_more: true });
      expect(page1.builds.map((b: any) => b.build_number)).toEqual([1, 2]);
      expect(page3).toMatchObject({ page: 3, has_more: false });
      expect(page3.builds.map((b: any) => b.build_number)).toEqual([5]);
      expect(queued.builds.every((b: any) => b.status === 'queued')).toBe(true);
      expect(JSON.stringify(queued)).not.toContain(seeded.projectB);
    });

    it('defaults to page 1, 20 per page, newest first', async () => {
      const body = await jsonOf(await admin.request('GET', '/builds'));
      const created = body.builds.map((b: any) => b.created_at);

      expect(body).toMatchObject({ page: 1, limit: 20 });
      expect(created).toEqual([...created].sort().reverse());
    });

    it.each([
      ['page=0', 'page'],
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=1000000', 'limit'],
      ['page=abc', 'page'],
      ['status=done', 'status'],
      ['project_id=nope', 'project_id'],
      ['sort_by=name', 'sort_by'],
      ['sort_order=up', 'sort_order'],
      ['colour=red', 'colour'],
    ])('refuses %s with 400 naming the parameter', async (query, field) => {
      const response = await admin.request('GET', `/builds?${query}`);

      expect(response.status).toBe(400);
      expect((await jsonOf(response)).details).toHaveProperty(field);
    });
  });

  describe('GET /builds/{id}', () => {
    it('answers 400 for an id that is not a UUID and 404 for a missing or foreign build', async () => {
      const foreign = new ApiClient(
        kiln,
        await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
        seeded.tenantB,
      );
      const theirs = await foreign.createBuild(seeded.projectB, 'theirs');

      const bad = await admin.request('GET', '/builds/42');
      const missing = await admin.request('GET', `/builds/${MISSING}`);
      const other = await admin.request('GET', `/builds/${theirs.id}`);

      expect(bad.status).toBe(400);
      expect(missing.status).toBe(404);
      expect(other.status).toBe(404);
      const [a, b] = [await jsonOf(missing), await jsonOf(other)];
      expect({ ...a, timestamp: 0, trace_id: 0 }).toEqual({ ...b, timestamp: 0, trace_id: 0 });
    });
  });

  describe('lifecycle', () => {
    it('starts a queued build, hands it to the runner, and refuses a second start with 409 naming the status', async () => {
      const build = await admin.createBuild(seeded.projectA, 'start-me');

      const started = await admin.request('POST', `/builds/${build.id}/start`);
      const again = await admin.request('POST', `/builds/${build.id}/start`);

      expect(started.status).toBe(200);
      expect(await jsonOf(started)).toMatchObject({
        status: 'in_progress',
        started_at: expect.any(String),
      });
      expect(runner.started).toContain(build.id);
      expect(again.status).toBe(409);
      expect(await jsonOf(again)).toMatchObject({
        code: 'CONFLICT',
        details: { status: 'in_progress' },
      });
    });

    it('cancels a running build with a reason and refuses to cancel a queued one', async () => {
      const running = await startedBuild('cancel-me');
      const queued = await admin.createBuild(seeded.projectA, 'not-running');

      const cancelled = await admin.request('POST', `/builds/${running.id}/cancel`, {
        reason: 'superseded',
      });
      const refused = await admin.request('POST', `/builds/${queued.id}/cancel`);

      expect(cancelled.status).toBe(200);
      expect(await jsonOf(cancelled)).toMatchObject({
        status: 'cancelled',
        completed_at: expect.any(String),
      });
      expect(runner.cancelled).toContain(running.id);
      const [row] = await kiln.dataSource.query('SELECT cancel_reason FROM builds WHERE id = $1', [
        running.id,
      ]);
      expect(row.cancel_reason).toBe('superseded');
      expect(refused.status).toBe(409);
      expect(await jsonOf(refused)).toMatchObject({ details: { status: 'queued' } });
    });

    it('refuses a cancel body with unknown fields', async () => {
      const running = await startedBuild('cancel-body');
      const response = await admin.request('POST', `/builds/${running.id}/cancel`, {
        reason: 'x',
        force: true,
      });

      expect(response.status).toBe(400);
    });

    it('retries a failed build as a new queued build with the same configuration and retry_of', async () => {
      const build = await admin.createBuild(seeded.projectA, 'flaky', { build_args: { A: '1' } });
      await admin.request('POST', `/builds/${build.id}/start`);
      await runner.fail(build.id);

      const retried = await admin.request('POST', `/builds/${build.id}/retry`);

      expect(retried.status).toBe(200);
      const body = await jsonOf(retried);
      expect(body).toMatchObject({
        status: 'queued',
        git_branch: 'flaky',
        project_id: seeded.projectA,
      });
      expect(body.id).not.toBe(build.id);
      expect(body.build_number).toBeGreaterThan(build.build_number);
      const [row] = await kiln.dataSource.query(
        'SELECT retry_of, config FROM builds WHERE id = $1',
        [body.id],
      );
      expect(row).toEqual({
        retry_of: build.id,
        config: { form: 'reference', build_args: { A: '1' } },
      });
      expect((await jsonOf(await admin.request('GET', `/builds/${build.id}`))).status).toBe(
        'failed',
      );
    });

    it('refuses to retry a build that did not fail', async () => {
      const build = await admin.createBuild(seeded.projectA, 'fine');

      const response = await admin.request('POST', `/builds/${build.id}/retry`);

      expect(response.status).toBe(409);
      expect(await jsonOf(response)).toMatchObject({ details: { status: 'queued' } });
    });

    it('records a runner failure with its message and reason', async () => {
      const build = await startedBuild('broken');
      await runner.fail(build.id, 'OutOfMemory', 'container build was OOMKilled');

      const body = await jsonOf(await admin.request('GET', `/builds/${build.id}`));
      expect(body).toMatchObject({
        status: 'failed',
        error_message: 'container build was OOMKilled',
        completed_at: expect.any(String),
      });
    });

    it('fails the build with InternalError when the runner cannot start it', async () => {
      const build = await admin.createBuild(seeded.projectA, 'no-runner');
      runner.failNextStart = true;

      const response = await admin.request('POST', `/builds/${build.id}/start`);

      expect(response.status).toBe(200);
      expect(await jsonOf(response)).toMatchObject({
        status: 'failed',
        error_message: 'The build could not be started by the runner',
      });
      const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
        build.id,
      ]);
      expect(row.failure_reason).toBe('InternalError');
    });

    it('lets exactly one of a cancel and a racing runner success win', async () => {
      for (let i = 0; i < 10; i++) {
        const build = await startedBuild(`race-${i}`);
        const [cancel, success] = await Promise.allSettled([
          admin.request('POST', `/builds/${build.id}/cancel`),
          runner.succeed(build.id),
        ]);
        const cancelWon = cancel.status === 'fulfilled' && cancel.value.status === 200;
        const successWon = success.status === 'fulfilled';

        expect(cancelWon !== successWon).toBe(true);
        const final = (await jsonOf(await admin.request('GET', `/builds/${build.id}`))).status;
        expect(final).toBe(cancelWon ? 'cancelled' : 'success');
      }
    });
  });

  describe('GET /builds/{id}/status', () => {
    it('reports progress from the runner’s steps and estimates completion from the project’s history', async () => {
      const project = await kiln.app
        .get((await import('../src/projects/projects.service.js')).ProjectsService)
        .create(seeded.tenantA, 'history');
      const done = await admin.createBuild(project.id, 'h1');
      await admin.request('POST', `/builds/${done.id}/start`);
      await kiln.dataSource.query(
        `UPDATE builds SET started_at = now() - interval '120 seconds' WHERE id = $1`,
        [done.id],
      );
      await runner.succeed(done.id);
      const build = await admin.createBuild(project.id, 'h2');
      await admin.request('POST', `/builds/${build.id}/start`);
      await runner.progress(build.id, 3, 12);

      const status = await jsonOf(await admin.request('GET', `/builds/${build.id}/status`));

      expect(status).toMatchObject({
        build_id: build.id,
        status: 'in_progress',
        progress: { current_step: 3, total_steps: 12, percentage: 25 },
        error: null,
      });
      const eta = Date.parse(status.estimated_completion) - Date.parse(status.started_at);
      expect(eta).toBeGreaterThan(115_000);
      expect(eta).toBeLessThan(125_000);
    });

    it('reports no progress and no estimate for a queued build without history', async () => {
      const build = await admin.createBuild(seeded.projectA, 'fresh');

      expect(await jsonOf(await admin.request('GET', `/builds/${build.id}/status`))).toMatchObject({
        status: 'queued',
        progress: null,
        started_at: null,
        estimated_completion: null,
      });
    });
  });

  describe('DELETE /builds/{id}', () => {
    it('deletes a finished build, asks the runner to remove its resources, and then answers 404', async () => {
      const build = await startedBuild('delete-me');
      await runner.succeed(build.id);

      const deleted = await admin.request('DELETE', `/builds/${build.id}`);

      expect(deleted.status).toBe(204);
      expect(await deleted.text()).toBe('');
      expect(runner.removed).toContain(build.id);
      expect((await admin.request('GET', `/builds/${build.id}`)).status).toBe(404);
    });

    it('refuses to delete a running build', async () => {
      const build = await startedBuild('busy');

      const response = await admin.request('DELETE', `/builds/${build.id}`);

      expect(response.status).toBe(409);
      expect(await jsonOf(response)).toMatchObject({ details: { status: 'in_progress' } });
    });
  });
});
