import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { type NotificationListener, Notifications } from '../database/notification-listener.js';
import { LOG_CHANNEL, STATUS_CHANNEL } from './log-entry.js';

/** What changed: new lines (up to `lastSeq`), or the status (or anything, after a reconnect). */
export type HubNews = { kind: 'lines'; lastSeq: number } | { kind: 'status' };
type Wake = (news: HubNews) => void;

/**
 * Tells the log streams of this replica that a build has news (new lines or a terminal state),
 * whichever replica wrote them: Postgres LISTEN/NOTIFY carries `<build id>:…`. Subscribers read
 * the lines themselves from Postgres, so a lost notification costs latency, never lines.
 */
@Injectable()
export class LogHub implements OnModuleInit, OnApplicationShutdown {
  private readonly subscribers = new Map<string, Set<Wake>>();
  private readonly listener: NotificationListener;

  constructor(notifications: Notifications) {
    this.listener = notifications.listen([LOG_CHANNEL, STATUS_CHANNEL]);
    this.listener.on('notification', (channel: string, payload: string) => {
      const separator = payload.indexOf(':');
      const buildId = payload.slice(0, separator);
      const news: HubNews =
        channel === LOG_CHANNEL
          ? { kind: 'lines', lastSeq: Number(payload.slice(separator + 1)) }
          : { kind: 'status' };
      for (const wake of this.subscribers.get(buildId) ?? []) wake(news);
    });
    this.listener.on('reconnected', () => {
      for (const set of this.subscribers.values()) for (const wake of set) wake({ kind: 'status' });
    });
  }

  async onModuleInit(): Promise<void> {
    await this.listener.start();
  }

  subscribe(buildId: string, wake: Wake): () => void {
    let set = this.subscribers.get(buildId);
    if (set === undefined) {
      set = new Set();
      this.subscribers.set(buildId, set);
    }
    set.add(wake);
    return () => {
      set.delete(wake);
      if (set.size === 0) this.subscribers.delete(buildId);
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.listener.close();
  }
}
