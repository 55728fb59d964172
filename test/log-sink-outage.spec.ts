import type { NestExpressApplication } from '@nestjs/platform-express';
import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { KILN_ENTITIES } from '../src/app.entities.js';
import { createApp } from '../src/app.factory.js';
import { loadConfig } from '../src/config/config.js';
import { type Database, openDatabase } from '../src/database/database.js';
import { BuildLifecycle } from '../src/lifecycle/build-lifecycle.js';
import { BuildLogsRepository } from '../src/logs/build-logs.repository.js';
import { LogSink, type SinkAppendResult } from '../src/logs/log-sink.js';
import { seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { LogCapture } from './support/log-capture.js';
import { killTree } from './support/processes.js';
import type { TestApp } from './support/test-app.js';

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting for a condition');
    await sleep(20);
  }
}

/** Producer line i: every 50th announces a buildah step, so progress is reported along the way. */
const text = (i: number) => (i % 50 === 0 ? `STEP ${i / 50 + 1}/1000: line ${i}` : `line ${i}`);

describe('LogSink across a crash of the embedded PostgreSQL', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-log-outage-');
  const logs = new LogCapture('info');
  const config = loadConfig({ KILN_DATA_DIR: dataDir, KILN_RUNNER: 'local' });
  let database: Database;
  let app: NestExpressApplication;
  let admin: ApiClient;
  let projectId: string;

  beforeAll(async () => {
    database = await openDatabase(config, logs.logger, { entities: KILN_ENTITIES });
    app = await createApp(config, database.dataSource, logs.logger, { runner: FakeRunner });
    await app.listen(0, '127.0.0.1');
    const kiln: TestApp = {
      baseUrl: `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`,
      app,
      dataSource: database.dataSource,
      logs,
      close: () => Promise.resolve(),
    };
    const seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    projectId = seeded.projectA;
  });

  afterAll(async () => {
    await app.close();
    await database.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  let branch = 0;
  async function runningBuild(): Promise<string> {
    const build = await admin.createBuild(projectId, `outage-${branch++}`);
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    return build.id as string;
  }

  /** SIGKILLs the postmaster and its backends; kiln's supervisor starts it again after ~1 s. */
  function crashPostgres(): void {
    const pid = database.embedded?.pid;
    expect(pid).toBeDefined();
    killTree(pid!);
  }

  async function databaseIsUp(): Promise<boolean> {
    try {
      await database.dataSource.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async function stored(id: string) {
    return database.dataSource.query<
      Array<{
        seq: number;
        message: string;
        level: string;
        metadata: Record<string, string> | null;
      }>
    >(
      'SELECT seq, message, level, metadata FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
  }

  it('stores every line a producer appends through the crash once, in order, with dense seqs', async () => {
    const sink = app.get(LogSink);
    const id = await runningBuild();
    const results: SinkAppendResult[] = [];
    let stop = false;
    let failure: unknown;
    const producer = (async () => {
      for (let i = 0; !stop; i++) {
        results.push(await sink.append(id, [{ text: text(i), format: 'buildah' }]));
        await sleep(2);
      }
    })().catch((error: unknown) => {
      failure = error;
    });
    const producing = (condition: () => boolean) => () => {
      if (failure !== undefined) throw new Error('the producer failed', { cause: failure });
      return condition();
    };

    await until(producing(() => results.length >= 100));
    crashPostgres();
    await until(producing(() => results.some((r) => r.buffered)));
    await until(databaseIsUp);
    const atRecovery = results.length;
    await until(producing(() => results.length >= atRecovery + 200));
    stop = true;
    await producer;
    expect(failure).toBeUndefined();
    await sink.release(id);

    const rows = await stored(id);
    const produced = results.length;
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: produced }, (_, i) => i));
    expect(rows.map((r) => r.message)).toEqual(Array.from({ length: produced }, (_, i) => text(i)));
    expect(results.filter((r) => r.buffered).length).toBeGreaterThan(0);
    const [build] = await database.dataSource.query<Array<{ progress_current: number }>>(
      'SELECT progress_current FROM builds WHERE id = $1',
      [id],
    );
    expect(build!.progress_current).toBe(Math.floor((produced - 1) / 50) + 1);
  }, 60_000);

  it('keeps the newest lines when the held lines overflow, with one marker counting the dropped ones', async () => {
    const sink = new LogSink(
      app.get(BuildLogsRepository),
      app.get(BuildLifecycle),
      config,
      logs.logger,
      { maxLines: 20 },
    );
    const id = await runningBuild();
    await sink.append(id, [{ text: 'before the crash' }]);

    crashPostgres();
    const results: SinkAppendResult[] = [];
    for (let i = 0; i < 100; i++) results.push(await sink.append(id, [{ text: `held ${i}` }]));
    results.push(await sink.append(id, [{ text: 'STEP 3/7: RUN make', format: 'buildah' }]));
    await sink.release(id);

    // The first held line is the write that failed (kept whole); lines 1..80 were the oldest
    // queued past the bound of 20; the newest 20 stay, the step line last.
    expect(results.every((r) => r.buffered)).toBe(true);
    expect(await stored(id)).toEqual([
      { seq: 0, message: 'before the crash', level: 'INFO', metadata: null },
      { seq: 1, message: 'held 0', level: 'INFO', metadata: null },
      {
        seq: 2,
        message: '[kiln] 80 log lines were lost while the database was unavailable',
        level: 'WARN',
        metadata: { dropped: '80' },
      },
      ...Array.from({ length: 19 }, (_, i) => ({
        seq: 3 + i,
        message: `held ${81 + i}`,
        level: 'INFO',
        metadata: null,
      })),
      { seq: 22, message: 'STEP 3/7: RUN make', level: 'INFO', metadata: expect.anything() },
    ]);
    const [build] = await database.dataSource.query<
      Array<{ progress_current: number; progress_total: number }>
    >('SELECT progress_current, progress_total FROM builds WHERE id = $1', [id]);
    expect(build).toEqual({ progress_current: 3, progress_total: 7 });
  }, 60_000);
});
