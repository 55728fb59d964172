import type { DataSource } from 'typeorm';
import { referenceSpec } from '../../test/support/build-specs.js';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { ConflictError, ErrorCode, KilnError } from '../common/errors.js';
import { BuildLifecycle } from './build-lifecycle.js';
import type { BuildEntity } from './build.entity.js';
import type { BuildStatus } from './build-state.js';
import type { NewBuild } from './builds.repository.js';

/** What a settled write left: the status it wrote, or the code and details of its refusal. */
function outcome(result: PromiseSettledResult<BuildEntity>): unknown {
  if (result.status === 'fulfilled') return { wrote: result.value.status };
  const error: unknown = result.reason;
  if (!(error instanceof KilnError)) throw error;
  return { refused: error.code, details: error.details };
}

/** Outcomes with the successful writes first, so races compare without caring who won. */
function winnersFirst(results: Array<PromiseSettledResult<BuildEntity>>): unknown[] {
  return [
    ...results.filter((r) => r.status === 'fulfilled'),
    ...results.filter((r) => r.status === 'rejected'),
  ].map(outcome);
}

/** Medium tests: BuildLifecycle on a real migrated Postgres, no HTTP server. */
describe(BuildLifecycle.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let lifecycle: BuildLifecycle;
  let tenantId: string;

  beforeAll(async () => {
    ground = await lifecycleGround('lifecycle');
    ({ dataSource, lifecycle, tenantId } = ground);
  });

  afterAll(async () => {
    await ground.close();
  });

  const newProject = (name: string) => ground.newProject(name);
  const newBuild = (overrides: Partial<NewBuild> = {}) => ground.newBuild(overrides);

  async function queued(overrides: Partial<NewBuild> = {}): Promise<BuildEntity> {
    return (await lifecycle.create(newBuild(overrides))).build;
  }

  async function running(overrides: Partial<NewBuild> = {}): Promise<BuildEntity> {
    return lifecycle.start(tenantId, (await queued(overrides)).id);
  }

  async function stored(id: string): Promise<BuildEntity> {
    return (await lifecycle.find(id))!;
  }

  it('lets exactly one of two racing starts win; the other gets CONFLICT naming in_progress', async () => {
    const { id } = await queued();

    const results = await Promise.allSettled([
      lifecycle.start(tenantId, id),
      lifecycle.start(tenantId, id),
    ]);

    expect(winnersFirst(results)).toEqual([
      { wrote: 'in_progress' },
      { refused: ErrorCode.Conflict, details: { status: 'in_progress' } },
    ]);
    expect((await stored(id)).status).toBe('in_progress');
  });

  it('lets exactly one of a racing succeed, fail and cancel end a build; the others get CONFLICT naming the status it won', async () => {
    const { id } = await running();

    const results = await Promise.allSettled([
      lifecycle.succeed(id),
      lifecycle.fail(id, 'BuildFailed', 'step 2 failed'),
      lifecycle.cancel(tenantId, id, 'user asked'),
    ]);

    const winners = results.filter((r) => r.status === 'fulfilled');
    expect(winners).toHaveLength(1);
    const won = (winners[0] as PromiseFulfilledResult<BuildEntity>).value.status;
    expect(results.map(outcome)).toEqual(
      results.map((r) =>
        r.status === 'fulfilled'
          ? { wrote: won }
          : { refused: ErrorCode.Conflict, details: { status: won } },
      ),
    );
    expect((await stored(id)).status).toBe(won);
  });

  it.each<[BuildStatus, (build: BuildEntity) => Promise<unknown>]>([
    ['success', (build) => lifecycle.succeed(build.id)],
    ['failed', (build) => lifecycle.fail(build.id, 'TimedOut', 'took too long')],
    ['cancelled', (build) => lifecycle.cancel(tenantId, build.id, 'no longer needed')],
  ])(
    'never changes a %s build: every transition is refused with CONFLICT and the record stays as it was',
    async (status, end) => {
      const build = await running();
      await end(build);
      const before = await stored(build.id);
      expect(before.status).toBe(status);

      const attempts = await Promise.allSettled([
        lifecycle.start(tenantId, build.id),
        lifecycle.succeed(build.id),
        lifecycle.fail(build.id, 'InternalError', 'late failure'),
        lifecycle.cancel(tenantId, build.id, 'late cancel'),
      ]);

      expect(attempts.map(outcome)).toEqual(
        Array.from({ length: 4 }, () => ({ refused: ErrorCode.Conflict, details: { status } })),
      );
      expect(await stored(build.id)).toEqual(before);
    },
  );

  /** A terminal transition of a running build, with the completion time it is given. */
  const ends: Array<[string, (id: string, at?: Date) => Promise<BuildEntity>]> = [
    ['succeed', (id, at) => lifecycle.succeed(id, at)],
    ['fail', (id, at) => lifecycle.fail(id, 'BuildFailed', 'step 2 failed', at)],
    ['cancel', (id, at) => lifecycle.cancel(tenantId, id, 'no longer needed', at)],
  ];

  /** A running build that started an hour ago (by the database's clock). */
  async function startedAnHourAgo(): Promise<BuildEntity> {
    const { id } = await running();
    await dataSource.query(
      "UPDATE builds SET started_at = started_at - interval '1 hour' WHERE id = $1",
      [id],
    );
    return stored(id);
  }

  async function databaseNow(): Promise<number> {
    const [{ now }] = await dataSource.query<[{ now: Date }]>('SELECT clock_timestamp() AS now');
    return now.getTime();
  }

  it.each(ends)(
    'OP-03 %s records the completion time it is given, not the time of the write',
    async (_, end) => {
      const build = await startedAnHourAgo();
      const at = new Date(build.startedAt!.getTime() + 10 * 60_000 + 123);

      const ended = await end(build.id, at);

      expect(ended.completedAt).toEqual(at);
      expect((await stored(build.id)).completedAt).toEqual(at);
    },
  );

  it.each(ends)(
    "OP-03 %s clamps a completion time before started_at (another clock's) to started_at",
    async (_, end) => {
      const build = await startedAnHourAgo();

      const ended = await end(build.id, new Date(build.startedAt!.getTime() - 5_000));

      expect(ended.completedAt).toEqual(build.startedAt);
      expect((await stored(build.id)).completedAt).toEqual(build.startedAt);
    },
  );

  it.each(ends)(
    "OP-03 %s clamps a completion time after the write (a clock ahead of kiln's) to the write",
    async (_, end) => {
      const build = await startedAnHourAgo();
      const before = await databaseNow();

      const ended = await end(build.id, new Date(Date.now() + 3_600_000));

      const after = await databaseNow();
      expect(ended.completedAt!.getTime()).toBeGreaterThanOrEqual(before);
      expect(ended.completedAt!.getTime()).toBeLessThanOrEqual(after);
    },
  );

  it.each(ends)(
    'OP-03 %s without a completion time records the time of the write',
    async (_, end) => {
      const build = await startedAnHourAgo();
      const before = await databaseNow();

      const ended = await end(build.id);

      const after = await databaseNow();
      expect(ended.completedAt!.getTime()).toBeGreaterThanOrEqual(before);
      expect(ended.completedAt!.getTime()).toBeLessThanOrEqual(after);
      expect((await stored(build.id)).completedAt).toEqual(ended.completedAt);
    },
  );

  it('takes back a start the runner refused: queued again with no start time or runner, and startable', async () => {
    const build = await running();
    await lifecycle.setRunnerRef(build.id, 'kubernetes/x');

    const unstarted = await lifecycle.unstart(build.id);

    expect(unstarted).toMatchObject({ status: 'queued', startedAt: null, runnerRef: null });
    expect((await lifecycle.start(tenantId, build.id)).status).toBe('in_progress');
  });

  it('refuses to take back the start of a build that already ended', async () => {
    const build = await running();
    await lifecycle.succeed(build.id);

    await expect(lifecycle.unstart(build.id)).rejects.toBeInstanceOf(ConflictError);
    expect((await stored(build.id)).status).toBe('success');
  });

  it("numbers a project's builds 1, 2, 3, … even when created concurrently, leaving unused the number a refused duplicate took", async () => {
    const project = await newProject('numbering');
    const first = await queued({ projectId: project, gitBranch: 'taken' });

    const results = await Promise.allSettled([
      ...Array.from({ length: 8 }, () => lifecycle.create(newBuild({ projectId: project }))),
      lifecycle.create(newBuild({ projectId: project, gitBranch: 'taken' })),
    ]);
    const last = await queued({ projectId: project });

    expect(results.at(-1)).toMatchObject({
      status: 'rejected',
      reason: expect.any(ConflictError),
    });
    const numbers = (
      await dataSource.query<Array<{ build_number: number }>>(
        'SELECT build_number FROM builds WHERE project_id = $1 ORDER BY build_number',
        [project],
      )
    ).map((row) => row.build_number);
    const taken = Array.from({ length: 11 }, (_, i) => i + 1);
    const unused = taken.filter((number) => !numbers.includes(number));
    expect(unused).toHaveLength(1);
    expect(numbers).toEqual(taken.filter((number) => number !== unused[0]));
    expect([first.buildNumber, last.buildNumber]).toEqual([1, 11]);
  });

  it('numbers each project on its own', async () => {
    const [one, two] = [await newProject('own-1'), await newProject('own-2')];

    const builds = [
      await queued({ projectId: one }),
      await queued({ projectId: two }),
      await queued({ projectId: one }),
    ];

    expect(builds.map((b) => [b.projectId, b.buildNumber])).toEqual([
      [one, 1],
      [two, 1],
      [one, 2],
    ]);
  });

  it('retries a failed build as a new queued build with its configuration, its spec and retry_of, leaving the original failed', async () => {
    const spec = referenceSpec({
      source: {
        repository: 'https://git.example.com/a.git',
        branch: 'b',
        commit: 'abcdef1',
        context: '.',
      },
      buildArgs: { MODE: 'release' },
    });
    const original = await running({
      gitCommit: 'abcdef1',
      method: 'dockerfile',
      config: { form: 'reference', build_args: { MODE: 'release' } },
      spec,
    });
    await lifecycle.fail(original.id, 'BuildFailed', 'step 1 failed');

    const retry = await lifecycle.retry(tenantId, original.id, null);

    expect(await stored(retry.id)).toMatchObject({
      status: 'queued',
      retryOf: original.id,
      projectId: original.projectId,
      gitBranch: original.gitBranch,
      gitCommit: 'abcdef1',
      method: 'dockerfile',
      config: { form: 'reference', build_args: { MODE: 'release' } },
      spec,
    });
    expect(retry.id).not.toBe(original.id);
    expect((await stored(original.id)).status).toBe('failed');
  });

  it('creates at most one queued or running retry of a failed build when retries race; the others get CONFLICT naming it', async () => {
    // No digest: only the retry index, not the duplicate-build index, can refuse these.
    const original = await running({ specDigest: null });
    await lifecycle.fail(original.id, 'BuildFailed', 'step 1 failed');

    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => lifecycle.retry(tenantId, original.id, null)),
    );

    const retries = await dataSource.query<Array<{ id: string; status: string }>>(
      'SELECT id, status FROM builds WHERE retry_of = $1',
      [original.id],
    );
    expect(retries).toEqual([{ id: expect.any(String), status: 'queued' }]);
    expect(winnersFirst(results)).toEqual([
      { wrote: 'queued' },
      ...Array.from({ length: 4 }, () => ({
        refused: ErrorCode.Conflict,
        details: { build_id: retries[0]!.id },
      })),
    ]);
  });

  it('allows a new retry once the previous retry has ended', async () => {
    const original = await running({ specDigest: null });
    await lifecycle.fail(original.id, 'BuildFailed', 'step 1 failed');
    const firstRetry = await lifecycle.start(
      tenantId,
      (await lifecycle.retry(tenantId, original.id, null)).id,
    );
    await lifecycle.fail(firstRetry.id, 'BuildFailed', 'still failing');

    const secondRetry = await lifecycle.retry(tenantId, original.id, null);

    const retries = await dataSource.query<Array<{ id: string; status: string }>>(
      'SELECT id, status FROM builds WHERE retry_of = $1 ORDER BY build_number',
      [original.id],
    );
    expect(retries).toEqual([
      { id: firstRetry.id, status: 'failed' },
      { id: secondRetry.id, status: 'queued' },
    ]);
  });

  it.each<[BuildStatus, () => Promise<BuildEntity>]>([
    ['queued', () => queued()],
    ['in_progress', () => running()],
  ])(
    'refuses to retry a build that is %s with CONFLICT naming its status, creating nothing',
    async (status, make) => {
      const build = await make();

      const [result] = await Promise.allSettled([lifecycle.retry(tenantId, build.id, null)]);

      expect(outcome(result)).toEqual({ refused: ErrorCode.Conflict, details: { status } });
      const [{ count }] = await dataSource.query<[{ count: number }]>(
        'SELECT count(*)::int AS count FROM builds WHERE retry_of = $1',
        [build.id],
      );
      expect(count).toBe(0);
    },
  );
});
