import { type NewLogLine, UncertainCommitError } from './build-logs.repository.js';

/**
 * What LogSink holds in memory for a build while the database cannot be reached: its lines in
 * order, bounded by LogBufferLimits, and the batches they are written back in.
 */

/** How much of a build's log LogSink holds in memory while the database cannot be reached. */
export interface LogBufferLimits {
  /** Lines held per build; past it the oldest held lines are dropped (one marker says so). */
  readonly maxLines: number;
  /** Message bytes held per build, the same way. */
  readonly maxBytes: number;
  /** How long `release` waits for held lines to be stored before it counts them as lost. */
  readonly releaseTimeoutMs: number;
}

/** A builder step read from its output: reported as the build's progress. */
export interface Step {
  readonly current: number;
  readonly total: number;
}

/** Held lines are written in batches of at most this many lines or bytes. */
const DRAIN_BATCH_LINES = 1_000;
const DRAIN_BATCH_BYTES = 4 * 1024 * 1024;

export interface HeldLine {
  readonly kind: 'line';
  readonly line: NewLogLine;
  readonly bytes: number;
  readonly step: Step | undefined;
  /** A registered secret was replaced by the mask in it (kiln_log_lines_masked_total). */
  readonly masked: boolean;
}

/** Where held lines were dropped: stored as one WARN line. `ts` is the last dropped line's. */
interface LostLines {
  readonly kind: 'lost';
  readonly count: number;
  readonly ts: Date;
}

export type Held = HeldLine | LostLines;

export interface Batch {
  readonly entries: readonly Held[];
  /** Set once an attempt failed during COMMIT: see BuildLogsRepository.append. */
  storedIfLogLines?: number;
  storedIfLastLine?: NewLogLine;
}

/**
 * One build's lines waiting for the database, in order: the batch being written (it stays until
 * it is stored) and a queue behind it. Over the limits, the oldest queued line is dropped and
 * counted in a marker at its place, merged with the marker before it: lost lines stay one run.
 */
export class Backlog {
  done: Promise<void> = Promise.resolve();
  abandoned = false;
  warnedFull = false;
  private batch: Batch | undefined;
  private queue: Array<Held | undefined> = [];
  private head = 0;
  private lines = 0;
  private bytes = 0;

  constructor(
    first: readonly HeldLine[],
    error: unknown,
    private readonly limits: LogBufferLimits,
  ) {
    this.batch = {
      entries: first,
      ...(error instanceof UncertainCommitError
        ? { storedIfLogLines: error.logLinesIfCommitted, storedIfLastLine: error.lastLine }
        : {}),
    };
  }

  /** Lines waiting: the batch in flight and the queue. */
  get pending(): number {
    return (this.batch?.entries.filter((e) => e.kind === 'line').length ?? 0) + this.lines;
  }

  /** Lines not stored: waiting, and dropped while waiting. */
  unstored(): number {
    let lost = 0;
    for (const entry of [...(this.batch?.entries ?? []), ...this.queue.slice(this.head)])
      if (entry?.kind === 'lost') lost += entry.count;
    return this.pending + lost;
  }

  /** Queues lines; returns how many held lines were dropped to stay within the limits. */
  hold(lines: readonly HeldLine[]): number {
    let dropped = 0;
    for (const line of lines) {
      this.queue.push(line);
      this.lines++;
      this.bytes += line.bytes;
      while (this.lines > this.limits.maxLines || this.bytes > this.limits.maxBytes) {
        this.dropOldest();
        dropped++;
      }
    }
    return dropped;
  }

  /** The batch to write next: the one that failed, or the next lines from the queue. */
  next(): Batch | undefined {
    if (this.batch !== undefined) return this.batch;
    const entries: Held[] = [];
    let lines = 0;
    let bytes = 0;
    while (this.head < this.queue.length) {
      const entry = this.queue[this.head]!;
      if (entry.kind === 'line') {
        if (
          entries.length > 0 &&
          (lines >= DRAIN_BATCH_LINES || bytes + entry.bytes > DRAIN_BATCH_BYTES)
        )
          break;
        lines++;
        bytes += entry.bytes;
      }
      entries.push(entry);
      this.queue[this.head++] = undefined;
    }
    this.lines -= lines;
    this.bytes -= bytes;
    this.compact();
    this.batch = entries.length === 0 ? undefined : { entries };
    return this.batch;
  }

  /** The batch from `next()` is stored. */
  stored(): void {
    this.batch = undefined;
  }

  private dropOldest(): void {
    let count = 0;
    let entry = this.queue[this.head]!;
    while (entry.kind === 'lost') {
      count += entry.count;
      this.queue[this.head++] = undefined;
      entry = this.queue[this.head]!;
    }
    this.lines--;
    this.bytes -= entry.bytes;
    this.queue[this.head] = { kind: 'lost', count: count + 1, ts: entry.line.ts };
    this.compact();
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }
}

export function toNewLogLine(entry: Held): NewLogLine {
  if (entry.kind === 'line') return entry.line;
  return {
    ts: entry.ts,
    level: 'WARN',
    message: `[kiln] ${entry.count} log lines were lost while the database was unavailable`,
    metadata: { dropped: String(entry.count) },
  };
}
