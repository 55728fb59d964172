import { ProjectsService } from '../src/projects/projects.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** Small, so a handful of builds is past it. */
const EXACT_COUNT_LIMIT = 3;

/**
 * GET /builds total_count and has_more (docs/adr/0023-list-counts-and-build-numbers.md), over
 * real HTTP and Postgres. Autovacuum is off in this suite's database: the planner's statistics
 * change only when a test runs ANALYZE.
 */
describe('GET /builds total_count and has_more', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_LIST_EXACT_COUNT_LIMIT: String(EXACT_COUNT_LIMIT) },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    await kiln.dataSource.query('ALTER TABLE builds SET (autovacuum_enabled = false)');
  });

  afterAll(async () => {
    await kiln.close();
  });

  async function newProject(name: string): Promise<string> {
    return (await kiln.app.get(ProjectsService).create(seeded.tenantA, name)).id;
  }

  async function list(query: string): Promise<Record<string, any>> {
    const response = await admin.request('GET', `/builds?${query}`);
    expect(response.status).toBe(200);
    return jsonOf(response);
  }

  /** The planner's estimate of a project's builds, as EXPLAIN gives it for the list's filters. */
  async function plannerEstimate(projectId: string): Promise<number> {
    const [row] = await kiln.dataSource.query<Array<{ 'QUERY PLAN': any }>>(
      'EXPLAIN (FORMAT JSON) SELECT 1 FROM builds b WHERE b.tenant_id = $1 AND b.project_id = $2',
      [seeded.tenantA, projectId],
    );
    return Math.round(row!['QUERY PLAN'][0].Plan['Plan Rows']);
  }

  it('counts exactly up to the limit, with and without the status and project filters', async () => {
    const counted = await newProject('counted');
    const other = await newProject('counted-other');
    const builds = [];
    for (let i = 0; i < 6; i++) builds.push(await admin.createBuild(counted, `c-${i}`));
    for (let i = 0; i < 2; i++) await admin.createBuild(other, `o-${i}`);
    for (const build of builds.slice(0, EXACT_COUNT_LIMIT)) {
      expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    }

    const running = await list(`project_id=${counted}&status=in_progress&limit=1`);
    const runningAnywhere = await list('status=in_progress&limit=2');
    const ofOther = await list(`project_id=${other}&limit=1`);
    const queuedOfOther = await list(`project_id=${other}&status=queued&limit=1&page=2`);

    expect(running).toMatchObject({ total_count: EXACT_COUNT_LIMIT, has_more: true });
    expect(runningAnywhere).toMatchObject({ total_count: EXACT_COUNT_LIMIT, has_more: true });
    expect(ofOther).toMatchObject({ total_count: 2, has_more: true });
    expect(queuedOfOther).toMatchObject({ total_count: 2, has_more: false });
  });

  it('answers no less than the limit + 1 past the limit, though the planner expects fewer', async () => {
    const project = await newProject('underestimated');
    // Statistics taken before the project had builds: the planner expects next to none.
    await kiln.dataSource.query('ANALYZE builds');
    for (let i = 0; i < 12; i++) await admin.createBuild(project, `u-${i}`);
    const estimate = await plannerEstimate(project);

    const page = await list(`project_id=${project}&limit=2`);

    expect(estimate).toBeLessThan(EXACT_COUNT_LIMIT + 1);
    expect(page).toMatchObject({ total_count: EXACT_COUNT_LIMIT + 1, has_more: true });
    expect(page.builds).toHaveLength(2);
  });

  describe('past the limit, with statistics that expect more builds than there are', () => {
    let project: string;
    let estimate: number;
    const remaining = 6;

    beforeAll(async () => {
      project = await newProject('overestimated');
      const created = [];
      for (let i = 0; i < 12; i++) created.push(await admin.createBuild(project, `e-${i}`));
      await kiln.dataSource.query('ANALYZE builds');
      for (const build of created.slice(remaining)) {
        expect((await admin.request('DELETE', `/builds/${build.id}`)).status).toBe(204);
      }
      estimate = await plannerEstimate(project);
    });

    it("answers the planner's estimate rather than counting every build", async () => {
      const page = await list(`project_id=${project}&limit=2`);

      expect(estimate).toBeGreaterThan(remaining);
      expect(page).toMatchObject({ total_count: estimate, has_more: true });
    });

    it('keeps has_more exact on the page before the last, and counts exactly on the last', async () => {
      const beforeLast = await list(`project_id=${project}&limit=2&page=2`);
      const last = await list(`project_id=${project}&limit=2&page=3`);
      const exactlyFull = await list(`project_id=${project}&limit=3&page=2`);

      expect(beforeLast).toMatchObject({ has_more: true, total_count: estimate });
      expect(beforeLast.builds).toHaveLength(2);
      expect(last).toMatchObject({ has_more: false, total_count: remaining });
      expect(last.builds).toHaveLength(2);
      expect(exactlyFull).toMatchObject({ has_more: false, total_count: remaining });
      expect(exactlyFull.builds).toHaveLength(3);
    });

    it('answers an empty page past the end with no more pages and a total no larger than its offset', async () => {
      const past = await list(`project_id=${project}&limit=2&page=5`);

      expect(past).toMatchObject({ builds: [], has_more: false });
      expect(past.total_count).toBe(Math.min(estimate, 8));
    });
  });
});
