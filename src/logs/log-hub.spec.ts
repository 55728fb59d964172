import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
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
    hub = new LogHub(new Notifications(dataSource, ground.logger), logs);
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

    expect((await hub.linesFrom(id, 5_001, 1)).map((l) => l.message)).toEqual(['line 5001']);
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

    expect((await hub.linesFrom(id, 3, 100)).map((l) => l.seq)).toEqual(
      Array.from({ length: 16 }, (_, i) => i + 3),
    );
    expect(await hub.linesFrom(id, 2, 1)).toEqual([]);
  });
});
