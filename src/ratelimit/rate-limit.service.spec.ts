import type { DataSource } from 'typeorm';
import { createTestDatabase, type TestDatabase } from '../../test/support/database.js';
import { LogCapture } from '../../test/support/log-capture.js';
import { type KilnConfig, loadConfig } from '../config/config.js';
import { createDataSource } from '../database/data-source.js';
import { RateLimitRepository } from './rate-limit.repository.js';
import { RateLimitService } from './rate-limit.service.js';

const LIMIT = 3;
const WINDOW_MS = 60_000;
/** The start of a window, and instants inside it and the next. */
const W0 = Date.UTC(2030, 0, 1, 12, 0, 0);
const at = (ms: number) => new Date(W0 + ms);

/** Medium tests: RateLimitService on a real Postgres, with request times chosen by the test. */
describe(RateLimitService.name, () => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let services: RateLimitService[] = [];

  beforeAll(async () => {
    database = await createTestDatabase();
    dataSource = createDataSource({
      url: database.url,
      logger: new LogCapture().logger,
      entities: [],
    });
    await dataSource.initialize();
  });

  afterEach(async () => {
    for (const service of services) await service.onApplicationShutdown();
    services = [];
    await dataSource.query('DELETE FROM rate_limit_windows');
  });

  afterAll(async () => {
    await dataSource.destroy();
    await database.drop();
  });

  function newReplica(rateLimitMaxKeys = 100): RateLimitService {
    const service = new RateLimitService(
      new RateLimitRepository(dataSource),
      {
        rateLimitReads: LIMIT,
        rateLimitWrites: LIMIT,
        rateLimitWindowSeconds: WINDOW_MS / 1000,
        rateLimitFlushMs: 600_000,
        rateLimitMaxKeys,
      } as KilnConfig,
      new LogCapture().logger,
    );
    services.push(service);
    return service;
  }

  const stored = () =>
    dataSource.query<Array<{ key: string; window_start: Date; count: number }>>(
      'SELECT key, window_start, count FROM rate_limit_windows ORDER BY window_start, key',
    );

  it('starts every window with the full budget', async () => {
    const replica = newReplica();
    for (let i = 0; i < LIMIT; i++) await replica.consume('user|a', 'read', at(1000));
    const refused = await replica.consume('user|a', 'read', at(2000));

    const next = await replica.consume('user|a', 'read', at(WINDOW_MS));

    expect(refused).toMatchObject({ allowed: false, remaining: 0, resetAt: at(WINDOW_MS) });
    expect(next).toMatchObject({ allowed: true, remaining: LIMIT - 1, resetAt: at(2 * WINDOW_MS) });
  });

  it('writes the counts of the current window only: an ended window decides nothing', async () => {
    const replica = newReplica();
    await replica.consume('user|a', 'read', at(1000));
    await replica.consume('user|b', 'write', at(WINDOW_MS + 1));
    await replica.consume('user|b', 'write', at(WINDOW_MS + 2));

    await replica.flush();

    expect(await stored()).toEqual([
      { key: 'write|user|b', window_start: at(WINDOW_MS), count: 2 },
    ]);
  });

  it('counts a request dated before the window it holds (the clock went back) in Postgres', async () => {
    const replica = newReplica();
    await replica.consume('user|a', 'read', at(WINDOW_MS));

    const late = await replica.consume('user|a', 'read', at(WINDOW_MS - 1));

    expect(late).toMatchObject({ allowed: true, remaining: LIMIT - 1, resetAt: at(WINDOW_MS) });
    expect(await stored()).toEqual([{ key: 'read|user|a', window_start: at(0), count: 1 }]);
  });

  it('counts callers past KILN_RATE_LIMIT_MAX_KEYS in Postgres, one upsert each, exactly', async () => {
    const replica = newReplica(1);
    await replica.consume('user|a', 'read', at(1));
    const decisions = [];
    for (let i = 0; i <= LIMIT; i++) decisions.push(await replica.consume('user|b', 'read', at(2)));

    expect(decisions.map((d) => d?.allowed)).toEqual([true, true, true, false]);
    expect(await stored()).toEqual([{ key: 'read|user|b', window_start: at(0), count: LIMIT + 1 }]);
  });

  it('reads KILN_RATE_LIMIT_FLUSH_MS (100 ms) and KILN_RATE_LIMIT_MAX_KEYS (50,000)', () => {
    expect(loadConfig({})).toMatchObject({ rateLimitFlushMs: 100, rateLimitMaxKeys: 50_000 });
    expect(
      loadConfig({ KILN_RATE_LIMIT_FLUSH_MS: '250', KILN_RATE_LIMIT_MAX_KEYS: '10' }),
    ).toMatchObject({ rateLimitFlushMs: 250, rateLimitMaxKeys: 10 });
    expect(() => loadConfig({ KILN_RATE_LIMIT_FLUSH_MS: '5' })).toThrow(
      /KILN_RATE_LIMIT_FLUSH_MS: an integer from 10 to 600000/,
    );
  });
});
