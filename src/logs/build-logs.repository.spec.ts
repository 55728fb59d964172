import pg from 'pg';
import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { LOG_CHANNEL } from '../database/channels.js';
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

  it("stores a build's first lines and each next batch of its one writer in one statement, with dense seqs and NOTIFY", async () => {
    const id = await newBuild();
    const transactions = jest.spyOn(dataSource, 'transaction');
    const listener = new pg.Client({ connectionString: urlOf(dataSource) });
    await listener.connect();
    const notified: string[] = [];
    listener.on('notification', (n) => notified.push(n.payload ?? ''));
    await listener.query(`LISTEN ${LOG_CHANNEL}`);
    try {
      const first = await logs.append(id, [line('a'), line('b')], 1_000_000, marker);
      const next = await logs.append(id, [line('c')], 1_000_000, marker, { knownLogLines: 2 });
      await until(() => notified.length === 2);

      expect([first, next]).toEqual([
        { stored: 2, dropped: 0, lastSeq: 1, truncated: false },
        { stored: 1, dropped: 0, lastSeq: 2, truncated: false },
      ]);
      expect(transactions).not.toHaveBeenCalled();
      expect(notified).toEqual([`${id}:1`, `${id}:2`]);
      expect((await logs.page(id, 0, 10)).lines.map((l) => [l.seq, l.message])).toEqual([
        [0, 'a'],
        [1, 'b'],
        [2, 'c'],
      ]);
      expect(
        await dataSource.query('SELECT lines, bytes::int FROM build_logs WHERE build_id = $1', [
          id,
        ]),
      ).toEqual([{ lines: 3, bytes: 3 }]);
    } finally {
      transactions.mockRestore();
      await listener.end();
    }
  });

  it('appends after a count another writer made stale, or past the cap, in the transaction: no line lost, none repeated', async () => {
    const id = await newBuild();
    await logs.append(id, [line('mine')], 1_000_000, marker);
    await logs.append(id, [line('theirs')], 1_000_000, marker); // another writer's
    const transactions = jest.spyOn(dataSource, 'transaction');
    try {
      // This writer still believes the build has 1 line.
      await logs.append(id, [line('mine again')], 1_000_000, marker, { knownLogLines: 1 });
      // 3 lines of 1 byte + 12 bytes stored: "overflow" does not fit a cap of 20.
      const capped = await logs.append(id, [line('overflow!')], 20, marker, { knownLogLines: 3 });

      expect(transactions).toHaveBeenCalledTimes(2);
      expect(capped).toEqual({ stored: 1, dropped: 1, lastSeq: 3, truncated: true });
    } finally {
      transactions.mockRestore();
    }
    expect((await logs.page(id, 0, 10)).lines.map((l) => [l.seq, l.message])).toEqual([
      [0, 'mine'],
      [1, 'theirs'],
      [2, 'mine again'],
      [3, '[kiln] truncated'],
    ]);
  });

  it('stores nothing for a build deleted while its lines wait for the purge', async () => {
    const id = await newBuild();
    await logs.append(id, [line('before the delete')], 1_000_000, marker);
    await dataSource.query('DELETE FROM builds WHERE id = $1', [id]);

    expect(await logs.append(id, [line('after')], 1_000_000, marker)).toBeUndefined();
    expect(
      await dataSource.query('SELECT message FROM build_log_lines WHERE build_id = $1', [id]),
    ).toEqual([{ message: 'before the delete' }]);
  });

  it('on a retry, stores nothing only when the build has as many lines and its last is the one the uncertain attempt sent', async () => {
    const id = await newBuild();
    const sent = line('second');
    await logs.append(id, [line('first'), sent], 1_000_000, marker);

    // The uncertain attempt committed: its last line is there.
    const again = await logs.append(id, [sent], 1_000_000, marker, {
      storedIfLogLines: 2,
      storedIfLastLine: sent,
    });
    // As many lines, but another writer's: this attempt did not commit, its line is stored.
    const other = line('third');
    const stored = await logs.append(id, [other], 1_000_000, marker, {
      storedIfLogLines: 3,
      storedIfLastLine: { ...other, message: 'not what is there' },
    });

    expect(again).toMatchObject({ stored: 0 });
    expect(stored).toMatchObject({ stored: 1, lastSeq: 2 });
    expect((await logs.page(id, 0, 10)).lines.map((l) => l.message)).toEqual([
      'first',
      'second',
      'third',
    ]);
  });

  it('appends the lines of many builds in one statement: each after its known count, with dense seqs and a NOTIFY each; a stale count, the cap or a deleted build is not taken', async () => {
    const [fresh, stale, capped, deleted] = await Promise.all([
      newBuild(),
      newBuild(),
      newBuild(),
      newBuild(),
    ]);
    for (const id of [fresh, stale, capped, deleted])
      await logs.append(id, [line('a'), line('b')], 1_000_000, marker);
    await logs.append(stale, [line('another writer')], 1_000_000, marker);
    await dataSource.query('DELETE FROM builds WHERE id = $1', [deleted]);
    const listener = new pg.Client({ connectionString: urlOf(dataSource) });
    await listener.connect();
    const notified: string[] = [];
    listener.on('notification', (n) => notified.push(n.payload ?? ''));
    await listener.query(`LISTEN ${LOG_CHANNEL}`);
    try {
      const results = await logs.appendToMany([
        { buildId: fresh, lines: [line('c'), line('d')], knownLogLines: 2, capBytes: 1_000_000 },
        { buildId: stale, lines: [line('lost?')], knownLogLines: 2, capBytes: 1_000_000 },
        { buildId: capped, lines: [line('too long')], knownLogLines: 2, capBytes: 5 },
        { buildId: deleted, lines: [line('gone')], knownLogLines: 2, capBytes: 1_000_000 },
      ]);
      await until(() => notified.length === 1);

      expect(results).toEqual([
        { stored: 2, dropped: 0, lastSeq: 3, truncated: false },
        'not-taken',
        'not-taken',
        'not-taken',
      ]);
      expect(notified).toEqual([`${fresh}:3`]);
    } finally {
      await listener.end();
    }
    const messages = async (id: string) =>
      (await logs.page(id, 0, 10)).lines.map((l) => [l.seq, l.message]);
    expect(await messages(fresh)).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'c'],
      [3, 'd'],
    ]);
    expect(await messages(stale)).toEqual([
      [0, 'a'],
      [1, 'b'],
      [2, 'another writer'],
    ]);
    expect(await messages(capped)).toEqual([
      [0, 'a'],
      [1, 'b'],
    ]);
    expect(
      await dataSource.query(
        'SELECT count(*)::int AS n FROM build_log_lines WHERE build_id = $1 AND seq >= 2',
        [deleted],
      ),
    ).toEqual([{ n: 0 }]);
    expect(
      await dataSource.query('SELECT lines, bytes::int FROM build_logs WHERE build_id = $1', [
        fresh,
      ]),
    ).toEqual([{ lines: 4, bytes: 4 }]);
  });

  it('stores lines of many builds byte for byte: tabs, newlines, backslashes, COPY markers, quotes in metadata, any script', async () => {
    const id = await newBuild();
    await logs.append(id, [line('first')], 1_000_000, marker);
    const texts = [
      'a\tb',
      'line\nbreak\r\n',
      'back\\slash \\N \\. \\t',
      '\\.',
      '\\N',
      '',
      'naïve — 日本語 🚀',
      '"quoted" \'single\'',
    ];
    const lines: NewLogLine[] = texts.map((message, i) => ({
      ts: new Date(Date.UTC(2026, 10, 28, 12, 0, 0, i)),
      level: i % 2 === 0 ? 'WARN' : 'INFO',
      message,
      metadata: i === 0 ? null : { container: 'build', step: `"${i}"\t\\` },
    }));

    const [result] = await logs.appendToMany([
      { buildId: id, lines, knownLogLines: 1, capBytes: 1_000_000 },
    ]);

    expect(result).toEqual({ stored: 8, dropped: 0, lastSeq: 8, truncated: false });
    const page = await logs.page(id, 1, 10);
    expect(
      page.lines.map(({ seq, ts, level, message, metadata }) => ({
        seq,
        ts,
        level,
        message,
        metadata,
      })),
    ).toEqual(lines.map((l, i) => ({ seq: i + 1, ...l })));
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

function urlOf(dataSource: DataSource): string {
  return (dataSource.options as { url: string }).url;
}

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
