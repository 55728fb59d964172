import type { Logger } from 'pino';
import type { Writable } from 'node:stream';
import type { WebSocket } from 'ws';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import { isTerminal } from '../lifecycle/build-state.js';
import { type StoredLogLine, toStreamMessage } from '../logs/log-entry.js';
import type { LogHub, TailChunk } from '../logs/log-hub.js';
import { type Frames, textFrames } from './frames.js';

export interface SessionOptions {
  readonly batchSize: number;
  /** Bytes queued in the socket above which the session stops reading more lines. */
  readonly highWaterMark: number;
  /** How long the queue may stay above the high-water mark before the client is closed (1013). */
  readonly stallMs: number;
  readonly heartbeatMs: number;
  /** When the caller's token expires: the socket is closed with 1008 then. */
  readonly expiresAt: Date;
}

export interface SessionDeps {
  readonly hub: LogHub;
  readonly findBuild: (id: string) => Promise<BuildEntity | undefined>;
  readonly logger: Logger;
  /** Calls `changed` whenever the caller's access may have changed; returns what stops it. */
  readonly watchAccess: (changed: () => void) => () => void;
  /** Whether the caller may still read the build, asked again after such a change. */
  readonly stillAllowed: () => Promise<boolean>;
}

/**
 * Why a session ended, as kiln_log_stream_sessions_closed_total counts it: the client went away
 * (or stopped answering pings), the build ended or was deleted, the caller's access was revoked
 * or its token expired, the client read too slowly, or the session failed. `shutdown` and
 * `refused` are the server's (LogStreamServer).
 */
export type SessionEnd = 'client' | 'build_finished' | 'access_revoked' | 'slow_consumer' | 'error';

export const CLOSE_NORMAL = 1000;
export const CLOSE_POLICY = 1008;
export const CLOSE_TRY_AGAIN_LATER = 1013;
const STALLED_CLOSE_GRACE_MS = 1_000;

/** The longest delay setTimeout takes; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Streams one build's log to one WebSocket: lines from `fromSeq` on, read from Postgres in seq
 * order (so replay and live lines meet with no gap and no duplicate), woken by the LogHub when
 * lines or a status change arrive. Ends with close 1000 and the final status once the build is
 * terminal and every stored line was sent; with 1008 when the caller's token expires, or when a
 * change to its access (a revoked API token, a disabled user, a membership taken away) leaves it
 * no longer allowed to read the build.
 */

export class LogStreamSession {
  private next: number;
  private closed = false;
  private wake: (() => void) | undefined;
  /** News arrived while the session was reading: the next sleep returns at once. */
  private news = false;
  /** The build's status may have changed (or is unknown yet): look before sleeping. */
  private statusNews = true;
  private alive = true;
  /** The build's status when this stream last read it (`gone`: deleted). */
  private knownStatus: string | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  private unsubscribe: (() => void) | undefined;
  private unwatchAccess: (() => void) | undefined;
  /** The first reason the session ended for; a close by the client when none came first. */
  private endedBy: SessionEnd | undefined;

  constructor(
    private readonly ws: WebSocket,
    /** The socket under `ws`: log frames are written to it directly, made once for all streams. */
    private readonly socket: Writable,
    private readonly buildId: string,
    fromSeq: number,
    private readonly deps: SessionDeps,
    private readonly options: SessionOptions,
  ) {
    this.next = fromSeq;
  }

  /** Runs until the socket closes; resolves then, with why it ended. */
  async run(): Promise<SessionEnd> {
    this.ws.on('close', () => this.stop());
    this.ws.on('error', () => this.stop('error'));
    this.ws.on('pong', () => {
      this.alive = true;
    });
    this.ws.on('message', () => undefined); // clients have nothing to say; size is capped by the server
    this.unsubscribe = this.deps.hub.subscribe(this.buildId, (news) => {
      if (news.kind === 'status') this.statusNews = true;
      else if (news.kind === 'lines' && news.lastSeq < this.next)
        return; // sent already
      else if (news.kind === 'polled') {
        // The safety poll: act only on what this stream does not know yet.
        if (news.status !== this.knownStatus) this.statusNews = true;
        else if (news.lines <= this.next) return;
      }
      this.news = true;
      this.wake?.();
    });
    this.timers.push(setInterval(() => this.heartbeat(), this.options.heartbeatMs));
    this.closeAtExpiry();
    this.unwatchAccess = this.deps.watchAccess(() => void this.checkAccess());
    try {
      await this.pump();
    } catch (error) {
      this.deps.logger.error({ err: error, build_id: this.buildId }, 'log stream failed');
      this.close(1011, 'internal error; reconnect with ?offset', 'error');
    } finally {
      this.stop();
    }
    return this.endedBy ?? 'client';
  }

  /** After a change to the caller's access: closes the stream if it may no longer read. */
  private async checkAccess(): Promise<void> {
    if (this.closed) return;
    if (!(await this.deps.stillAllowed()))
      this.close(CLOSE_POLICY, 'access revoked', 'access_revoked');
  }

  /**
   * Closes the stream when its token expires. An API token may live for months, longer than one
   * timer can wait (2^31 - 1 ms): the timer is set again until the time comes.
   */
  private closeAtExpiry(): void {
    const left = this.options.expiresAt.getTime() - Date.now();
    this.timers.push(
      left > MAX_TIMER_MS
        ? setTimeout(() => this.closeAtExpiry(), MAX_TIMER_MS)
        : setTimeout(
            () => this.close(CLOSE_POLICY, 'access token expired', 'access_revoked'),
            Math.max(0, left),
          ),
    );
  }

  private async pump(): Promise<void> {
    while (!this.closed) {
      if (!(await this.waitForRoom())) return;
      this.news = false;
      const fromTail = this.sendFromTail();
      if (fromTail === 'more') continue;
      if (fromTail === 'not-held') {
        const lines = await this.deps.hub.linesFrom(
          this.buildId,
          this.next,
          this.options.batchSize,
        );
        const last = lines.at(-1);
        if (last !== undefined) {
          if (!this.write(textFrames(lines.map((line) => this.message(line))), 0)) return;
          this.next = last.seq + 1;
        }
        if (lines.length === this.options.batchSize) continue;
      }
      if (!this.statusNews) {
        // Caught up and the status has not changed: wait for news (the hub's safety poll brings
        // it too, should a notification be lost).
        await this.sleep();
        continue;
      }
      this.statusNews = false;

      const build = await this.deps.findBuild(this.buildId);
      this.knownStatus = build?.status ?? 'gone';
      if (build === undefined) return this.close(CLOSE_NORMAL, 'deleted', 'build_finished');
      if (isTerminal(build.status)) {
        // Counted after the terminal status was read: every line written before it is included.
        if (this.next >= (await this.deps.hub.lineCount(this.buildId))) {
          await this.drained();
          return this.close(CLOSE_NORMAL, build.status, 'build_finished');
        }
        this.statusNews = true; // terminal with lines still to send: read them, then look again
        continue;
      }
      await this.sleep();
    }
  }

  /**
   * Sends what the hub's shared tail holds from `next` on, as frames made once per chunk for
   * every stream, one write per chunk, up to about the high-water mark: `more` when it stopped
   * there, `caught-up` at the tail's end, `not-held` when the tail does not hold `next`.
   */
  private sendFromTail(): 'more' | 'caught-up' | 'not-held' {
    const chunks = this.deps.hub.tailFrom(this.buildId, this.next);
    if (chunks === undefined) return 'not-held';
    let written = 0;
    for (const chunk of chunks) {
      if (written >= this.options.highWaterMark) return 'more';
      const frames = this.framesOf(chunk);
      const from = Math.max(0, this.next - chunk.first);
      if (!this.write(frames, from)) return 'caught-up'; // closed: the pump ends
      written += frames.buffer.length - frames.offsets[from]!;
      this.next = chunk.first + chunk.lines.length;
    }
    return 'caught-up';
  }

  private framesOf(chunk: TailChunk): Frames {
    let frames = chunkFrames.get(chunk);
    if (frames === undefined) {
      frames = textFrames(chunk.lines.map((line) => this.message(line)));
      chunkFrames.set(chunk, frames);
    }
    return frames;
  }

  private message(line: StoredLogLine): string {
    return JSON.stringify(toStreamMessage(this.buildId, line));
  }

  /**
   * Writes frames `from` on straight to the socket, whole frames only, so the ws library's own
   * frames (ping, close) fall between them. False once the socket is not open (closing or closed).
   */
  private write(frames: Frames, from: number): boolean {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) {
      this.stop();
      return false;
    }
    this.socket.write(from === 0 ? frames.buffer : frames.buffer.subarray(frames.offsets[from]));
    return true;
  }

  /** Waits while the socket's queue is over the high-water mark; false when the client stalled. */
  private async waitForRoom(): Promise<boolean> {
    const started = Date.now();
    while (!this.closed && this.ws.bufferedAmount > this.options.highWaterMark) {
      if (Date.now() - started > this.options.stallMs) {
        // The close frame waits behind the unread data; a client that still does not read is
        // dropped a moment later, so its buffer is freed either way.
        this.deps.logger.info(
          { build_id: this.buildId, buffered: this.ws.bufferedAmount, next_seq: this.next },
          'log stream client too slow; closing it',
        );
        this.close(
          CLOSE_TRY_AGAIN_LATER,
          'client too slow; reconnect with ?offset',
          'slow_consumer',
        );
        setTimeout(() => this.ws.terminate(), STALLED_CLOSE_GRACE_MS).unref();
        return false;
      }
      await delay(25);
    }
    return !this.closed;
  }

  private async drained(): Promise<void> {
    const started = Date.now();
    while (
      !this.closed &&
      this.ws.bufferedAmount > 0 &&
      Date.now() - started < this.options.stallMs
    ) {
      await delay(10);
    }
  }

  /** Waits for news from the hub (notifications, or its safety poll). */
  private sleep(): Promise<void> {
    if (this.news || this.closed) return Promise.resolve();
    return new Promise((done) => {
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private heartbeat(): void {
    if (!this.alive) {
      this.deps.logger.info(
        { build_id: this.buildId },
        'log stream client stopped answering pings',
      );
      this.ws.terminate();
      this.stop();
      return;
    }
    this.alive = false;
    this.ws.ping();
  }

  private close(code: number, reason: string, end: SessionEnd): void {
    if (this.closed) return;
    this.endedBy ??= end;
    this.closed = true;
    this.ws.close(code, reason);
    this.stop();
  }

  private stop(end?: SessionEnd): void {
    if (!this.closed && end !== undefined) this.endedBy ??= end;
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.length = 0;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.unwatchAccess?.();
    this.unwatchAccess = undefined;
    this.wake?.();
  }
}

/** Frames of the hub's shared chunks, made by the first stream that sends one, for all. */
const chunkFrames = new WeakMap<TailChunk, Frames>();

function delay(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
