import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { LogCapture } from '../../test/support/log-capture.js';
import { type KilnConfig, loadConfig } from '../config/config.js';
import { BuildLogsRepository, type NewLogLine } from './build-logs.repository.js';
import { LogPurger } from './log-purger.js';

const lines = (n: number, prefix = 'line'): NewLogLine[] =>
  Array.from({ length: n }, (_, i) => ({
    ts: new Date(),
    level: 'INFO',
    message: `${prefix} ${i}`,
    metadata: null,
  }));
const marker = (): NewLogLine => lines(1, '[kiln] truncated')[0]!;

/** Medium tests: deleted builds' lines leave in batches, on a real migrated Postgres. */
describe(LogPurger.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let logs: BuildLogsRepository;

  beforeAll(async () => {
    ground = await lifecycleGround('log-purger');
    dataSource = ground.dataSource;
    logs = new BuildLogsRepository(dataSource);
  });

  afterAll(async () => {
    await ground.close();
  });

  function purger(config: Partial<KilnConfig> = {}, capture = new LogCapture()): LogPurger {
    return new LogPurger(
      logs,
      {
        logPurgeBatchLines: 7,
        logPurgePauseMs: 0,
        logPurgePollMs: 3_600_000,
        ...config,
      } as KilnConfig,
      capture.logger,
    );
  }

  async function buildWithLines(n: number): Promise<string> {
    const id = await ground.createBuild();
    await logs.append(id, lines(n), 1_000_000_000, marker);
    return id;
  }

  const linesOf = async (buildId: string): Promise<number[]> =>
    (
      await dataSource.query<Array<{ seq: number }>>(
        'SELECT seq FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
        [buildId],
      )
    ).map((row) => row.seq);

  const purgeRecords = () =>
    dataSource.query<Array<{ build_id: string; next_seq: string }>>(
      'SELECT build_id, next_seq FROM build_log_purges ORDER BY deleted_at, build_id',
    );

  const deleteBuild = (id: string) =>
    dataSource.query<unknown>('DELETE FROM builds WHERE id = $1', [id]);

  afterEach(async () => {
    await purger().drain(); // no test leaves work for the next
  });

  it('reads KILN_LOG_PURGE_BATCH_LINES, _PAUSE_MS and _POLL_SECONDS, refusing nonsense', () => {
    expect(loadConfig({})).toMatchObject({
      logPurgeBatchLines: 5000,
      logPurgePauseMs: 50,
      logPurgePollMs: 10_000,
    });
    expect(
      loadConfig({
        KILN_LOG_PURGE_BATCH_LINES: '100',
        KILN_LOG_PURGE_PAUSE_MS: '0',
        KILN_LOG_PURGE_POLL_SECONDS: '2',
      }),
    ).toMatchObject({ logPurgeBatchLines: 100, logPurgePauseMs: 0, logPurgePollMs: 2000 });
    expect(() => loadConfig({ KILN_LOG_PURGE_BATCH_LINES: '0' })).toThrow(
      /KILN_LOG_PURGE_BATCH_LINES: an integer from 1 to 1000000/,
    );
  });

  it('takes the build at once and its lines a batch per transaction, from where it got to', async () => {
    const id = await buildWithLines(20);
    const kept = await buildWithLines(3);

    await deleteBuild(id);

    expect(await dataSource.query('SELECT 1 FROM builds WHERE id = $1', [id])).toEqual([]);
    expect(await dataSource.query('SELECT 1 FROM build_logs WHERE build_id = $1', [id])).toEqual(
      [],
    );
    expect(await purgeRecords()).toEqual([{ build_id: id, next_seq: '0' }]);
    expect(await linesOf(id)).toHaveLength(20);

    expect(await logs.purgeBatch(7)).toEqual({ buildId: id, deleted: 7, done: false });
    expect(await linesOf(id)).toEqual(Array.from({ length: 13 }, (_, i) => i + 7));
    expect(await purgeRecords()).toEqual([{ build_id: id, next_seq: '7' }]);

    // Another process (a restart) goes on from the record.
    expect(await purger().drain()).toBe(13);
    expect(await linesOf(id)).toEqual([]);
    expect(await purgeRecords()).toEqual([]);
    expect(await logs.purgeBatch(7)).toBeUndefined();
    expect(await linesOf(kept)).toEqual([0, 1, 2]);
  });

  it('ends a purge whose last batch is exactly full, and one of a build without lines', async () => {
    const full = await buildWithLines(14);
    const empty = await ground.createBuild();
    await deleteBuild(full);
    await deleteBuild(empty);

    expect(await logs.purgeBatch(7)).toEqual({ buildId: full, deleted: 7, done: false });
    expect(await logs.purgeBatch(7)).toEqual({ buildId: full, deleted: 7, done: true });
    expect(await logs.purgeBatch(7)).toEqual({ buildId: empty, deleted: 0, done: true });
    expect(await purgeRecords()).toEqual([]);
  });

  it('purges the builds a project’s delete took with it, recorded in one statement', async () => {
    const project = await ground.newProject('doomed');
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await ground.createBuild({ projectId: project });
      await logs.append(id, lines(10), 1_000_000_000, marker);
      ids.push(id);
    }

    await dataSource.query('DELETE FROM projects WHERE id = $1', [project]);

    expect((await purgeRecords()).map((r) => r.build_id).sort()).toEqual([...ids].sort());
    expect(await purger().drain()).toBe(30);
    for (const id of ids) expect(await linesOf(id)).toEqual([]);
  });

  it('skips a build another process is purging', async () => {
    const first = await buildWithLines(5);
    const second = await buildWithLines(5);
    await deleteBuild(first);
    await deleteBuild(second);

    const other = dataSource.createQueryRunner();
    await other.connect();
    await other.startTransaction();
    try {
      await other.query('SELECT 1 FROM build_log_purges WHERE build_id = $1 FOR UPDATE', [first]);
      expect(await logs.purgeBatch(7)).toEqual({ buildId: second, deleted: 5, done: true });
      expect(await logs.purgeBatch(7)).toBeUndefined();
    } finally {
      await other.rollbackTransaction();
      await other.release();
    }
    expect(await logs.purgeBatch(7)).toEqual({ buildId: first, deleted: 5, done: true });
  });

  it('leaves no line of a build deleted while appends to it are under way', async () => {
    for (let round = 0; round < 10; round++) {
      const id = await ground.createBuild();
      const appends = Array.from({ length: 6 }, (_, k) =>
        logs.append(id, lines(50, `r${round}a${k}`), 1_000_000_000, marker),
      );
      await new Promise((resolve) => setTimeout(resolve, round % 4));
      await deleteBuild(id); // before this issue, a deadlock with the appends now and then
      const results = await Promise.all(appends);
      // Appends after the delete find no build; those before it stored lines the purge takes.
      for (const result of results) {
        if (result !== undefined) expect(result.stored).toBe(50);
      }
      await purger().drain();
      expect(await linesOf(id)).toEqual([]);
    }
    expect(await purgeRecords()).toEqual([]);
    expect(
      await dataSource.query(
        `SELECT count(*)::int AS n FROM build_log_lines l
          WHERE NOT EXISTS (SELECT 1 FROM builds b WHERE b.id = l.build_id)`,
      ),
    ).toEqual([{ n: 0 }]);
  });

  it('purges in the background, and goes on after a failed batch', async () => {
    const capture = new LogCapture();
    const loop = purger({ logPurgePollMs: 50 }, capture);
    const id = await buildWithLines(30);
    // The fault: the purge table cannot be read, as in a database outage.
    await dataSource.query('ALTER TABLE build_log_purges RENAME TO build_log_purges_away');
    try {
      await deleteBuild(id).catch(() => undefined); // the trigger fails too: the build stays
      expect(await linesOf(id)).toHaveLength(30);
      loop.onApplicationBootstrap();
      await until(() =>
        capture.lines.some((line) => line.msg === 'log purge failed; trying again later'),
      );
    } finally {
      await dataSource.query('ALTER TABLE build_log_purges_away RENAME TO build_log_purges');
    }
    try {
      await deleteBuild(id);
      await until(async () => (await linesOf(id)).length === 0);
      await until(async () => (await purgeRecords()).length === 0);
      expect(
        capture.lines.some(
          (line) => line.msg === 'deleted build’s log purged' && line.buildId === id,
        ),
      ).toBe(true);
    } finally {
      await loop.onApplicationShutdown();
    }
  });
});

async function until(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
