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
  private partial = '';
  private readonly base: number | undefined;
  private skip: number;

  constructor(public cursor: LogCursor | undefined) {
    this.base = cursor?.tsMs;
    this.skip = cursor?.seen ?? 0;
  }

  take(text: string): ParsedLine[] {
    const parts = (this.partial + text).split('\n');
    this.partial = parts.pop() ?? '';
    return parts.flatMap((raw) => this.accept(raw));
  }

  /** The last line of a finished stream may have no newline. */
  finish(): ParsedLine[] {
    const rest = this.partial;
    this.partial = '';
    return rest === '' ? [] : this.accept(rest);
  }

  /** A broken stream's unfinished line comes again when the stream is reopened. */
  dropPartial(): void {
    this.partial = '';
  }

  private accept(raw: string): ParsedLine[] {
    const line = parseTimestamped(raw.endsWith('\r') ? raw.slice(0, -1) : raw);
    if (line === undefined) return [];
    if (this.base !== undefined) {
      if (line.tsMs < this.base) return [];
      if (line.tsMs === this.base && this.skip > 0) {
        this.skip--;
        return [];
      }
    }
    this.cursor =
      this.cursor !== undefined && this.cursor.tsMs === line.tsMs
        ? { tsMs: line.tsMs, seen: this.cursor.seen + 1 }
        : { tsMs: line.tsMs, seen: 1 };
    return [line];
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
