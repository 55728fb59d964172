import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, read, unlinkSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { LineSplitter } from '../../logs/line-splitter.js';
import type { LogLineInput } from '../../logs/log-sink.js';
import type { BuilderFormat } from '../../manifest/formats.js';

export interface ChildOptions {
  readonly cwd?: string;
  /** The whole environment of the child: nothing is inherited from kiln's own. */
  readonly env: Readonly<Record<string, string>>;
  /** Where the output is spooled; the file is created and removed at once (see ChildRun). */
  readonly spool: string;
  /** Output past this many bytes is not read: the child is stopped and the exit says so. */
  readonly maxOutputBytes: number;
  /** Labels the lines (metadata.container) and picks the output parser. */
  readonly container: string;
  readonly format?: BuilderFormat;
  /** Receives the output in order, a batch at a time; the child waits for nothing. */
  readonly onLines: (lines: LogLineInput[]) => Promise<void>;
  /** Batches are handed over at most this often (a full batch at once); default 100 ms. */
  readonly flushEveryMs?: number;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The last lines the process printed, for error messages. */
  readonly tail: readonly string[];
  /** Why the output handed over is known to be incomplete, if it is (a marker line says so too). */
  readonly incomplete: string | undefined;
  /** The output passed `maxOutputBytes`: the process was stopped. */
  readonly outputLimitReached: boolean;
}

const FLUSH_EVERY_MS = 100;
const FLUSH_AT_LINES = 200;
const TAIL_LINES = 20;
const CHUNK_BYTES = 64 * 1024;
/** How often a reader that caught up looks for more output. */
const POLL_MS = 20;
/**
 * How often it looks in the first QUICK_POLLS looks after output (and after the start): a
 * child's first line after a quiet spell, the one a person watches for, waits 2 ms on average
 * rather than 10; a child that stays quiet costs a read every 20 ms after that.
 */
const QUICK_POLL_MS = 4;
const QUICK_POLLS = 25;
const LIMIT_CHECK_MS = 100;
const LIMIT_GRACE_MS = 2_000;
const NOTHING = Buffer.alloc(0);

/**
 * A child process in its own process group whose stdout and stderr become log lines.
 *
 * Both go to one open file (a spool, removed from the directory as soon as it is open, so nothing
 * is left behind) that kiln tails: the child's writes never wait for kiln, however slowly the
 * lines are stored (some builders drop output when their writes block), and stdout and stderr
 * keep the order they were written in. Lines are handed over in batches, strictly in order, each
 * once; every line is delivered before `exited` resolves. Output past `maxOutputBytes` stops the
 * child. When the output handed over is known to be incomplete (that limit, a read error, a line
 * cut by a signal), a `[kiln]` marker line says so after the last line.
 */
export class ChildRun {
  readonly exited: Promise<ChildExit>;
  private readonly child: ChildProcess;
  private readonly spool: number;
  private readonly ended: Promise<void>;
  private status: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  private spawnError: Error | undefined;
  private pending: LogLineInput[] = [];
  private writing: Promise<void> = Promise.resolve();
  private readonly tail: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** When the last batch was handed over (ms, monotonic). */
  private flushedAt = -Infinity;
  private writeError: Error | undefined;
  private incomplete: string | undefined;
  private outputLimitReached = false;

  constructor(
    private readonly command: string,
    args: readonly string[],
    private readonly options: ChildOptions,
  ) {
    const output = openSync(options.spool, 'w', 0o600);
    let input: number | undefined;
    try {
      input = openSync(options.spool, 'r');
      unlinkSync(options.spool);
      this.child = spawn(command, args, {
        cwd: options.cwd,
        env: options.env,
        stdio: ['ignore', output, output],
        detached: true, // its own process group, so cancel can stop everything it started
      });
    } catch (error) {
      if (input !== undefined) closeSync(input);
      throw error;
    } finally {
      closeSync(output); // the child has its own copy
    }
    this.spool = input;
    this.ended = new Promise<void>((done) => {
      this.child.once('exit', (code, signal) => {
        this.status = { code, signal };
        done();
      });
      this.child.once('error', (error) => {
        this.spawnError = error;
        done();
      });
    });
    const watch = setInterval(() => this.checkLimit(), LIMIT_CHECK_MS);
    this.exited = this.follow().finally(() => {
      clearInterval(watch);
      closeSync(this.spool);
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** SIGTERM to the whole process group, SIGKILL after `graceMs`; resolves when it has exited. */
  async stop(graceMs: number): Promise<void> {
    const pid = this.child.pid;
    if (pid === undefined || this.child.exitCode !== null || this.child.signalCode !== null) return;
    signalGroup(pid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs);
    await this.exited.catch(() => undefined);
    clearTimeout(timer);
    signalGroup(pid, 'SIGKILL'); // anything the leader left behind in its group
  }

  /** Tails the spool until the child has exited and everything it wrote was read. */
  private async follow(): Promise<ChildExit> {
    const splitter = new LineSplitter();
    let offset = 0;
    let quietLooks = 0;
    for (;;) {
      // Looked at before reading: once the child has exited, the file holds all it wrote.
      const exited = this.status !== undefined || this.spawnError !== undefined;
      // Nothing past the limit is read; checkLimit stops a child that writes past it.
      const room = this.options.maxOutputBytes - offset;
      let bytes: Buffer = NOTHING;
      try {
        if (room > 0) bytes = await readAt(this.spool, offset, Math.min(CHUNK_BYTES, room));
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? String(error);
        this.incomplete ??= `reading the output of ${this.command} failed (${code}); the rest of it is not stored`;
        break;
      }
      if (bytes.length > 0) {
        offset += bytes.length;
        quietLooks = 0;
        await this.take(splitter.push(bytes));
      } else if (exited) {
        break;
      } else {
        quietLooks++;
        await Promise.race([
          this.ended,
          delay(quietLooks <= QUICK_POLLS ? QUICK_POLL_MS : POLL_MS),
        ]);
      }
    }
    await this.ended; // after a read error, the child may still be running
    this.checkLimit();
    const last = splitter.end();
    const signal = this.status?.signal ?? null;
    if (last.length > 0 && signal !== null) {
      this.incomplete ??= `${this.command} was stopped by ${signal} in the middle of a line; its last line is cut short`;
    }
    await this.take(last);
    if (this.incomplete !== undefined)
      await this.take([{ text: `WARN: [kiln] ${this.incomplete}`, continued: false }], 'kiln');
    this.flush();
    await this.writing;
    if (this.spawnError !== undefined) throw this.spawnError;
    if (this.writeError !== undefined) throw this.writeError;
    return {
      code: this.status?.code ?? null,
      signal: this.status?.signal ?? null,
      tail: [...this.tail],
      incomplete: this.incomplete,
      outputLimitReached: this.outputLimitReached,
    };
  }

  /** The file's size, not the reader (which may lag), says when the child passed the limit. */
  private checkLimit(): void {
    if (this.outputLimitReached) return;
    if (fstatSync(this.spool).size <= this.options.maxOutputBytes) return;
    this.outputLimitReached = true;
    this.incomplete ??= `${this.command} printed more than ${this.options.maxOutputBytes} bytes; it was stopped and the rest of its output is not stored`;
    void this.stop(LIMIT_GRACE_MS);
  }

  /** Queues lines; with a full batch, waits for the previous one to be stored (never the child). */
  private async take(
    lines: ReadonlyArray<{ text: string; continued: boolean }>,
    container = this.options.container,
  ): Promise<void> {
    const ts = new Date();
    for (const line of lines) {
      this.pending.push({
        text: line.text,
        continued: line.continued,
        container,
        format: container === this.options.container ? this.options.format : undefined,
        ts,
      });
      if (!line.continued && container === this.options.container) {
        this.tail.push(line.text);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
      }
    }
    if (this.pending.length >= FLUSH_AT_LINES) {
      await this.writing;
      this.flush();
    } else if (this.pending.length > 0 && this.timer === undefined) {
      // The first lines after a quiet spell go at once (a build's first line is what its user
      // waits for); the lines after them wait for the interval, so a chatty child still makes
      // at most one write per interval.
      const wait = this.flushedAt + (this.options.flushEveryMs ?? FLUSH_EVERY_MS) - now();
      if (wait <= 0) this.flush();
      else this.timer = setTimeout(() => this.flush(), wait);
    }
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
    this.flushedAt = now();
    const batch = this.pending;
    this.pending = [];
    this.writing = this.writing.then(() =>
      this.options.onLines(batch).catch((error: unknown) => {
        this.writeError ??=
          error instanceof Error ? error : new Error('writing log lines failed', { cause: error });
      }),
    );
  }
}

function now(): number {
  return performance.now();
}

function readAt(fd: number, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(length);
  return new Promise((done, fail) =>
    read(fd, buffer, 0, length, position, (error, bytesRead) =>
      error === null ? done(buffer.subarray(0, bytesRead)) : fail(error),
    ),
  );
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}
