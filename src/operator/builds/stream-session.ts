/** Where reading a container's log resumes: the last line handed on, as (ms, count at that ms). */
export interface LogCursor {
  /** Timestamp (ms) of the last line stored for the container. */
  readonly tsMs: number;
  /** How many of the container's lines carry exactly that timestamp. */
  readonly seen: number;
}

export interface ParsedLine {
  readonly tsMs: number;
  readonly text: string;
}

/**
 * One stream's text turned into lines, with the duplicates of a reopened stream dropped: lines
 * before the cursor's timestamp, and the first `seen` lines at exactly that timestamp.
 */
export class StreamSession {
  terminatedAtOpen = false;
  /** Lines this stream handed on (those before its cursor skipped). */
  accepted = 0;
  private partial = '';
  private readonly base: number | undefined;
  private skip: number;
  /** The cursor as numbers, not an object per line; `hasCursor` false: none yet. */
  private hasCursor: boolean;
  private lastTsMs: number;
  private seenAtLast: number;

  constructor(cursor: LogCursor | undefined) {
    this.base = cursor?.tsMs;
    this.skip = cursor?.seen ?? 0;
    this.hasCursor = cursor !== undefined;
    this.lastTsMs = cursor?.tsMs ?? 0;
    this.seenAtLast = cursor?.seen ?? 0;
  }

  /** Where a stream reopened after this one resumes: the last line accepted, or where it began. */
  get cursor(): LogCursor | undefined {
    return this.hasCursor ? { tsMs: this.lastTsMs, seen: this.seenAtLast } : undefined;
  }

  take(text: string): ParsedLine[] {
    const joined = this.partial === '' ? text : this.partial + text;
    const lines: ParsedLine[] = [];
    let from = 0;
    for (let end = joined.indexOf('\n'); end !== -1; end = joined.indexOf('\n', from)) {
      this.accept(joined.slice(from, end), lines);
      from = end + 1;
    }
    this.partial = from === joined.length ? '' : joined.slice(from);
    return lines;
  }

  /** The last line of a finished stream may have no newline. */
  finish(): ParsedLine[] {
    const rest = this.partial;
    this.partial = '';
    const lines: ParsedLine[] = [];
    if (rest !== '') this.accept(rest, lines);
    return lines;
  }

  /** A broken stream's unfinished line comes again when the stream is reopened. */
  dropPartial(): void {
    this.partial = '';
  }

  private accept(raw: string, into: ParsedLine[]): void {
    const line = parseTimestamped(raw.endsWith('\r') ? raw.slice(0, -1) : raw);
    if (line === undefined) return;
    if (this.base !== undefined) {
      if (line.tsMs < this.base) return;
      if (line.tsMs === this.base && this.skip > 0) {
        this.skip--;
        return;
      }
    }
    if (this.hasCursor && this.lastTsMs === line.tsMs) this.seenAtLast++;
    else {
      this.hasCursor = true;
      this.lastTsMs = line.tsMs;
      this.seenAtLast = 1;
    }
    this.accepted++;
    into.push(line);
  }
}

const TIMESTAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})$/;

/** `2026-11-23T03:00:00.123456789Z text` → ms and text; undefined when there is no timestamp. */
export function parseTimestamped(raw: string): ParsedLine | undefined {
  const fast = kubeletStampMs(raw);
  if (fast !== undefined) return { tsMs: fast, text: raw.slice(31) };
  const space = raw.indexOf(' ');
  const stamp = space === -1 ? raw : raw.slice(0, space);
  const match = TIMESTAMP.exec(stamp);
  if (match === null) return undefined;
  const [, seconds, fraction = '', zone] = match;
  const tsMs = Date.parse(`${seconds}.${fraction.padEnd(3, '0').slice(0, 3)}${zone}`);
  if (Number.isNaN(tsMs)) return undefined;
  return { tsMs, text: space === -1 ? '' : raw.slice(space + 1) };
}

const DIGIT_0 = 48;

/**
 * The kubelet's own form, `2026-11-23T03:00:00.123456789Z ` (30 characters and a space), read
 * without a regular expression or a date string: every line of every pod goes through here.
 * Undefined for any other form (parseTimestamped's general reading takes it).
 */
function kubeletStampMs(raw: string): number | undefined {
  if (
    raw.length < 31 ||
    raw.charCodeAt(30) !== 32 ||
    raw.charCodeAt(29) !== 90 || // Z
    raw.charCodeAt(19) !== 46 || // .
    raw.charCodeAt(10) !== 84 || // T
    raw.charCodeAt(4) !== 45 ||
    raw.charCodeAt(7) !== 45 ||
    raw.charCodeAt(13) !== 58 ||
    raw.charCodeAt(16) !== 58
  )
    return undefined;
  const n = (from: number, to: number): number => {
    let value = 0;
    for (let i = from; i < to; i++) {
      const digit = raw.charCodeAt(i) - DIGIT_0;
      if (digit < 0 || digit > 9) return NaN;
      value = value * 10 + digit;
    }
    return value;
  };
  for (let i = 23; i < 29; i++) {
    const digit = raw.charCodeAt(i) - DIGIT_0;
    if (digit < 0 || digit > 9) return undefined;
  }
  const month = n(5, 7);
  const day = n(8, 10);
  const hour = n(11, 13);
  const minute = n(14, 16);
  const second = n(17, 19);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return undefined;
  const ms = Date.UTC(n(0, 4), month - 1, day, hour, minute, second, n(20, 23));
  return Number.isNaN(ms) ? undefined : ms;
}
