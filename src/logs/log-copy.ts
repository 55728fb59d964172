import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import copyStreams from 'pg-copy-streams';
import type { EntityManager } from 'typeorm';

/**
 * Log lines into build_log_lines by COPY FROM STDIN in its text format, for
 * BuildLogsRepository.appendToMany: every column written as Postgres reads it back.
 */

/** A line as build_log_lines stores it (BuildLogsRepository's NewLogLine). */
interface CopiedLine {
  readonly ts: Date;
  readonly level: string;
  readonly message: string;
  readonly metadata: Record<string, string> | null;
}

/** One build's lines, stored from seq `knownLogLines` on. */
interface CopiedEntry {
  readonly buildId: string;
  readonly knownLogLines: number;
  readonly lines: readonly CopiedLine[];
}

/** One row of COPY's text format: tab between columns, `\N` for null, the rest escaped. */
function copyRow(buildId: string, seq: number, line: CopiedLine, iso: string): string {
  const metadata = line.metadata === null ? '\\N' : metadataText(line.metadata);
  return `${buildId}\t${seq}\t${iso}\t${line.level}\t${copyText(line.message)}\t${metadata}\n`;
}

/** The COPY text of metadata objects lines share (LogSink's one per container): made once. */
const SHARED_TEXTS = new WeakMap<object, string>();

function metadataText(metadata: Record<string, string>): string {
  if (!Object.isFrozen(metadata)) return copyText(JSON.stringify(metadata));
  let text = SHARED_TEXTS.get(metadata);
  if (text === undefined) SHARED_TEXTS.set(metadata, (text = copyText(JSON.stringify(metadata))));
  return text;
}

const COPY_SPECIAL = /[\\\n\r\t]/;
const COPY_ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/** Text as COPY's text format reads it: backslash, newline, carriage return and tab escaped. */
function copyText(text: string): string {
  return COPY_SPECIAL.test(text) ? text.replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c]!) : text;
}

/**
 * The entries' lines into build_log_lines by COPY, on the transaction's connection, in pieces of
 * at most 1 MiB (COPY streams them; one string of every line would be held at once).
 */
export async function copyLines(manager: EntityManager, entries: readonly CopiedEntry[]) {
  const client = (manager.queryRunner as unknown as { databaseConnection: pg.PoolClient })
    .databaseConnection;
  const copy = client.query(
    copyStreams.from(
      'COPY build_log_lines (build_id, seq, ts, level, message, metadata) FROM STDIN',
    ),
  );
  await pipeline(Readable.from(copyChunks(entries)), copy);
}

/** COPY data is sent in buffers of about this size. */
const CHUNK_BYTES = 1024 * 1024;
/** Rows are joined into strings of about this many UTF-16 units before each is encoded. */
const RUN_UNITS = 16 * 1024;

/**
 * The rows as UTF-8, written straight into buffers of about CHUNK_BYTES (one string of many
 * rows would be a rope that costs more to flatten and encode than the rows cost to make), a run
 * of rows of about RUN_UNITS at a time (one encoding call per row cost more than the row). Lines
 * of one write share their timestamp: its text is made once.
 */
function* copyChunks(entries: readonly CopiedEntry[]): Generator<Buffer> {
  let chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let used = 0;
  let run = '';
  let lastMs = NaN;
  let iso = '';
  // A run takes at most 3 bytes per UTF-16 unit.
  function* flush(): Generator<Buffer> {
    if (used + run.length * 3 > chunk.length) {
      if (used > 0) yield chunk.subarray(0, used);
      chunk = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, run.length * 3));
      used = 0;
    }
    used += chunk.write(run, used, 'utf8');
    run = '';
  }
  for (const entry of entries) {
    const { buildId, knownLogLines, lines } = entry;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      const ms = line.ts.getTime();
      if (ms !== lastMs) {
        lastMs = ms;
        iso = line.ts.toISOString();
      }
      run += copyRow(buildId, knownLogLines + i, line, iso);
      if (run.length >= RUN_UNITS) yield* flush();
    }
  }
  if (run !== '') yield* flush();
  if (used > 0) yield chunk.subarray(0, used);
}
