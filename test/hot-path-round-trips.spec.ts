import pg from 'pg';
import { AccessCache } from '../src/auth/access-cache.js';
import { currentRequestContext } from '../src/common/request-context.js';
import { RateLimitService } from '../src/ratelimit/rate-limit.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { awayFromWindowEnd } from './support/rate-limit-window.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const WINDOW_SECONDS = 3600;

interface SentQuery {
  readonly text: string;
  /** The X-Request-Id of the request it was sent for; undefined for timers and the test. */
  readonly requestId: string | undefined;
}

/**
 * What reaches Postgres on an authorized request (issue 16): every statement any pg client of this
 * process sends is recorded with the request it was sent for, through kiln's request context.
 */
describe('database round trips of an authorized request', () => {
  const sent: SentQuery[] = [];
  // Every statement of TypeORM's pool and of the LISTEN connections goes through Client#query.
  const client = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = client.query;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let buildId: string;
  let serial = 0;

  beforeAll(async () => {
    client.query = function (this: unknown, ...args: unknown[]) {
      const [config] = args;
      const text =
        typeof config === 'string' ? config : String((config as { text?: unknown }).text);
      sent.push({ text, requestId: currentRequestContext()?.requestId });
      return query.apply(this, args);
    };
    kiln = await startTestApp({
      runner: FakeRunner,
      env: {
        // Rate-limit counts are written when the test says so, not by the timer.
        KILN_RATE_LIMIT_FLUSH_MS: '600000',
        KILN_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
        KILN_ACCESS_CACHE_TTL_MS: '600000',
      },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    buildId = (await admin.createBuild(seeded.projectA, 'round-trips')).id as string;
  });

  afterAll(async () => {
    client.query = query;
    await kiln.close();
  });

  /** GET /builds/{id} as the admin; answers the statements it sent. */
  async function getBuild(): Promise<string[]> {
    const requestId = `round-trip-${serial++}`;
    const response = await admin.request('GET', `/builds/${buildId}`, undefined, {
      'x-request-id': requestId,
    });
    expect(response.status).toBe(200);
    return sent.filter((q) => q.requestId === requestId).map((q) => q.text);
  }

  it('sends exactly one statement for GET /builds/{id} with a warm cache: the build’s own SELECT', async () => {
    await getBuild();

    const statements = await getBuild();

    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^SELECT .* FROM builds WHERE id = \$1 AND tenant_id = \$2$/s);
  });

  it('reads the user’s access first when the cache is cold', async () => {
    kiln.app.get(AccessCache).clear();

    const statements = await getBuild();

    expect(statements).toHaveLength(2);
    expect(statements[0]).toMatch(/FROM users u\s+LEFT JOIN memberships m/);
  });

  it('writes the counts of many requests in one statement, outside every request', async () => {
    await awayFromWindowEnd(WINDOW_SECONDS, 10_000); // counts of a window that ends before they are written are dropped
    const service = kiln.app.get(RateLimitService);
    await service.flush();
    const storedBefore = await storedReads();
    const requestsStart = sent.length;
    for (let i = 0; i < 20; i++) await getBuild();
    const duringRequests = sent.slice(requestsStart).filter(touchesCounters);

    const flushStart = sent.length;
    await service.flush();
    const flushed = sent.slice(flushStart).filter(touchesCounters);

    expect(duringRequests).toEqual([]);
    expect(flushed).toHaveLength(1);
    expect((await storedReads()) - storedBefore).toBe(20);
  });

  const touchesCounters = (q: SentQuery) => q.text.includes('rate_limit_windows');

  /** The admin's reads as Postgres has them. */
  async function storedReads(): Promise<number> {
    const [row] = await kiln.dataSource.query<Array<{ count: number }>>(
      'SELECT coalesce(sum(count), 0)::int AS count FROM rate_limit_windows WHERE key = $1',
      [`read|user|${seeded.users.admin.id}`],
    );
    return row!.count;
  }
});
