import { TokenService } from '../src/auth/token.service.js';
import { login, type Seeded, seedTenancy } from './support/auth.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const LOGIN_FAILURES = 10;
const READS = 20;
const WRITES = 5;
// One hour: a run that straddles a window boundary sees the counters reset; `oneWindow` retries.
const WINDOW = 3600;

const countOf = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

/** Runs `run` again (once) when its responses came from two rate-limit windows. */
async function oneWindow(run: () => Promise<Response[]>): Promise<Response[]> {
  const responses = await run();
  const resets = new Set(responses.map((r) => r.headers.get('x-ratelimit-reset')));
  return resets.size <= 1 ? responses : run();
}

describe('login throttling under concurrency', () => {
  let kiln: TestApp;
  let seeded: Seeded;

  beforeAll(async () => {
    kiln = await startTestApp({
      env: {
        KILN_LOGIN_MAX_FAILURES: String(LOGIN_FAILURES),
        KILN_LOGIN_WINDOW_SECONDS: '600',
      },
    });
    seeded = await seedTenancy(kiln);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it.each([
    ['a known e-mail with wrong passwords', () => seeded.users.viewer.email],
    ['an unknown e-mail', () => 'nobody-at-all@example.com'],
  ])(
    'thirty parallel logins for %s get at most the failure limit of 401s; the rest 429 with Retry-After',
    async (_name, email) => {
      const responses = await Promise.all(
        Array.from({ length: 30 }, (_, i) => login(kiln.baseUrl, email(), `wrong-${i}`)),
      );
      const statuses = responses.map((r) => r.status);
      const refused = responses.filter((r) => r.status === 429);

      expect(countOf(statuses, 401)).toBe(LOGIN_FAILURES);
      expect(refused).toHaveLength(30 - LOGIN_FAILURES);
      for (const response of refused) {
        expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(response.headers.get('x-ratelimit-remaining')).toBe('0');
      }
    },
  );
});

describe('API rate limits that rotating headers and unknown routes do not escape', () => {
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

  async function bearer(userId: string): Promise<string> {
    const { access_token } = await kiln.app.get(TokenService).issue(userId);
    return `Bearer ${access_token}`;
  }

  it('counts writes per user whatever X-Tenant-ID says: 105 writes with random tenants get 429 past the limit, not 403', async () => {
    const authorization = await bearer(seeded.users.developer.id);
    const post = (tenant: string) =>
      fetch(`${kiln.baseUrl}/api/v1/builds`, {
        method: 'POST',
        headers: { authorization, 'x-tenant-id': tenant, 'content-type': 'application/json' },
        body: JSON.stringify({ project_id: seeded.projectA, git_branch: 'main' }),
      });

    const responses = await oneWindow(async () => {
      const all: Response[] = [];
      for (let batch = 0; batch < 105; batch += 15)
        all.push(
          ...(await Promise.all(Array.from({ length: 15 }, () => post(crypto.randomUUID())))),
        );
      return all;
    });
    const ownTenant = await post(seeded.tenantA);
    const statuses = responses.map((r) => r.status);

    expect(countOf(statuses, 403)).toBe(WRITES);
    expect(countOf(statuses, 429)).toBe(105 - WRITES);
    expect(ownTenant.status).toBe(429);
    expect(ownTenant.headers.get('retry-after')).not.toBeNull();
  });

  it.each([
    ['GET', '/api/v1/nope', READS],
    ['POST', '/api/v1/builds/x/y', WRITES],
    ['DELETE', '/api/v1', WRITES],
  ])(
    'answers an unknown route (%s %s) with 404 and the X-RateLimit-* headers, counted by client address',
    async (method, path, limit) => {
      const response = await fetch(`${kiln.baseUrl}${path}`, { method });

      expect(response.status).toBe(404);
      expect(response.headers.get('x-ratelimit-limit')).toBe(String(limit));
      expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeLessThan(limit);
      expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThan(Date.now() / 1000);
    },
  );

  it('counts an unknown route against the caller of a valid token, in the same budget as its other reads', async () => {
    const headers = {
      authorization: await bearer(seeded.users.viewer.id),
      'x-tenant-id': seeded.tenantA,
    };
    const remaining = (r: Response) => Number(r.headers.get('x-ratelimit-remaining'));

    const [before, unknown, after] = await oneWindow(async () => [
      await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers }),
      await fetch(`${kiln.baseUrl}/api/v1/nope`, { headers }),
      await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers }),
    ]);

    expect([before!.status, unknown!.status, after!.status]).toEqual([200, 404, 200]);
    expect([remaining(before!), remaining(unknown!), remaining(after!)]).toEqual([
      READS - 1,
      READS - 2,
      READS - 3,
    ]);
  });
});
