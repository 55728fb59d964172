import type { DataSource } from 'typeorm';
import { LogCapture } from '../../test/support/log-capture.js';
import { type KilnConfig, loadConfig } from '../config/config.js';
import { Notifications } from '../database/notification-listener.js';
import { ACCESS_CACHE_MAX_ENTRIES, AccessCache } from './access-cache.js';
import { AccessChanges } from './access-changes.js';
import type { MembershipsRepository, UserAccess } from './memberships.repository.js';

/**
 * The database's side, scripted: what accessOf answers and when. The end-to-end behaviour (real
 * Postgres, triggers, notifications, HTTP) is in test/access-cache.spec.ts.
 */
class ScriptedMemberships {
  readonly reads: string[] = [];
  private held: Array<() => void> = [];
  hold = false;
  answer: UserAccess = { role: 'viewer', systemAdmin: false, credentialsChangedAt: null };

  accessOf(userId: string, tenantId: string | null): Promise<UserAccess> {
    this.reads.push(`${userId}|${tenantId ?? ''}`);
    const answer = this.answer;
    if (!this.hold) return Promise.resolve(answer);
    return new Promise((resolve) => this.held.push(() => resolve(answer)));
  }

  release(): void {
    for (const resolve of this.held.splice(0)) resolve();
  }
}

const USER = '6a1f2d8e-0b9c-4c51-9a43-6f0e3a1b2c3d';
const OTHER = '0d6b7e52-41f3-4a8e-b1c7-2e9d5f8a6b40';
const TENANT = 'c3a9e1f0-7d24-4b8a-9e65-1f2a3b4c5d6e';

describe(AccessCache.name, () => {
  let memberships: ScriptedMemberships;
  let changes: AccessChanges;
  let listens: number;

  function cacheWith(accessCacheTtlMs: number): AccessCache {
    // A DataSource's url is all `listen` reads; nothing connects unless onModuleInit runs.
    const dataSource = { options: { url: 'postgres://unused@127.0.0.1:1/none' } } as DataSource;
    const notifications = new Notifications(dataSource, new LogCapture().logger);
    const listen = notifications.listen.bind(notifications);
    notifications.listen = (channels) => {
      listens += 1;
      return listen(channels);
    };
    return new AccessCache(
      memberships as unknown as MembershipsRepository,
      notifications,
      changes,
      { accessCacheTtlMs } as KilnConfig,
    );
  }

  beforeEach(() => {
    memberships = new ScriptedMemberships();
    changes = new AccessChanges();
    listens = 0;
  });

  it('reads a (user, tenant) once while its answer is fresh', async () => {
    const cache = cacheWith(60_000);

    const answers = [await cache.accessOf(USER, TENANT), await cache.accessOf(USER, TENANT)];

    expect(answers).toEqual([
      { role: 'viewer', systemAdmin: false, credentialsChangedAt: null },
      { role: 'viewer', systemAdmin: false, credentialsChangedAt: null },
    ]);
    expect(memberships.reads).toEqual([`${USER}|${TENANT}`]);
  });

  it('keeps "no such user" and "no tenant given" answers too', async () => {
    const cache = cacheWith(60_000);
    memberships.answer = undefined;

    await cache.accessOf(USER, null);
    const second = await cache.accessOf(USER, null);

    expect(second).toBeUndefined();
    expect(memberships.reads).toEqual([`${USER}|`]);
  });

  it('reads an answer again once its TTL has passed', async () => {
    const cache = cacheWith(1);
    await cache.accessOf(USER, TENANT);
    await new Promise((done) => setTimeout(done, 20));

    await cache.accessOf(USER, TENANT);

    expect(memberships.reads).toHaveLength(2);
  });

  it('reads a user again after its invalidation, and only that user', async () => {
    const cache = cacheWith(60_000);
    await cache.accessOf(USER, TENANT);
    await cache.accessOf(OTHER, TENANT);

    cache.invalidate(USER);
    await cache.accessOf(USER, TENANT);
    await cache.accessOf(OTHER, TENANT);

    expect(memberships.reads).toEqual([
      `${USER}|${TENANT}`,
      `${OTHER}|${TENANT}`,
      `${USER}|${TENANT}`,
    ]);
  });

  it('invalidates synchronously on a change this process announces', async () => {
    const cache = cacheWith(60_000);
    await cache.accessOf(USER, TENANT);
    memberships.answer = { role: null, systemAdmin: false, credentialsChangedAt: null };

    changes.changed(USER);

    expect(await cache.accessOf(USER, TENANT)).toEqual({
      role: null,
      systemAdmin: false,
      credentialsChangedAt: null,
    });
  });

  it('uses an answer read while its user was invalidated for that call only', async () => {
    const cache = cacheWith(60_000);
    memberships.hold = true;
    const racing = cache.accessOf(USER, TENANT);

    cache.invalidate(USER); // the change committed while the read was under way
    memberships.release();
    memberships.hold = false;
    await racing;
    await cache.accessOf(USER, TENANT);

    expect(memberships.reads).toHaveLength(2);
  });

  it('drops every answer, and every read under way, on clear', async () => {
    const cache = cacheWith(60_000);
    await cache.accessOf(USER, TENANT);
    memberships.hold = true;
    const racing = cache.accessOf(OTHER, TENANT);

    cache.clear();
    memberships.release();
    memberships.hold = false;
    await racing;
    await cache.accessOf(USER, TENANT);
    await cache.accessOf(OTHER, TENANT);

    expect(memberships.reads).toHaveLength(4);
  });

  it('holds at most ACCESS_CACHE_MAX_ENTRIES answers, dropping the least recently used', async () => {
    const cache = cacheWith(60_000);
    const tenant = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
    for (let i = 0; i < ACCESS_CACHE_MAX_ENTRIES; i++) await cache.accessOf(USER, tenant(i));
    await cache.accessOf(USER, tenant(0)); // used again: now the most recent

    await cache.accessOf(USER, tenant(ACCESS_CACHE_MAX_ENTRIES)); // one more than it holds
    const before = memberships.reads.length;
    await cache.accessOf(USER, tenant(0));
    await cache.accessOf(USER, tenant(1));

    expect(memberships.reads.slice(before)).toEqual([`${USER}|${tenant(1)}`]);
  });

  it("tells a user's watchers of each change to its access, and of every clear, until they stop", async () => {
    const cache = cacheWith(60_000);
    const heard: string[] = [];
    const stop = cache.watch(USER, () => heard.push('user'));
    cache.watch(OTHER, () => heard.push('other'));

    changes.changed(USER);
    await Promise.resolve(); // watchers run after the change, never inside it
    expect(heard).toEqual(['user']);
    cache.clear();
    await Promise.resolve();
    expect(heard.sort()).toEqual(['other', 'user', 'user']);

    stop();
    changes.changed(USER);
    await Promise.resolve();
    expect(heard).toHaveLength(3);
  });

  it('with a TTL of 0 reads on every call and listens for nothing', async () => {
    const cache = cacheWith(0);

    await cache.accessOf(USER, TENANT);
    await cache.accessOf(USER, TENANT);

    expect(memberships.reads).toHaveLength(2);
    expect(listens).toBe(0);
  });

  it('reads KILN_ACCESS_CACHE_TTL_MS: 5 s by default, 0 to turn it off, 10 minutes at most', () => {
    expect(loadConfig({}).accessCacheTtlMs).toBe(5000);
    expect(loadConfig({ KILN_ACCESS_CACHE_TTL_MS: '0' }).accessCacheTtlMs).toBe(0);
    expect(() => loadConfig({ KILN_ACCESS_CACHE_TTL_MS: '600001' })).toThrow(
      /KILN_ACCESS_CACHE_TTL_MS: an integer from 0 to 600000/,
    );
  });
});
