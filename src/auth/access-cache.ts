import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { KilnConfig } from '../config/config.js';
import { ACCESS_CHANNEL } from '../database/channels.js';
import { type NotificationListener, Notifications } from '../database/notification-listener.js';
import { AccessChanges } from './access-changes.js';
import type { StoredApiToken } from './api-tokens.repository.js';
import { MembershipsRepository, type UserAccess } from './memberships.repository.js';

/** (user, tenant) answers kept at most; past it the least recently used goes. */
export const ACCESS_CACHE_MAX_ENTRIES = 10_000;

interface Entry {
  /** An access answer, or an API token's record. */
  readonly value: UserAccess | StoredApiToken;
  /** Whose access the value depends on. */
  readonly userId: string;
  /** performance.now() after which the entry is read again: monotonic, unlike the wall clock. */
  readonly expiresAt: number;
  /** The invalidation epoch when the read that produced it started. */
  readonly readAt: number;
}

/**
 * `MembershipsRepository.accessOf` answers, kept for KILN_ACCESS_CACHE_TTL_MS so that an
 * authorized request costs no query of its own (docs/adr/0025-hot-path-round-trips.md). A user's
 * entries are invalidated when this process changes its access (AccessChanges, synchronously)
 * and when Postgres announces a change made by any process (ACCESS_CHANNEL, after commit); all of
 * them when the LISTEN connection comes back, since what was sent while it was down is lost. The
 * TTL bounds how stale an answer can be when a notification never arrives.
 *
 * Invalidation bumps an epoch instead of searching the entries: an entry whose read started
 * before its user's last invalidation (or the last clear) is stale, so an answer read while the
 * change committed serves that one request and is never used again.
 */
@Injectable()
export class AccessCache implements OnModuleInit, OnApplicationShutdown {
  private readonly entries = new Map<string, Entry>();
  private epoch = 0;
  private clearedAt = 0;
  /** The epoch of each user's last invalidation since the last clear. */
  private readonly invalidatedAt = new Map<string, number>();
  /** Who wants to hear of a user's access changing (open log streams), by user. */
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly listener: NotificationListener | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly memberships: MembershipsRepository,
    notifications: Notifications,
    changes: AccessChanges,
    private readonly config: KilnConfig,
  ) {
    this.unsubscribe = changes.subscribe((userId) => this.invalidate(userId));
    if (config.accessCacheTtlMs === 0) return;
    this.listener = notifications.listen([ACCESS_CHANNEL]);
    this.listener.on('notification', (_channel: string, payload: string) => {
      if (payload === '*') this.clear();
      else this.invalidate(payload);
    });
    this.listener.on('reconnected', () => this.clear());
  }

  async onModuleInit(): Promise<void> {
    await this.listener?.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.unsubscribe();
    await this.listener?.close();
  }

  /** What `MembershipsRepository.accessOf` answers, from memory while it is fresh. */
  accessOf(userId: string, tenantId: string | null): Promise<UserAccess> {
    return this.remember(
      `${userId}|${tenantId ?? ''}`,
      async () => {
        const access = await this.memberships.accessOf(userId, tenantId);
        return { value: access, userId };
      },
      userId,
    );
  }

  /**
   * The API token with this hash (`read` finds it), from memory while it is fresh: dropped like
   * its user's access answers, so a revoked token (a deleted row announces its user) is read
   * again, and found missing, as soon as the notification arrives. A hash no token has is never
   * kept.
   */
  apiTokenOf(
    hash: string,
    read: (hash: string) => Promise<StoredApiToken | undefined>,
  ): Promise<StoredApiToken | undefined> {
    return this.remember(`token|${hash}`, async () => {
      const token = await read(hash);
      return token && { value: token, userId: token.userId };
    });
  }

  /** `read`'s value under `key`; `userId` is whose access it depends on, when known before. */
  private async remember<T extends Entry['value']>(
    key: string,
    read: () => Promise<{ value: T; userId: string } | undefined>,
    userId?: string,
  ): Promise<T | undefined> {
    const ttlMs = this.config.accessCacheTtlMs;
    if (ttlMs === 0) return (await read())?.value;
    const now = performance.now();
    const cached = this.entries.get(key);
    if (cached !== undefined) {
      this.entries.delete(key);
      if (cached.expiresAt > now && this.isCurrent(userId ?? cached.userId, cached.readAt)) {
        this.entries.set(key, cached); // the most recently used is iterated last
        return cached.value as T;
      }
    }
    const readAt = this.epoch;
    const found = await read();
    if (found === undefined) return undefined;
    this.entries.set(key, { ...found, readAt, expiresAt: now + ttlMs });
    if (this.entries.size > ACCESS_CACHE_MAX_ENTRIES)
      this.entries.delete(this.entries.keys().next().value!);
    return found.value;
  }

  /** The user's access may have changed: its entries are read again, and its watchers told. */
  invalidate(userId: string): void {
    this.epoch += 1;
    this.invalidatedAt.set(userId, this.epoch);
    // Bounded like the entries: past it, forgetting everything is as correct and as cheap.
    if (this.invalidatedAt.size > ACCESS_CACHE_MAX_ENTRIES) this.clear();
    else this.tell(this.watchers.get(userId));
  }

  /** Every entry is read again, and every watcher told. */
  clear(): void {
    this.epoch += 1;
    this.clearedAt = this.epoch;
    this.entries.clear();
    this.invalidatedAt.clear();
    for (const listeners of this.watchers.values()) this.tell(listeners);
  }

  /**
   * Calls `changed` whenever the user's access may have changed, as this cache learns it (this
   * process's changes, the notifications of every other's); returns what stops it. An open log
   * stream asks again then whether its caller may still read.
   */
  watch(userId: string, changed: () => void): () => void {
    const listeners = this.watchers.get(userId) ?? new Set();
    this.watchers.set(userId, listeners.add(changed));
    return () => {
      listeners.delete(changed);
      if (listeners.size === 0 && this.watchers.get(userId) === listeners)
        this.watchers.delete(userId);
    };
  }

  /** Calls each listener after the current work: a watcher never runs inside a change. */
  private tell(listeners: ReadonlySet<() => void> | undefined): void {
    for (const changed of listeners ?? []) queueMicrotask(changed);
  }

  private isCurrent(userId: string, readAt: number): boolean {
    return readAt >= this.clearedAt && readAt >= (this.invalidatedAt.get(userId) ?? 0);
  }
}
