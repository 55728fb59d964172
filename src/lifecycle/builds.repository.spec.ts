import type { DataSource, QueryRunner } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { BUILD_SORT_KEYS, type BuildListQuery, BuildsRepository } from './builds.repository.js';

/** Medium tests: BuildsRepository on a real migrated Postgres. */
describe(BuildsRepository.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let builds: BuildsRepository;

  beforeAll(async () => {
    ground = await lifecycleGround('repository');
    dataSource = ground.dataSource;
    builds = new BuildsRepository(dataSource);
  });

  afterAll(async () => {
    await ground.close();
  });

  async function numbersOf(projectId: string): Promise<number[]> {
    const rows = await dataSource.query<Array<{ build_number: number }>>(
      'SELECT build_number FROM builds WHERE project_id = $1 ORDER BY build_number',
      [projectId],
    );
    return rows.map((row) => row.build_number);
  }

  /** Resolves once a backend of this database waits for a lock in a statement LIKE `pattern`. */
  async function untilWaitingForLock(pattern: string, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const [row] = await dataSource.query<Array<{ n: number }>>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`,
        [pattern],
      );
      if (row!.n > 0) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  describe('build numbers', () => {
    it('never hands out again the number of a create refused after taking it', async () => {
      const projectId = await ground.newProject('refused');
      const first = await builds.insert(ground.newBuild({ projectId, gitBranch: 'taken' }));

      const duplicate = await builds.insert(ground.newBuild({ projectId, gitBranch: 'taken' }));
      const next = await builds.insert(ground.newBuild({ projectId }));

      expect([first.kind, duplicate.kind, next.kind]).toEqual(['created', 'duplicate', 'created']);
      expect(await numbersOf(projectId)).toEqual([1, 3]);
    });

    it("answers project-missing for another tenant's project and takes none of its numbers", async () => {
      const projectId = await ground.newProject('foreign');
      const [{ id: otherTenant }] = await dataSource.query<[{ id: string }]>(
        `INSERT INTO tenants (name) VALUES ('repository-other') RETURNING id`,
      );

      const outcome = await builds.insert(ground.newBuild({ tenantId: otherTenant, projectId }));
      const own = await builds.insert(ground.newBuild({ projectId }));

      expect(outcome).toEqual({ kind: 'project-missing' });
      expect(own).toMatchObject({ kind: 'created', build: { buildNumber: 1 } });
    });

    it("lets other creates of the project go on while one create's insert waits", async () => {
      const projectId = await ground.newProject('unlocked');
      // An uncommitted queued build of the configuration `held`: a create of the same one waits
      // for it to commit or roll back before it can tell whether it is a duplicate.
      const held = ground.newBuild({ projectId, gitBranch: 'held' });
      const holder: QueryRunner = dataSource.createQueryRunner();
      await holder.connect();
      await holder.startTransaction();
      const stop = new AbortController();
      try {
        await holder.query(
          `INSERT INTO builds (tenant_id, project_id, build_number, git_branch, config, spec, spec_digest)
           VALUES ($1, $2, 1000, 'held', '{}', '{}', $3)`,
          [ground.tenantId, projectId, held.specDigest],
        );
        const waiting = builds.insert(held);
        await untilWaitingForLock('INSERT INTO "builds"%', stop.signal);

        const other = builds.insert(ground.newBuild({ projectId }));
        const first = await Promise.race([
          other.then(() => 'the other create finished'),
          untilWaitingForLock('UPDATE projects%', stop.signal).then(
            () => 'the other create waits for the project row',
          ),
        ]);
        stop.abort();
        await holder.commitTransaction();

        expect(first).toBe('the other create finished');
        expect(await other).toMatchObject({ kind: 'created', build: { buildNumber: 2 } });
        expect(await waiting).toEqual({ kind: 'duplicate' });
        expect(await builds.insert(ground.newBuild({ projectId }))).toMatchObject({
          build: { buildNumber: 3 },
        });
        expect(await numbersOf(projectId)).toEqual([2, 3, 1000]);
      } finally {
        stop.abort();
        if (holder.isTransactionActive) await holder.rollbackTransaction();
        await holder.release();
      }
    });
  });

  describe('list queries', () => {
    interface PlanNode {
      readonly 'Node Type': string;
      readonly 'Relation Name'?: string;
      readonly Filter?: string;
      readonly 'Actual Loops'?: number;
      readonly Plans?: PlanNode[];
    }

    /** Every node of a JSON plan, depth first. */
    const nodesOf = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];

    /** The page query list() sends for `query` (watched on its way to Postgres, not changed). */
    async function pageQueryOf(query: BuildListQuery): Promise<[string, unknown[]]> {
      const probe = dataSource.createQueryRunner();
      const sent = jest.spyOn(Object.getPrototypeOf(probe) as QueryRunner, 'query');
      try {
        await builds.list(query);
        const [sql, parameters] = sent.mock.calls.find(([text]) => text.includes('ORDER BY'))!;
        return [sql, (parameters as unknown[] | undefined) ?? []];
      } finally {
        sent.mockRestore();
        await probe.release();
      }
    }

    /** The builds scans of the plan of `sql` on a connection with `settings`. */
    async function buildsScans(
      [sql, parameters]: [string, unknown[]],
      explain: string,
      settings: string[] = [],
    ): Promise<PlanNode[]> {
      const planner = dataSource.createQueryRunner();
      await planner.connect();
      try {
        for (const setting of settings) await planner.query(`SET ${setting}`);
        const [row] = (await planner.query(`EXPLAIN (${explain}) ${sql}`, parameters)) as Array<{
          'QUERY PLAN': Array<{ Plan: PlanNode }>;
        }>;
        const nodes = nodesOf(row!['QUERY PLAN'][0]!.Plan);
        expect(nodes.map((node) => node['Node Type'])).not.toContain('Sort');
        return nodes.filter((node) => node['Relation Name'] === 'builds');
      } finally {
        await planner.release();
      }
    }

    const filters = [
      ['no filter', {}],
      ['status', { status: 'failed' }],
      ['project', { project: true }],
      ['status and project', { status: 'failed', project: true }],
    ] as const;
    const cases = BUILD_SORT_KEYS.flatMap((sortBy) =>
      (['asc', 'desc'] as const).flatMap((order) =>
        filters.map(([name, filter]) => [sortBy, order, name, filter] as const),
      ),
    );

    it.each(cases)(
      'reads a page sorted by %s %s with %s from an index in order, every condition in the index',
      async (sortBy, sortOrder, _name, filter) => {
        const page = await pageQueryOf({
          tenantId: ground.tenantId,
          ...('status' in filter ? { status: filter.status } : {}),
          ...('project' in filter ? { projectId: ground.projectId } : {}),
          sortBy,
          sortOrder,
          offset: 40,
          limit: 20,
        });

        // Whatever the table's size, the planner takes an ordered index scan when one exists.
        const scans = await buildsScans(page, 'FORMAT JSON', [
          'enable_seqscan = off',
          'enable_bitmapscan = off',
          'enable_sort = off',
          'enable_incremental_sort = off',
        ]);

        // A filter would read past every row that fails it: at a million builds, most of them.
        expect(scans.map((node) => [node['Node Type'], node.Filter])).toEqual([
          ['Index Scan', undefined],
        ]);
      },
    );

    it("answers another tenant's project with an empty page, without reading its builds", async () => {
      const theirs = await ground.newProject('theirs');
      await builds.insert(ground.newBuild({ projectId: theirs }));
      const [{ id: mine }] = await dataSource.query<[{ id: string }]>(
        `INSERT INTO tenants (name) VALUES ('repository-mine') RETURNING id`,
      );
      const query: BuildListQuery = {
        tenantId: mine,
        projectId: theirs,
        sortBy: 'created_at',
        sortOrder: 'desc',
        offset: 0,
        limit: 20,
      };

      const page = await builds.list(query);
      const scans = await buildsScans(await pageQueryOf(query), 'ANALYZE, FORMAT JSON');

      expect(page).toEqual({ builds: [], total: 0, hasMore: false });
      expect(scans.map((node) => node['Actual Loops'])).toEqual([0]);
    });
  });
});
