import type { DataSource } from 'typeorm';
import { type LifecycleGround, lifecycleGround } from '../../test/support/lifecycle-ground.js';
import { AppendGroups } from './append-groups.js';
import { BuildLogsRepository, type NewLogLine } from './build-logs.repository.js';

const line = (message: string): NewLogLine => ({
  ts: new Date(),
  level: 'INFO',
  message,
  metadata: { container: 'build' },
});
const marker = (): NewLogLine => line('[kiln] truncated');

/** Medium tests: group commit of log appends on a real migrated Postgres. */
describe(AppendGroups.name, () => {
  let ground: LifecycleGround;
  let dataSource: DataSource;
  let logs: BuildLogsRepository;

  beforeAll(async () => {
    ground = await lifecycleGround('append_groups');
    dataSource = ground.dataSource;
    logs = new BuildLogsRepository(dataSource);
  });

  afterAll(async () => {
    await ground.close();
  });

  /** Each build's writer: `batches` appends one after another, as LogSink writes a build. */
  async function write(groups: AppendGroups, id: string, batches: number, size: number) {
    let known: number | undefined;
    for (let b = 0; b < batches; b++) {
      const lines = Array.from({ length: size }, (_, i) => line(`${id.slice(0, 4)} ${b}.${i}`));
      const result = await groups.append(
        id,
        lines,
        1_000_000,
        marker,
        known === undefined ? {} : { knownLogLines: known },
      );
      known = result!.lastSeq + 1;
    }
  }

  it('stores the appends of builds that print at once in few statements, each build dense and in order', async () => {
    const groups = new AppendGroups(logs);
    const ids = await Promise.all(Array.from({ length: 30 }, () => ground.createBuild()));

    await Promise.all(ids.map((id) => write(groups, id, 10, 20)));

    for (const id of ids) {
      const { lines, total } = await logs.page(id, 0, 1_000);
      expect(total).toBe(200);
      expect(lines.map((l) => [l.seq, l.message])).toEqual(
        Array.from({ length: 200 }, (_, n) => [
          n,
          `${id.slice(0, 4)} ${Math.floor(n / 20)}.${n % 20}`,
        ]),
      );
    }
    // 30 builds × 9 appends after their first: one statement each would be 270.
    expect(groups.sent.appends).toBe(270);
    expect(groups.sent.groups).toBeLessThan(100);
  });

  it('appends an entry the group did not take on its own: a stale count loses and repeats nothing', async () => {
    const groups = new AppendGroups(logs);
    const [mine, other] = await Promise.all([ground.createBuild(), ground.createBuild()]);
    await logs.append(mine, [line('mine')], 1_000_000, marker);
    await logs.append(other, [line('other')], 1_000_000, marker);
    await logs.append(mine, [line('another writer')], 1_000_000, marker);

    const [stale, fine] = await Promise.all([
      // This writer still believes `mine` has 1 line.
      groups.append(mine, [line('mine again')], 1_000_000, marker, { knownLogLines: 1 }),
      groups.append(other, [line('other again')], 1_000_000, marker, { knownLogLines: 1 }),
    ]);

    expect(stale).toEqual({ stored: 1, dropped: 0, lastSeq: 2, truncated: false });
    expect(fine).toEqual({ stored: 1, dropped: 0, lastSeq: 1, truncated: false });
    expect(groups.sent).toEqual({ groups: 1, appends: 2 });
    expect((await logs.page(mine, 0, 10)).lines.map((l) => l.message)).toEqual([
      'mine',
      'another writer',
      'mine again',
    ]);
  });

  it('answers a build that does not exist as the repository does', async () => {
    const groups = new AppendGroups(logs);
    const missing = '00000000-0000-4000-8000-000000000001';

    expect(
      await groups.append(missing, [line('lost?')], 1_000_000, marker, { knownLogLines: 3 }),
    ).toBeUndefined();
  });
});
