import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import type { KilnConfig } from '../config/config.js';
import { Notifications } from '../database/notification-listener.js';
import type { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { type HubNews, LogHub } from './log-hub.js';

const NO_CAP = 1024 * 1024 * 1024;
const marker = () => ({ ts: new Date(), level: 'WARN' as const, message: 'cap', metadata: null });
const lines = (from: number, count: number, message = (seq: number) => `line ${seq}`) =>
  Array.from({ length: count }, (_, i) => ({
    ts: new Date(Date.UTC(2030, 0, 1, 0, 0, 0, from + i)),
    level: 'INFO' as const,
    message: message(from + i),
    metadata: (from + i) % 2 === 0 ? { step: String(from + i) } : null,
  }));

/** Medium tests: LogHub on a real Postgres, woken by real LISTEN/NOTIFY; no HTTP server. */
describe(LogHub.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let logs: BuildLogsRepository;
  let lifecycle: BuildLifecycle;
  let hub: LogHub;

  beforeAll(async () => {
    ground = await lifecycleGround('log-hub');
    ({ dataSource, lifecycle } = ground);
    logs = new BuildLogsRepository(dataSource);
    hub = new LogHub(new Notifications(dataSource, ground.logger), logs, {
      wsPollMs: 3_600_000,
    } as KilnConfig);
    await hub.onModuleInit();
  });

  afterAll(async () => {
    await hub.onApplicationShutdown();
    await ground.close();
  });

  const newBuild = () => ground.createBuild();

  /** Subscribes to a build and records the news it is woken with. */
  function watch(buildId: string): { news: HubNews[]; until(lastSeq: number): Promise<void> } {
    const news: HubNews[] = [];
    hub.subscribe(buildId, (item) => news.push(item));
    return {
      news,
      async until(lastSeq) {
        const deadline = Date.now() + 10_000;
        while (!news.some((n) => n.kind === 'lines' && n.lastSeq >= lastSeq)) {
          if (Date.now() > deadline)
            throw new Error(`no news up to ${lastSeq}: ${JSON.stringify(news)}`);
          await new Promise((done) => setTimeout(done, 10));
        }
      },
    };
  }

  it("wakes a build's subscribers with the highest seq stored, after an append announced through NOTIFY", async () => {
    const id = await newBuild();
    const [first, second] = [watch(id), watch(id)];

    await logs.append(id, lines(0, 3), NO_CAP, marker);
    await Promise.all([first.until(2), second.until(2)]);

    expect(first.news).toEqual([{ kind: 'lines', lastSeq: 2 }]);
    expect(second.news).toEqual([{ kind: 'lines', lastSeq: 2 }]);
  });

  it("wakes a build's subscribers with status news when its status changes", async () => {
    const id = await newBuild();
    const watcher = watch(id);

    await lifecycle.start(ground.tenantId, id);
    const deadline = Date.now() + 10_000;
    while (watcher.news.length === 0 && Date.now() < deadline)
      await new Promise((done) => setTimeout(done, 10));

    expect(watcher.news).toEqual([{ kind: 'status' }]);
  });

  it('answers linesFrom with what Postgres holds, for every offset and limit, whether its tail holds the lines or not', async () => {
    const id = await newBuild();
    const watcher = watch(id);
    // The tail starts at the first line announced after subscribing: seqs 0 to 3 stay in Postgres.
    await logs.append(id, lines(0, 4), NO_CAP, marker);
    await watcher.until(3);
    await logs.append(id, lines(4, 6), NO_CAP, marker);
    await watcher.until(9);

    const asked: Array<[number, number]> = [];
    for (let from = 0; from <= 11; from++)
      for (const limit of [1, 2, 5, 20]) asked.push([from, limit]);
    const fromHub = await Promise.all(asked.map(([from, limit]) => hub.linesFrom(id, from, limit)));
    const fromPostgres = await Promise.all(
      asked.map(([from, limit]) => logs.linesFrom(id, from, limit)),
    );

    expect(fromHub).toEqual(fromPostgres);
    expect(fromPostgres[0]![0]).toEqual({
      seq: 0,
      ts: new Date(Date.UTC(2030, 0, 1)),
      level: 'INFO',
      message: 'line 0',
      metadata: { step: '0' },
    });
    expect(fromHub.at(-4)).toEqual([]); // from 11: past the last line
  });

  it('keeps at most the newest 20,000 lines of a build in memory; older lines come from Postgres', async () => {
    const id = await newBuild();
    const watcher = watch(id);
    await logs.append(id, lines(0, 1), NO_CAP, marker);
    await watcher.until(0);
    await logs.append(id, lines(1, 25_000), NO_CAP, marker);
    await watcher.until(25_000);

    // With the stored lines gone, only what the tail holds in memory can still be answered.
    await dataSource.query('DELETE FROM build_log_lines WHERE build_id = $1', [id]);

    // Whole reads (2,000 lines here) are dropped, oldest first: at least the newest 18,000 stay.
    expect((await hub.linesFrom(id, 7_001, 1)).map((l) => l.message)).toEqual(['line 7001']);
    expect((await hub.linesFrom(id, 24_999, 5)).map((l) => l.seq)).toEqual([24_999, 25_000]);
    expect(await hub.linesFrom(id, 5_000, 1)).toEqual([]);
  });

  it('keeps at most 16 MiB of message text of a build in memory; older lines come from Postgres', async () => {
    const id = await newBuild();
    const watcher = watch(id);
    const mebibyte = (seq: number) => String(seq % 10).repeat(1024 * 1024);
    await logs.append(id, lines(0, 1), NO_CAP, marker);
    await watcher.until(0);
    for (let seq = 1; seq <= 18; seq += 6)
      await logs.append(id, lines(seq, 6, mebibyte), NO_CAP, marker);
    await watcher.until(18);

    await dataSource.query('DELETE FROM build_log_lines WHERE build_id = $1', [id]);

    // Whole reads go first (one append each, or several when the hub read them together), then
    // the head of a read that alone is over the cap: the newest 6 MiB always stay, line 2 never.
    expect((await hub.linesFrom(id, 13, 100)).map((l) => l.seq)).toEqual(
      Array.from({ length: 6 }, (_, i) => i + 13),
    );
    expect(await hub.linesFrom(id, 2, 1)).toEqual([]);
  });

  describe('safety poll', () => {
    let polling: LogHub;
    const polls: string[][] = [];

    beforeAll(async () => {
      const counted = new BuildLogsRepository(dataSource);
      const watchedStates = counted.watchedStates.bind(counted);
      counted.watchedStates = (ids) => {
        polls.push([...ids]);
        return watchedStates(ids);
      };
      polling = new LogHub(new Notifications(dataSource, ground.logger), counted, {
        wsPollMs: 100,
      } as KilnConfig);
      await polling.onModuleInit();
    });

    afterAll(() => polling.onApplicationShutdown());

    /** Subscribes to `polling` and waits until `wanted` is among what it was woken with. */
    async function newsOf(buildId: string, act: () => Promise<unknown>, wanted: HubNews) {
      const news: HubNews[] = [];
      const unsubscribe = polling.subscribe(buildId, (item) => news.push(item));
      try {
        await untilPolled(buildId); // the first poll only records what it saw
        news.length = 0;
        await act();
        const deadline = Date.now() + 10_000;
        while (!news.some((n) => JSON.stringify(n) === JSON.stringify(wanted))) {
          if (Date.now() > deadline)
            throw new Error(`no ${JSON.stringify(wanted)}: ${JSON.stringify(news)}`);
          await new Promise((done) => setTimeout(done, 10));
        }
        return news;
      } finally {
        unsubscribe();
      }
    }

    async function untilPolled(buildId: string) {
      const seen = polls.length;
      const deadline = Date.now() + 10_000;
      while (!polls.slice(seen).some((ids) => ids.includes(buildId))) {
        if (Date.now() > deadline) throw new Error('no poll');
        await new Promise((done) => setTimeout(done, 10));
      }
    }

    it('tells the streams of a build whose lines were stored without a notification', async () => {
      const id = await newBuild();
      await newsOf(
        id,
        // What an append whose NOTIFY was lost leaves behind: the lines and the counter.
        () =>
          dataSource.query(
            `WITH added AS (
               INSERT INTO build_log_lines (build_id, seq, ts, level, message)
               SELECT $1, g, now(), 'INFO', 'unannounced ' || g FROM generate_series(0, 2) g
               RETURNING 1)
             INSERT INTO build_logs (build_id, lines) SELECT $1, count(*) FROM added
             ON CONFLICT (build_id) DO UPDATE SET lines = build_logs.lines + excluded.lines`,
            [id],
          ),
        { kind: 'polled', status: 'queued', lines: 3 },
      );
      expect((await polling.linesFrom(id, 0, 10)).map((l) => l.message)).toEqual([
        'unannounced 0',
        'unannounced 1',
        'unannounced 2',
      ]);
    });

    it('tells the streams the status of a build that changed without a notification', async () => {
      const id = await newBuild();
      await newsOf(
        id,
        () => dataSource.query("UPDATE builds SET status = 'in_progress' WHERE id = $1", [id]),
        { kind: 'polled', status: 'in_progress', lines: 0 },
      );
    });

    it('tells the streams of a deleted build that it is gone', async () => {
      const id = await newBuild();
      await newsOf(id, () => dataSource.query('DELETE FROM builds WHERE id = $1', [id]), {
        kind: 'polled',
        status: 'gone',
        lines: 0,
      });
    });

    it('asks once per poll for every watched build, however many streams watch each', async () => {
      const ids = await Promise.all(Array.from({ length: 10 }, () => newBuild()));
      const unsubscribes = ids.flatMap((id) =>
        Array.from({ length: 50 }, () => polling.subscribe(id, () => undefined)),
      );
      try {
        const seen = polls.length;
        await untilPolled(ids[0]!);
        await untilPolled(ids[0]!);
        const asked = polls.slice(seen);
        expect(asked.length).toBeGreaterThanOrEqual(2);
        for (const polled of asked) expect([...polled].sort()).toEqual([...ids].sort());
      } finally {
        for (const unsubscribe of unsubscribes) unsubscribe();
      }
    });
  });
});
