import { Inject, Injectable } from '@nestjs/common';
import { lstat, mkdir, readdir, rm, rmdir, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LOGGER } from '../../common/logger.js';
import { KilnConfig } from '../../config/config.js';

/** Where buildah keeps one build's images and containers: a root of its own, vfs storage. */
export function buildahStorageArgs(dir: string): string[] {
  return storeArgs(join(dir, 'storage'), join(dir, 'run'));
}

function storeArgs(root: string, runroot: string): string[] {
  return ['--root', root, '--runroot', runroot, '--storage-driver', 'vfs'];
}

/** The file whose modification time says when a cache was last used (it survives a restart). */
const LAST_USED = 'last-used';
/** Tenant and project ids are UUIDs; anything else never becomes a path. */
const ID = /^[A-Za-z0-9-]{1,64}$/;

/** One project's layer cache, held by a build (or a deletion) until released. */
export interface CacheLease {
  readonly tenantId: string;
  readonly projectId: string;
  /** `<KILN_DATA_DIR>/cache/<tenantId>/<projectId>`. */
  readonly dir: string;
  /** buildah's global options for the cache's store. */
  readonly storage: readonly string[];
  /** Whether holding it counts as a use (a deletion does not make a cache recent). */
  readonly use: boolean;
}

/** What this process knows of one cache directory. */
interface Entry {
  /** Leases held now: the cache is never removed while one is. */
  users: number;
  /** Set while the cache is removed or swept: new leases wait for it. */
  busy: Promise<void> | undefined;
  /** A build that let it go may have left working containers: the last lease sweeps them. */
  leftovers: boolean;
}

/**
 * The local runner's layer caches (docs/adr/0055-local-layer-cache.md): one buildah store per
 * project under `<KILN_DATA_DIR>/cache/<tenantId>/<projectId>/`, so no two tenants ever share
 * one. Builds of one project share its store (containers/storage locks it); this class only keeps
 * apart what buildah cannot: removing a whole cache (eviction) and sweeping leftover working
 * containers never happen while a build of this process holds the cache. After each release the
 * caches are measured, and while they hold more than KILN_LOCAL_CACHE_MAX_BYTES the least
 * recently used ones are removed, whole; the most recently used one is kept even when it alone is
 * larger, unless the bound is 0 (no cache at all).
 */
@Injectable()
export class LayerCaches {
  private readonly entries = new Map<string, Entry>();
  /** Sizes measured by the last eviction pass; a cache used since is measured again. */
  private readonly sizes = new Map<string, number>();
  private evictions: Promise<void> = Promise.resolve();
  private evictionQueued = false;

  constructor(
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** False when KILN_LOCAL_CACHE_MAX_BYTES is 0: every build uses a store of its own. */
  get enabled(): boolean {
    return this.config.localCacheMaxBytes > 0;
  }

  get root(): string {
    return join(this.config.dataDir, 'cache');
  }

  /** The directory of a project's cache. */
  dirOf(tenantId: string, projectId: string): string {
    if (!ID.test(tenantId) || !ID.test(projectId)) {
      throw new Error(`not a tenant and project id: ${tenantId}/${projectId}`);
    }
    return join(this.root, tenantId, projectId);
  }

  /**
   * Holds the project's cache for a build, creating it: it is not removed until `release`.
   * Waits while the cache is being removed or swept.
   */
  async acquire(tenantId: string, projectId: string): Promise<CacheLease> {
    const lease = await this.hold(tenantId, projectId, true);
    await mkdir(lease.dir, { recursive: true });
    await touch(join(lease.dir, LAST_USED));
    return lease;
  }

  /**
   * Holds the project's cache for maintenance (deleting a build's image), without making it
   * recent; undefined when the project has no cache.
   */
  async existing(tenantId: string, projectId: string): Promise<CacheLease | undefined> {
    const lease = await this.hold(tenantId, projectId, false);
    if (await exists(join(lease.dir, 'storage'))) return lease;
    this.letGo(lease);
    return undefined;
  }

  /**
   * Lets the cache go. When no other lease of this process holds it, `sweep` runs first with new
   * leases waiting (for leftover working containers of a stopped build: sweeping while another
   * build runs would remove that build's). Then the caches are measured and evicted past the bound.
   * `leftovers` false says this lease's build left no working container (its bud exited on its
   * own, and `--force-rm` removed them): the sweep runs only when some lease since the last sweep
   * may have left one, so a build that ended normally does not wait for a buildah process.
   */
  async release(
    lease: CacheLease,
    sweep?: (storage: readonly string[]) => Promise<unknown>,
    leftovers = sweep !== undefined,
  ): Promise<void> {
    const entry = this.entryOf(lease.dir);
    if (leftovers) entry.leftovers = true;
    if (sweep !== undefined && entry.users === 1 && entry.leftovers) {
      entry.leftovers = false;
      const swept = sweep(lease.storage).then(
        () => undefined,
        (error: unknown) => {
          entry.leftovers = true;
          this.logger.warn({ err: error, project_id: lease.projectId }, 'could not sweep a cache');
        },
      );
      entry.busy = swept;
      await swept;
      entry.busy = undefined;
    }
    if (lease.use) await touch(join(lease.dir, LAST_USED)).catch(() => undefined);
    this.letGo(lease);
    this.evictLater();
  }

  /** Measures and evicts now or after the pass under way (passes never overlap). */
  evictLater(): void {
    if (this.evictionQueued) return;
    this.evictionQueued = true;
    this.evictions = this.evictions.then(async () => {
      this.evictionQueued = false;
      await this.evict().catch((error: unknown) => {
        this.logger.warn({ err: error }, 'could not evict layer caches');
      });
    });
  }

  /** Settles once no eviction pass is queued or running. */
  async settled(): Promise<void> {
    for (let seen: Promise<void> | undefined; seen !== this.evictions;) {
      seen = this.evictions;
      await seen;
    }
  }

  private async hold(tenantId: string, projectId: string, use: boolean): Promise<CacheLease> {
    const dir = this.dirOf(tenantId, projectId);
    for (;;) {
      const entry = this.entryOf(dir);
      if (entry.busy === undefined) {
        entry.users += 1;
        this.sizes.delete(dir);
        const storage = storeArgs(join(dir, 'storage'), join(dir, 'runroot'));
        return { tenantId, projectId, dir, storage, use };
      }
      await entry.busy;
    }
  }

  private letGo(lease: CacheLease): void {
    const entry = this.entryOf(lease.dir);
    entry.users -= 1;
    this.sizes.delete(lease.dir);
    // An entry owing a sweep stays, so that the next lease's release still sweeps.
    if (entry.users === 0 && entry.busy === undefined && !entry.leftovers)
      this.entries.delete(lease.dir);
  }

  private entryOf(dir: string): Entry {
    let entry = this.entries.get(dir);
    if (entry === undefined) {
      entry = { users: 0, busy: undefined, leftovers: false };
      this.entries.set(dir, entry);
    }
    return entry;
  }

  /** One pass: every cache measured (or its size remembered), the least recently used removed. */
  private async evict(): Promise<void> {
    const max = this.config.localCacheMaxBytes;
    const caches = await this.list();
    let total = 0;
    for (const cache of caches) {
      let size = this.sizes.get(cache.dir);
      if (size === undefined) {
        size = await diskUsage(cache.dir);
        // A lease taken while it was measured makes the figure stale: measure it next time.
        if (!this.entries.has(cache.dir)) this.sizes.set(cache.dir, size);
      }
      cache.bytes = size;
      total += size;
    }
    if (total <= max) return;
    caches.sort((a, b) => a.lastUsed - b.lastUsed);
    // The newest cache is what the last build just filled: evicting it would only churn.
    const candidates = max === 0 ? caches : caches.slice(0, -1);
    for (const cache of candidates) {
      if (total <= max) break;
      const entry = this.entryOf(cache.dir);
      if (entry.users > 0 || entry.busy !== undefined) continue;
      const removed = rm(cache.dir, { recursive: true, force: true });
      entry.busy = removed;
      try {
        await removed;
      } finally {
        entry.busy = undefined;
        if (entry.users === 0) this.entries.delete(cache.dir);
      }
      this.sizes.delete(cache.dir);
      total -= cache.bytes;
      await rmdir(join(this.root, cache.tenantId)).catch(() => undefined);
      this.logger.info(
        {
          tenant_id: cache.tenantId,
          project_id: cache.projectId,
          bytes: cache.bytes,
          total_bytes: total,
          max_bytes: max,
        },
        'evicted the least recently used layer cache',
      );
    }
  }

  private async list(): Promise<
    Array<{ tenantId: string; projectId: string; dir: string; lastUsed: number; bytes: number }>
  > {
    const caches = [];
    for (const tenantId of await namesIn(this.root)) {
      if (!ID.test(tenantId)) continue;
      for (const projectId of await namesIn(join(this.root, tenantId))) {
        if (!ID.test(projectId)) continue;
        const dir = join(this.root, tenantId, projectId);
        const marker = await stat(join(dir, LAST_USED)).catch(() => stat(dir).catch(() => null));
        if (marker === null) continue;
        caches.push({ tenantId, projectId, dir, lastUsed: marker.mtimeMs, bytes: 0 });
      }
    }
    return caches;
  }
}

async function touch(file: string): Promise<void> {
  const now = new Date();
  try {
    await utimes(file, now, now);
  } catch {
    await writeFile(file, '');
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function namesIn(dir: string): Promise<string[]> {
  return readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return [];
    throw error;
  });
}

/**
 * Bytes a directory occupies on disk (allocated blocks, each hard-linked file once), as `du`
 * counts them. Entries that vanish while it walks (a build removing a container) are skipped.
 */
export async function diskUsage(dir: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const pending = [dir];
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const info = await lstat(path).catch(() => null);
    if (info === null) continue;
    if (info.nlink > 1 && !info.isDirectory()) {
      const key = `${info.dev}:${info.ino}`;
      if (seen.has(key)) continue;
      seen.add(key);
    }
    total += info.blocks * 512;
    if (info.isDirectory()) {
      for (const name of await namesIn(path)) pending.push(join(path, name));
    }
  }
  return total;
}
