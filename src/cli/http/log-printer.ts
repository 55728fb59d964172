import type { LogLine } from './log-follower.js';
import { stripAnsi } from './output.js';

export interface PrinterOptions {
  /** Prefix each line with its time. */
  readonly timestamps: boolean;
  /** Report the builder's steps: a line kept at the bottom of a terminal, else plain lines. */
  readonly progress: boolean;
}

/**
 * Writes log lines to standard output: with their ANSI colours on a terminal, without them
 * otherwise. With `progress`, the step the builder is at goes to standard error: a line redrawn
 * under the log on a terminal, a plain line per step otherwise.
 */
export class LogPrinter {
  private readonly colour = process.stdout.isTTY === true;
  private readonly redraw = process.stderr.isTTY === true;
  private step: string | undefined;
  private shown = false;
  private held: LogLine[] | undefined;
  private finished = false;
  private readonly started = Date.now();

  constructor(private readonly options: PrinterOptions) {}

  line(line: LogLine): void {
    if (this.held !== undefined) {
      this.held.push(line);
      return;
    }
    this.clear();
    const message = this.colour ? line.message : stripAnsi(line.message);
    process.stdout.write(`${this.options.timestamps ? `${line.timestamp} ` : ''}${message}\n`);
    const step = line.metadata?.['step'];
    if (this.options.progress && step !== undefined && step !== this.step) {
      this.step = step;
      if (!this.redraw) process.stderr.write(`[kiln] step ${step}\n`);
    }
    this.draw();
  }

  /** A line of the CLI's own on standard error, kept clear of the progress line. */
  say(text: string): void {
    this.clear();
    process.stderr.write(`${text}\n`);
    this.draw();
  }

  /** Keeps lines back (while a question is on the terminal) until release(). */
  hold(): void {
    this.clear();
    this.held ??= [];
  }

  release(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const line of held) this.line(line);
    this.draw();
  }

  /** Takes the progress line away for good. */
  done(): void {
    this.clear();
    this.finished = true;
  }

  private draw(): void {
    if (!this.options.progress || !this.redraw || this.held !== undefined || this.finished) return;
    const seconds = Math.round((Date.now() - this.started) / 1000);
    const elapsed = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, '0')}`;
    const [current, total] = (this.step ?? '').split('/').map(Number);
    const bar =
      current !== undefined && total !== undefined && total > 0
        ? `${'█'.repeat(Math.round((20 * current) / total)).padEnd(20, '░')} step ${this.step}`
        : 'starting';
    process.stderr.write(`\r\u001b[2K${bar}  ${elapsed}`);
    this.shown = true;
  }

  private clear(): void {
    if (!this.shown) return;
    process.stderr.write('\r\u001b[2K');
    this.shown = false;
  }
}
