import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { BuildLogsRepository, type NewLogLine } from './build-logs.repository.js';

const line = (message: string): NewLogLine => ({
  ts: new Date(),
  level: 'INFO',
  message,
  metadata: null,
});
const marker = (): NewLogLine => line('[kiln] truncated');

/** Medium tests: the log store's repository on a real migrated Postgres. */
describe(BuildLogsRepository.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let logs: BuildLogsRepository;

  beforeAll(async () => {
    ground = await lifecycleGround('logs');
    dataSource = ground.dataSource;
    logs = new BuildLogsRepository(dataSource);
  });

  afterAll(async () => {
    await ground.close();
  });

  const newBuild = () => ground.createBuild();

  it('never updates the build row, and appends while a status change holds it', async () => {
    const id = await newBuild();
    const rowVersion = () =>
      dataSource.query<[{ xmin: string }]>('SELECT xmin::text FROM builds WHERE id = $1', [id]);
    const before = await rowVersion();
    // What an UPDATE of the build's status takes: the append must not wait for it (before this
    // table, an append held the build row FOR UPDATE, so it would hang here until the test fails).
    const holder = dataSource.createQueryRunner();
    await holder.connect();
    await holder.startTransaction();
    await holder.query('SELECT 1 FROM builds WHERE id = $1 FOR NO KEY UPDATE', [id]);
    try {
      await logs.append(id, [line('one'), line('two')], 1_000_000, marker);
      await logs.append(id, [line('three')], 1_000_000, marker);
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }

    // xmin changes with every UPDATE of the row: the log store made none.
    expect(await rowVersion()).toEqual(before);
    expect(await logs.lineCount(id)).toBe(3);
  });

  it('counts, pages and caps in its own table, with dense seqs', async () => {
    const id = await newBuild();

    await logs.append(id, [line('a'), line('b')], 5, marker);
    const capped = await logs.append(id, [line('cdefgh'), line('i')], 5, marker);

    expect(capped).toEqual({ stored: 1, dropped: 2, lastSeq: 2, truncated: true });
    const page = await logs.page(id, 1, 10);
    expect(page.total).toBe(3);
    expect(page.lines.map((l) => [l.seq, l.message])).toEqual([
      [1, 'b'],
      [2, '[kiln] truncated'],
    ]);
    expect(await logs.lineCount(id)).toBe(3);
    expect(
      await dataSource.query('SELECT dropped_lines FROM build_logs WHERE build_id = $1', [id]),
    ).toEqual([{ dropped_lines: 2 }]);
  });

  it('pages a build with no lines as empty with total 0, and past the end as empty with the total', async () => {
    const id = await newBuild();
    expect(await logs.page(id, 0, 10)).toEqual({ lines: [], total: 0 });

    await logs.append(id, [line('only')], 1_000_000, marker);

    expect(await logs.page(id, 5, 10)).toEqual({ lines: [], total: 1 });
  });

  it('stores nothing for a build that does not exist', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';

    expect(await logs.append(missing, [line('lost?')], 1_000_000, marker)).toBeUndefined();
    expect(
      await dataSource.query('SELECT count(*)::int AS n FROM build_log_lines WHERE build_id = $1', [
        missing,
      ]),
    ).toEqual([{ n: 0 }]);
  });
});
