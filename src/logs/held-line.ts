import type { BuilderFormat } from '../manifest/formats.js';
import { inspectLine } from './builder-output.js';
import type { HeldLine } from './log-backlog.js';

/** What a stored line keeps of the line it came from (LogSink's LogLineInput). */
interface LineSource {
  readonly container?: string;
  readonly format?: BuilderFormat;
}

/** `{container}` of the lines that carry nothing else: most lines, one shared object each. */
const CONTAINER_ONLY = new Map<string, Readonly<Record<string, string>>>();

/** One stored line of `input` (a piece of it when it was longer than MAX_LINE_BYTES). */
export function heldLine(
  input: LineSource,
  ts: Date,
  message: string,
  bytes: number,
  continued: boolean,
  masked: boolean,
): HeldLine {
  const insight = inspectLine(message, input.format);
  return {
    kind: 'line',
    line: {
      ts,
      level: insight.level,
      message,
      metadata: lineMetadata(insight.metadata, input.container, continued),
    },
    bytes,
    step: insight.step,
    masked,
  };
}

/**
 * A line's metadata: what the builder's output said, its container, and whether it goes on in
 * the next line; null when none. Lines with only a container share one frozen object per
 * container name (one object less per line at 100,000 lines a second).
 */
function lineMetadata(
  insight: Record<string, string>,
  container: string | undefined,
  continued: boolean,
): Record<string, string> | null {
  if (!continued && isEmpty(insight)) {
    if (container === undefined) return null;
    let shared = CONTAINER_ONLY.get(container);
    if (shared === undefined) {
      shared = Object.freeze({ container });
      if (CONTAINER_ONLY.size < 64) CONTAINER_ONLY.set(container, shared);
    }
    return shared;
  }
  return {
    ...insight,
    ...(container === undefined ? {} : { container }),
    ...(continued ? { continued: 'true' } : {}),
  };
}

/** No own key (without Object.keys' array per line). */
function isEmpty(record: Record<string, string>): boolean {
  for (const key in record) if (Object.hasOwn(record, key)) return false;
  return true;
}

/** Cuts text into pieces of at most `maxBytes` UTF-8 bytes without splitting a character. */
export function splitUtf8(text: string, maxBytes: number): string[] {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return [text];
  const pieces: string[] = [];
  let current = '';
  let size = 0;
  for (const char of text) {
    const charBytes = Buffer.byteLength(char, 'utf8');
    if (size + charBytes > maxBytes) {
      pieces.push(current);
      current = '';
      size = 0;
    }
    current += char;
    size += charBytes;
  }
  pieces.push(current);
  return pieces;
}
