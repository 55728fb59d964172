import { randomBytes } from 'node:crypto';
import { TokenService } from '../src/auth/token.service.js';
import { type Seeded, seedTenancy } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const READS = 5;
const WRITES = 2;
// One hour: a test that straddles a window boundary sees counters reset; `withinOneWindow` retries.
const WINDOW = 3600;

describe('API rate limiting', () => {
  let kiln: TestApp;
  let seeded: Seeded;

  beforeAll(async () => {
    kiln = await startTestApp({
      env: {
        KILN_RATE_LIMIT_READS: String(READS),
        KILN_RATE_LIMIT_WRITES: String(WRITES),
        KILN_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW),
      },
    });
    seeded = await seedTenancy(kiln);
  });

  afterAll(async () => {
    await kiln.close();
  });

  async function headersFor(userId: string, tenantId: string): Promise<Record<string, string>> {
    const { access_token } = await kiln.app.get(TokenService).issue(userId);
    return { authorization: `Bearer ${access_token}`, 'x-tenant-id': tenantId };
  }

  async function withinOneWindow<T>(
    run: () => Promise<T[]>,
    resetOf: (r: T) => string | null,
  ): Promise<T[]> {
    for (let attempt = 0; ; attempt++) {
      const results = await run();
      if (new Set(results.map(resetOf)).size === 1 || attempt === 1) return results;
    }
  }

  it('RL-01/RL-02: every response carries the window headers; request limit+1 gets 429 with Retry-After', async () => {
    const headers = await headersFor(seeded.users.viewer.id, seeded.tenantA);
    const responses = await withinOneWindow(
      async () => {
        const all: Response[] = [];
        for (let i = 0; i <= READS; i++)
          all.push(await fetch(`${kiln.baseUrl}/api/v1/builds`, { headers }));
        return all;
      },
      (r) => r.headers.get('x-ratelimit-reset'),
    );

    const remaining = responses.map((r) => Number(r.headers.get('x-ratelimit-remaining')));
    expect(responses.slice(0, READS).map((r) => r.status)).toEqual(Array(READS).fill(200));
    expect(remaining).toEqual([4, 3, 2, 1, 0, 0]);
    expect(responses.every((r) => r.headers.get('x-ratelimit-limit') === String(READS))).toBe(true);
    const refused = responses[READS]!;
    expect(refused.status).toBe(429);
    expect(await jsonOf(refused)).toMatchObject({
      code: 'INVALID_REQUEST',
      error: expect.stringContaining('Too many'),
    });
    const reset = Number(refused.headers.get('x-ratelimit-reset'));
    const retryAfter = Number(refused.headers.get('retry-after'));
    const now = Date.now() / 1000;
    expect(reset).toBeGreaterThan(now);
    expect(reset).toBeLessThanOrEqual(Math.ceil(now) + WINDOW);
    expect(Math.abs(now + retryAfter - reset)).toBeLessThanOrEqual(2);
  });

  it('counts writes separately, with their own tighter limit', async () => {
    const headers = {
      ...(await headersFor(seeded.users.developer.id, seeded.tenantA)),
      'content-type': 'application/json',
    };
    const post = (i: number) =>
      fetch(`${kiln.baseUrl}/api/v1/builds`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ project_id: seeded.projectA, git_branch: `rl-${i}-${Date.now()}` }),
      });

    const statuses = [(await post(1)).status, (await post(2)).status, (await post(3)).status];
    const read = await fetch(`${kiln.baseUrl}/api/v1/builds`, { headers });

    expect(statuses).toEqual([201, 201, 429]);
    expect(read.status).toBe(200);
    expect(read.headers.get('x-ratelimit-limit')).toBe(String(READS));
  });

  it('RL-04: one caller at its limit does not reduce another caller’s budget', async () => {
    const busy = await headersFor(seeded.users.admin.id, seeded.tenantA);
    const other = await headersFor(seeded.users.adminB.id, seeded.tenantB);
    for (let i = 0; i < READS + 2; i++)
      await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers: busy });

    const response = await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers: other });

    expect(response.status).toBe(200);
    expect(response.headers.get('x-ratelimit-remaining')).toBe(String(READS - 1));
  });

  it('limits callers without a valid token by client address, and leaves the health probes alone', async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= READS; i++) {
      statuses.push(
        (
          await fetch(`${kiln.baseUrl}/api/v1/builds`, {
            headers: { authorization: 'Bearer nope' },
          })
        ).status,
      );
    }
    const health = await fetch(`${kiln.baseUrl}/healthz`);

    expect(statuses.slice(0, READS)).toEqual(Array(READS).fill(401));
    expect(statuses[READS]).toBe(429);
    expect(health.status).toBe(200);
    expect(health.headers.get('x-ratelimit-limit')).toBeNull();
  });
});

describe('rate limiting behind a trusted proxy', () => {
  let kiln: TestApp;

  beforeAll(async () => {
    kiln = await startTestApp({
      env: { KILN_TRUST_PROXY_HOPS: '1', KILN_RATE_LIMIT_READS: '100' },
    });
  });

  afterAll(async () => {
    await kiln.close();
  });

  // A client address the proxy passes on is the caller's choice: it must not break the counters.
  it('counts a caller whose X-Forwarded-For address is kilobytes long, without a 500', async () => {
    const forwardedFor = randomBytes(6000).toString('base64');

    const first = await fetch(`${kiln.baseUrl}/api/v1/projects`, {
      headers: { 'x-forwarded-for': forwardedFor },
    });
    const second = await fetch(`${kiln.baseUrl}/api/v1/projects`, {
      headers: { 'x-forwarded-for': forwardedFor },
    });
    const login = await fetch(`${kiln.baseUrl}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'x-forwarded-for': forwardedFor, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'nobody@example.com', password: 'not the password' }),
    });

    expect(first.status).toBe(401);
    expect(Number(first.headers.get('x-ratelimit-remaining'))).toBe(99);
    expect(Number(second.headers.get('x-ratelimit-remaining'))).toBe(98);
    expect(login.status).toBe(401);
  });
});
