import { Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { KilnConfig } from '../config/config.js';
import { type NotificationListener, Notifications } from '../database/notification-listener.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LOG_CHANNEL, STATUS_CHANNEL } from '../database/channels.js';
import type { StoredLogLine } from './log-entry.js';

/**
 * What changed: new lines (up to `lastSeq`), or the status (or anything, after a reconnect); or
 * what the safety poll saw (`status` `gone` when the build was deleted), for a stream to compare
 * with what it knows.
 */
export type HubNews =
  | { kind: 'lines'; lastSeq: number }
  | { kind: 'status' }
  | { kind: 'polled'; status: string; lines: number };
type Wake = (news: HubNews) => void;

/**
 * Lines of one tail read, in seq order from `first`. Never changed once made, so a stream may
 * keep what it derived from one (its WebSocket frames) for as long as the chunk lives.
 */
export interface TailChunk {
  readonly first: number;
  readonly lines: readonly StoredLogLine[];
}

/** The newest lines of a watched build, read once per notification and shared by its streams. */
interface Tail {
  chunks: TailChunk[];
  lines: number;
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
 * Drops the oldest lines past TAIL_MAX_LINES or TAIL_MAX_BYTES: whole chunks while more than one
 * is held, then the head of the last one, as a new chunk (a stream may still be sending frames
 * made from the old one).
 */
function trim(tail: Tail): void {
  const over = () => tail.lines > TAIL_MAX_LINES || tail.bytes > TAIL_MAX_BYTES;
  while (over() && tail.chunks.length > 1) {
    const dropped = tail.chunks.shift()!;
    tail.lines -= dropped.lines.length;
    for (const line of dropped.lines) tail.bytes -= line.message.length;
  }
  const [only] = tail.chunks;
  if (only === undefined || !over()) return;
  let drop = 0;
  while (over()) {
    tail.lines -= 1;
    tail.bytes -= only.lines[drop++]!.message.length;
  }
  tail.chunks[0] = { first: only.first + drop, lines: only.lines.slice(drop) };
}

/**
 * Tells the log streams of this replica that a build has news (new lines or a terminal state),
 * whichever replica wrote them: Postgres LISTEN/NOTIFY carries `<build id>:…`. Subscribers read
 * the lines themselves from Postgres, so a lost notification costs latency, never lines.
 * For streams that have caught up, the hub reads each build's new lines once per notification and
 * serves them from memory (`tailFrom`, `linesFrom`), so a hundred viewers cost one query, not a
 * hundred. In case a notification was lost, one query every KILN_WS_POLL_SECONDS looks at the
 * line count and status of every watched build and wakes the streams of those that changed:
 * idle streams cost nothing of their own.
 */
@Injectable()
export class LogHub implements OnModuleInit, OnApplicationShutdown {
  private readonly subscribers = new Map<string, Set<Wake>>();
  private readonly tails = new Map<string, Tail>();
  private readonly listener: NotificationListener;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    notifications: Notifications,
    private readonly logs: BuildLogsRepository,
    private readonly config: KilnConfig,
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
    this.pollTimer = setInterval(() => void this.poll(), this.config.wsPollMs);
    this.pollTimer.unref();
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
      if (set.size === 0 && this.subscribers.get(buildId) === set) {
        this.subscribers.delete(buildId);
        this.tails.delete(buildId);
      }
    };
  }

  /** How many lines the build has stored. */
  lineCount(buildId: string): Promise<number> {
    return this.logs.lineCount(buildId);
  }

  /**
   * The held chunks with lines from `fromSeq` on (the first may start before it), `[]` when
   * `fromSeq` is where the tail ends, or undefined when the tail does not hold `fromSeq`: then
   * the lines are in Postgres only.
   */
  tailFrom(buildId: string, fromSeq: number): readonly TailChunk[] | undefined {
    const tail = this.tails.get(buildId);
    const first = tail?.chunks[0]?.first;
    if (tail === undefined || first === undefined || fromSeq < first || fromSeq > tail.next)
      return undefined;
    // Streams that have caught up ask for the newest chunks: look from the end.
    let index = tail.chunks.length;
    while (
      index > 0 &&
      tail.chunks[index - 1]!.first + tail.chunks[index - 1]!.lines.length > fromSeq
    )
      index--;
    return tail.chunks.slice(index);
  }

  /** Lines from `fromSeq` on: from the shared tail when it holds them, else from Postgres. */
  async linesFrom(buildId: string, fromSeq: number, limit: number): Promise<StoredLogLine[]> {
    const chunks = this.tailFrom(buildId, fromSeq);
    if (chunks === undefined) return this.logs.linesFrom(buildId, fromSeq, limit);
    const lines: StoredLogLine[] = [];
    for (const chunk of chunks) {
      const start = Math.max(0, fromSeq - chunk.first);
      for (let i = start; i < chunk.lines.length && lines.length < limit; i++)
        lines.push(chunk.lines[i]!);
      if (lines.length === limit) break;
    }
    return lines;
  }

  private notify(buildId: string, news: HubNews): void {
    for (const wake of this.subscribers.get(buildId) ?? []) wake(news);
  }

  /** New lines up to `lastSeq` exist: read them once into the tail, then wake the streams. */
  private announce(buildId: string, lastSeq: number): void {
    let tail = this.tails.get(buildId);
    if (tail === undefined) {
      tail = { chunks: [], lines: 0, bytes: 0, next: -1, announced: lastSeq, reading: false };
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
        tail.chunks.push({ first: lines[0]!.seq, lines });
        tail.lines += lines.length;
        for (const line of lines) tail.bytes += line.message.length;
        tail.next = lines[lines.length - 1]!.seq + 1;
        trim(tail);
        this.notify(buildId, { kind: 'lines', lastSeq: tail.next - 1 });
      }
    } catch {
      this.tails.delete(buildId); // streams fall back to Postgres
      this.notify(buildId, { kind: 'status' });
    } finally {
      tail.reading = false;
    }
  }

  /**
   * The safety net for lost notifications: one query for every watched build, whose status and
   * line count go to its streams, which compare them with what they know (no query of their own
   * unless something changed). New lines it finds are read into the tail as if announced.
   */
  private async poll(): Promise<void> {
    if (this.polling || this.subscribers.size === 0) return;
    this.polling = true;
    try {
      const ids = [...this.subscribers.keys()];
      const states = new Map((await this.logs.watchedStates(ids)).map((s) => [s.buildId, s]));
      for (const id of ids) {
        if (!this.subscribers.has(id)) continue;
        const state = states.get(id);
        const lines = state?.lines ?? 0;
        const tail = this.tails.get(id);
        if (tail !== undefined && lines - 1 > tail.announced) this.announce(id, lines - 1);
        this.notify(id, { kind: 'polled', status: state?.status ?? 'gone', lines });
      }
    } catch {
      // The database is away: the next poll (or the listener's reconnect) catches up.
    } finally {
      this.polling = false;
    }
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.pollTimer);
    await this.listener.close();
  }
}
