import WebSocket from 'ws';
import { BuildLifecycle } from '../src/lifecycle/build-lifecycle.js';
import { LogSink } from '../src/logs/log-sink.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { FakeRunner } from './support/fake-runner.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const SUBSCRIBERS = 100;
const BATCH_LINES = 100;
const BATCH_EVERY_MS = 10; // 10,000 lines/s offered
const BATCHES = 200; // two seconds of it

/**
 * What one subscriber saw: every message is checked as it arrives (seq one past the previous,
 * the text of that seq), so 100 × 20,000 messages need no memory of their own.
 */
class CheckingSubscriber {
  received = 0;
  firstProblem: string | undefined;
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(url: string, headers: Record<string, string>) {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { seq: number; message: string };
      const expected = this.received++;
      if (
        this.firstProblem === undefined &&
        (message.seq !== expected || message.message !== `line ${expected}`)
      )
        this.firstProblem = `message ${expected} was seq ${message.seq}: ${message.message}`;
    });
    this.opened = new Promise((done, fail) => {
      ws.once('open', () => done());
      ws.once('error', fail);
    });
    this.closed = new Promise((done) =>
      ws.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
  }
}

describe('log stream fan-out under load', () => {
  let database: TestDatabase;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let headers: Record<string, string>;

  beforeAll(async () => {
    database = await createTestDatabase();
    kiln = await startTestApp({
      runner: FakeRunner,
      database,
      env: { KILN_WS_MAX_CONNECTIONS_PER_USER: String(SUBSCRIBERS + 5), KILN_WS_POLL_SECONDS: '1' },
    });
    seeded = await seedTenancy(kiln);
    const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
    headers = { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA };
  });

  afterAll(async () => {
    await kiln.close();
    await database.drop();
  });

  let branch = 0;
  async function runningBuild(): Promise<string> {
    const build = await admin.createBuild(seeded.projectA, `fanout-${branch++}`);
    await admin.request('POST', `/builds/${build.id}/start`);
    return build.id as string;
  }

  const streamUrl = (id: string) =>
    `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`;

  it(`delivers every line, once and in order, to ${SUBSCRIBERS} subscribers at 10,000 lines/s`, async () => {
    const id = await runningBuild();
    const sink = kiln.app.get(LogSink);
    const subscribers = Array.from(
      { length: SUBSCRIBERS },
      () => new CheckingSubscriber(streamUrl(id), headers),
    );
    await Promise.all(subscribers.map((s) => s.opened));

    // The producer awaits each append, as a runner does; the subscribers read at their pace.
    const started = Date.now();
    for (let batch = 0; batch < BATCHES; batch++) {
      const wait = started + batch * BATCH_EVERY_MS - Date.now();
      if (wait > 0) await new Promise((done) => setTimeout(done, wait));
      await sink.append(
        id,
        Array.from({ length: BATCH_LINES }, (_, i) => ({
          text: `line ${batch * BATCH_LINES + i}`,
        })),
      );
    }
    await kiln.app.get(BuildLifecycle).succeed(id);
    const closes = await Promise.all(subscribers.map((s) => s.closed));

    const total = BATCHES * BATCH_LINES;
    expect(subscribers.map((s) => s.firstProblem ?? 'in order')).toEqual(
      subscribers.map(() => 'in order'),
    );
    expect(subscribers.map((s) => s.received)).toEqual(subscribers.map(() => total));
    expect(closes).toEqual(subscribers.map(() => ({ code: 1000, reason: 'success' })));
    // What is checked is delivery, not speed: a loaded 2-core machine may take well past jest's
    // default 30 s (21 s on a quiet fresh machine).
  }, 120_000);

  it('sends lines whose notification was lost, and closes on a status change whose notification was lost, by the safety poll', async () => {
    const id = await runningBuild();
    const subscriber = new CheckingSubscriber(streamUrl(id), headers);
    await subscriber.opened;

    // What an append and a finish leave behind when their NOTIFYs never arrive.
    await kiln.dataSource.query(
      `WITH added AS (
         INSERT INTO build_log_lines (build_id, seq, ts, level, message)
         SELECT $1, g, now(), 'INFO', 'line ' || g FROM generate_series(0, 4) g RETURNING 1)
       INSERT INTO build_logs (build_id, lines) SELECT $1, count(*) FROM added
       ON CONFLICT (build_id) DO UPDATE SET lines = build_logs.lines + excluded.lines`,
      [id],
    );
    await kiln.dataSource.query(
      "UPDATE builds SET status = 'failed', completed_at = now() WHERE id = $1",
      [id],
    );

    expect(await subscriber.closed).toEqual({ code: 1000, reason: 'failed' });
    expect(subscriber.firstProblem).toBeUndefined();
    expect(subscriber.received).toBe(5);
  });
});
