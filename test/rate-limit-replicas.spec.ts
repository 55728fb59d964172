import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { TokenService } from '../src/auth/token.service.js';
import { RateLimitService } from '../src/ratelimit/rate-limit.service.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { PASSWORD } from './support/auth.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { TcpProxy } from './support/tcp-proxy.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const READS = 10;
// One hour; each test starts at least 10 s before its window ends (awayFromWindowEnd).
const WINDOW = 3600;
/**
 * Counts are written when a test says so (RateLimitService.flush), never by the timer: what each
 * replica knows of the others is then a fact of the test, not of timing.
 */
const BY_HAND = { KILN_RATE_LIMIT_FLUSH_MS: '600000' };

const remainingOf = (response: Response) => Number(response.headers.get('x-ratelimit-remaining'));

/**
 * Waits for the next window when the current one ends within 10 s, so that each scenario (a few
 * seconds at most) runs inside one window: the counters start again with every window.
 */
async function awayFromWindowEnd(): Promise<void> {
  const left = WINDOW * 1000 - (Date.now() % (WINDOW * 1000));
  if (left < 10_000) await new Promise((done) => setTimeout(done, left + 100));
}

describe('API rate limits counted in memory and shared through Postgres', () => {
  let database: TestDatabase;
  let a: TestApp;
  let b: TestApp;
  let tenantId: string;
  let serial = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    const env = {
      ...BY_HAND,
      KILN_RATE_LIMIT_READS: String(READS),
      KILN_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW),
    };
    a = await startTestApp({ database, env });
    b = await startTestApp({ database, env });
    tenantId = (await a.app.get(TenancyService).createTenant('rate-limits')).id;
  });

  beforeEach(awayFromWindowEnd, 20_000);

  afterAll(async () => {
    await a.close();
    await b.close();
    await database.drop();
  });

  /** A new member of the tenant: a caller with a budget of its own, reading the projects. */
  async function newCaller(): Promise<(replica: TestApp) => Promise<Response>> {
    const tenancy = a.app.get(TenancyService);
    const user = await tenancy.createUser(`rl-${serial++}@example.com`, PASSWORD);
    await tenancy.addMember(tenantId, user.email, 'viewer');
    const { access_token } = await a.app.get(TokenService).issue(user.id);
    const headers = { authorization: `Bearer ${access_token}`, 'x-tenant-id': tenantId };
    return (replica) => fetch(`${replica.baseUrl}/api/v1/projects`, { headers });
  }

  it('on one replica, admits exactly the limit of 30 parallel reads and refuses the rest', async () => {
    const caller = await newCaller();

    const statuses = (await Promise.all(Array.from({ length: 30 }, () => caller(a)))).map(
      (r) => r.status,
    );

    expect(statuses.filter((s) => s === 200)).toHaveLength(READS);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30 - READS);
  });

  it('across two replicas, admits at most the limit plus what the other replica receives between two of its writes', async () => {
    const caller = await newCaller();
    const perFlush = 3;
    const statuses: number[] = [];

    // Each round, each replica serves `perFlush` requests, then both write their counts.
    for (let round = 0; round < READS; round++) {
      for (const replica of [a, b])
        for (let i = 0; i < perFlush; i++) statuses.push((await caller(replica)).status);
      await a.app.get(RateLimitService).flush();
      await b.app.get(RateLimitService).flush();
    }
    const finals = [await caller(a), await caller(b)];

    const admitted = statuses.filter((s) => s === 200).length;
    expect(admitted).toBeGreaterThanOrEqual(READS);
    expect(admitted).toBeLessThanOrEqual(READS + (2 - 1) * perFlush);
    expect(finals.map((r) => [r.status, remainingOf(r)])).toEqual([
      [429, 0],
      [429, 0],
    ]);
  });

  it('refuses on a replica the request past the limit once that replica has written and read back the totals', async () => {
    const caller = await newCaller();
    const fromA: number[] = [];
    for (let i = 0; i < READS - 1; i++) fromA.push((await caller(a)).status);
    await a.app.get(RateLimitService).flush();

    const first = await caller(b); // b has not written this caller yet: it knows of its own 1
    await b.app.get(RateLimitService).flush();
    const second = await caller(b);

    expect(fromA).toEqual(Array(READS - 1).fill(200));
    expect([first.status, remainingOf(first)]).toEqual([200, READS - 1]);
    expect([second.status, remainingOf(second)]).toEqual([429, 0]);
  });

  it('writes what it counted when it shuts down', async () => {
    const c = await startTestApp({ database, env: { ...BY_HAND, KILN_RATE_LIMIT_READS: '100' } });
    const userId = randomUUID();
    const { access_token } = await c.app.get(TokenService).issue(userId);
    for (let i = 0; i < 4; i++)
      await fetch(`${c.baseUrl}/api/v1/nope`, {
        headers: { authorization: `Bearer ${access_token}` },
      });

    await c.close();

    const [row] = await a.dataSource.query<Array<{ count: number }>>(
      'SELECT sum(count)::int AS count FROM rate_limit_windows WHERE key = $1',
      [`read|user|${userId}`],
    );
    expect(row?.count).toBe(4);
  });
});

describe('API rate limits while Postgres is unreachable', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let kiln: TestApp;
  let direct: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase();
    const real = new URL(database.url);
    proxy = await TcpProxy.start({ host: real.hostname, port: Number(real.port) });
    kiln = await startTestApp({
      database: { url: proxy.proxied(database.url), drop: () => Promise.resolve() },
      env: {
        ...BY_HAND,
        KILN_RATE_LIMIT_READS: '5',
        KILN_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW),
        KILN_RATE_LIMIT_MAX_KEYS: '2',
      },
    });
    direct = new pg.Client({ connectionString: database.url });
    await direct.connect();
  });

  beforeEach(awayFromWindowEnd, 20_000);

  afterAll(async () => {
    proxy.restore();
    await kiln.close();
    await direct.end();
    await proxy.stop();
    await database.drop();
  });

  /** A request of a caller of its own to an unknown route: 404, and no query of its own. */
  async function callerOf(userId: string): Promise<() => Promise<Response>> {
    const { access_token } = await kiln.app.get(TokenService).issue(userId);
    return () =>
      fetch(`${kiln.baseUrl}/api/v1/nope`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
  }

  async function until(condition: () => boolean): Promise<void> {
    const deadline = Date.now() + 20_000;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error('timed out waiting for a condition');
      await kiln.app.get(RateLimitService).flush();
      await new Promise((done) => setTimeout(done, 50));
    }
  }

  it('keeps counting in memory, keeps the counts a failed write carried, and holds no caller past KILN_RATE_LIMIT_MAX_KEYS', async () => {
    const [first, second, third] = [randomUUID(), randomUUID(), randomUUID()];
    const one = await callerOf(first);
    const two = await callerOf(second);
    const three = await callerOf(third);
    const service = kiln.app.get(RateLimitService);

    proxy.cut();
    const whileDown = [await one(), await one(), await one(), await two()];
    await service.flush(); // fails: the counts stay in memory
    const afterFailedWrite = await one();
    const pastTheCap = await three();
    proxy.restore();
    await until(() =>
      kiln.logs.lines.some((line) => line['msg'] === 'rate-limit counts are written again'),
    );
    const stored = await direct.query<{ key: string; count: number }>(
      'SELECT key, count FROM rate_limit_windows ORDER BY count DESC',
    );
    const lastAllowed = await one();
    const refused = await one();

    expect(whileDown.map((r) => [r.status, remainingOf(r)])).toEqual([
      [404, 4],
      [404, 3],
      [404, 2],
      [404, 4],
    ]);
    expect(
      kiln.logs.find(
        (line) =>
          line['msg'] ===
          'rate-limit counts cannot be written; each replica limits on its own counts meanwhile',
      ),
    ).toBeDefined();
    expect([afterFailedWrite.status, remainingOf(afterFailedWrite)]).toEqual([404, 1]);
    expect(pastTheCap.status).toBe(503);
    expect(pastTheCap.headers.get('x-ratelimit-limit')).toBeNull();
    expect(stored.rows).toEqual([
      { key: `read|user|${first}`, count: 4 },
      { key: `read|user|${second}`, count: 1 },
    ]);
    expect([lastAllowed.status, remainingOf(lastAllowed)]).toEqual([404, 0]);
    expect(refused.status).toBe(429);
  });
});
