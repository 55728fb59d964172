import { type ChildProcess, spawn } from 'node:child_process';
import { LineSplitter } from '../../logs/line-splitter.js';
import type { LogLineInput } from '../../logs/log-sink.js';
import type { BuilderFormat } from '../../logs/builder-output.js';

export interface ChildOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Labels the lines (metadata.container) and picks the output parser. */
  readonly container: string;
  readonly format?: BuilderFormat;
  /** Receives the output in order, a batch at a time; the child waits for nothing. */
  readonly onLines: (lines: LogLineInput[]) => Promise<void>;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The last lines the process printed, for error messages. */
  readonly tail: readonly string[];
}

const FLUSH_EVERY_MS = 100;
const FLUSH_AT_LINES = 200;
const TAIL_LINES = 20;

/**
 * A child process in its own process group whose stdout and stderr become log lines. Lines are
 * handed over in batches, strictly in order, and every line is delivered before `exited` resolves.
 */
export class ChildRun {
  readonly exited: Promise<ChildExit>;
  private readonly child: ChildProcess;
  private pending: LogLineInput[] = [];
  private writing: Promise<void> = Promise.resolve();
  private readonly tail: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writeError: Error | undefined;

  constructor(
    command: string,
    args: readonly string[],
    private readonly options: ChildOptions,
  ) {
    this.child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group, so cancel can stop everything it started
    });
    const streams = [this.child.stdout!, this.child.stderr!].map((stream) => {
      const splitter = new LineSplitter();
      stream.on('data', (chunk: Buffer) => this.take(splitter.push(chunk)));
      return new Promise<void>((done) =>
        stream.on('close', () => {
          this.take(splitter.end());
          done();
        }),
      );
    });
    this.exited = new Promise<ChildExit>((done, fail) => {
      this.child.once('error', fail);
      this.child.once('close', (code, signal) => {
        void Promise.all(streams)
          .then(() => this.flush())
          .then(() => this.writing)
          .then(() => {
            if (this.writeError !== undefined) fail(this.writeError);
            else done({ code, signal, tail: [...this.tail] });
          });
      });
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

  private take(lines: ReadonlyArray<{ text: string; continued: boolean }>): void {
    for (const line of lines) {
      this.pending.push({
        text: line.text,
        continued: line.continued,
        container: this.options.container,
        format: this.options.format,
        ts: new Date(),
      });
      if (!line.continued) {
        this.tail.push(line.text);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
      }
    }
    if (this.pending.length >= FLUSH_AT_LINES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FLUSH_EVERY_MS);
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return;
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

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}
