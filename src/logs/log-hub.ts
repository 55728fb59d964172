import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { type NotificationListener, Notifications } from '../database/notification-listener.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LOG_CHANNEL, STATUS_CHANNEL } from '../database/channels.js';
import type { StoredLogLine } from './log-entry.js';

/** What changed: new lines (up to `lastSeq`), or the status (or anything, after a reconnect). */
export type HubNews = { kind: 'lines'; lastSeq: number } | { kind: 'status' };
type Wake = (news: HubNews) => void;

/** The newest lines of a watched build, read once per notification and shared by its streams. */
interface Tail {
  lines: StoredLogLine[];
  bytes: number;
  /** One past the last line held; -1 until the first read. */
  next: number;
  /** The highest seq announced so far. */
  announced: number;
  reading: boolean;
}

const TAIL_MAX_LINES = 20_000;
const TAIL_MAX_BYTES = 16 * 1024 * 1024;
const TAIL_READ_BATCH = 2_000;

/**
 * Tells the log streams of this replica that a build has news (new lines or a terminal state),
 * whichever replica wrote them: Postgres LISTEN/NOTIFY carries `<build id>:…`. Subscribers read
 * the lines themselves from Postgres, so a lost notification costs latency, never lines.
 * For streams that have caught up, the hub reads each build's new lines once per notification and
 * serves them from memory (`linesFrom`), so a hundred viewers cost one query, not a hundred.
 */
@Injectable()
export class LogHub implements OnModuleInit, OnApplicationShutdown {
  private readonly subscribers = new Map<string, Set<Wake>>();
  private readonly tails = new Map<string, Tail>();
  private readonly listener: NotificationListener;

  constructor(
    notifications: Notifications,
    private readonly logs: BuildLogsRepository,
  ) {
    this.listener = notifications.listen([LOG_CHANNEL, STATUS_CHANNEL]);
    this.listener.on('notification', (channel: string, payload: string) => {
      const separator = payload.indexOf(':');
      const buildId = payload.slice(0, separator);
      if (!this.subscribers.has(buildId)) return;
      if (channel === LOG_CHANNEL) {
        this.announce(buildId, Number(payload.slice(separator + 1)));
      } else {
        this.notify(buildId, { kind: 'status' });
      }
    });
    this.listener.on('reconnected', () => {
      this.tails.clear(); // what was missed is read from Postgres again
      for (const buildId of this.subscribers.keys()) this.notify(buildId, { kind: 'status' });
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
      if (set.size === 0) {
        this.subscribers.delete(buildId);
        this.tails.delete(buildId);
      }
    };
  }

  /** How many lines the build has stored. */
  lineCount(buildId: string): Promise<number> {
    return this.logs.lineCount(buildId);
  }

  /** Lines from `fromSeq` on: from the shared tail when it holds them, else from Postgres. */
  async linesFrom(buildId: string, fromSeq: number, limit: number): Promise<StoredLogLine[]> {
    const tail = this.tails.get(buildId);
    const first = tail?.lines[0]?.seq;
    if (tail !== undefined && first !== undefined && fromSeq >= first && fromSeq < tail.next) {
      const start = fromSeq - first;
      return tail.lines.slice(start, start + limit);
    }
    return this.logs.linesFrom(buildId, fromSeq, limit);
  }

  private notify(buildId: string, news: HubNews): void {
    for (const wake of this.subscribers.get(buildId) ?? []) wake(news);
  }

  /** New lines up to `lastSeq` exist: read them once into the tail, then wake the streams. */
  private announce(buildId: string, lastSeq: number): void {
    let tail = this.tails.get(buildId);
    if (tail === undefined) {
      tail = { lines: [], bytes: 0, next: -1, announced: lastSeq, reading: false };
      this.tails.set(buildId, tail);
    }
    tail.announced = Math.max(tail.announced, lastSeq);
    if (!tail.reading) void this.readTail(buildId, tail);
  }

  private async readTail(buildId: string, tail: Tail): Promise<void> {
    tail.reading = true;
    try {
      while (this.tails.get(buildId) === tail && tail.next <= tail.announced) {
        // The first read starts at the announced line: streams behind it read Postgres themselves.
        const from = tail.next === -1 ? tail.announced : tail.next;
        const lines = await this.logs.linesFrom(buildId, from, TAIL_READ_BATCH);
        if (lines.length === 0) break;
        if (tail.next === -1) tail.lines = [];
        for (const line of lines) {
          tail.lines.push(line);
          tail.bytes += line.message.length;
        }
        tail.next = lines[lines.length - 1]!.seq + 1;
        // Drop the oldest lines in one splice: shift() in a loop is quadratic on a long tail.
        let drop = 0;
        while (tail.lines.length - drop > TAIL_MAX_LINES || tail.bytes > TAIL_MAX_BYTES) {
          tail.bytes -= tail.lines[drop++]!.message.length;
        }
        if (drop > 0) tail.lines.splice(0, drop);
        this.notify(buildId, { kind: 'lines', lastSeq: tail.next - 1 });
      }
    } catch {
      this.tails.delete(buildId); // streams fall back to Postgres
      this.notify(buildId, { kind: 'status' });
    } finally {
      tail.reading = false;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.listener.close();
  }
}
