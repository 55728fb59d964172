import { createHash } from 'node:crypto';
import type { BuildLogsRepository } from './build-logs.repository.js';
import { type LogEntryDto, toLogEntry } from './log-entry.js';

/** Lines read per query while digesting: a long log is never held in memory whole. */
const BATCH = 5_000;

/** A build's stored log as its provenance names it (docs/provenance.md, "The log digest"). */
export interface LogDigest {
  /** Lowercase hex SHA-256. */
  readonly sha256: string;
  /** The lines it covers: 0 … lines - 1, in seq order. */
  readonly lines: number;
}

/**
 * One line as the digest reads it: the LogEntry exactly as GET /builds/{id}/logs serves it, as
 * the JSON array `[timestamp, level, message, metadata]` (metadata keys sorted, or null) and a
 * newline. Anyone holding the pages can recompute it; no field of a line can change unseen.
 */
export function logDigestLine(entry: LogEntryDto): string {
  const metadata =
    entry.metadata === null
      ? null
      : Object.fromEntries(
          Object.keys(entry.metadata)
            .sort()
            .map((key) => [key, entry.metadata![key]]),
        );
  return `${JSON.stringify([entry.timestamp, entry.level, entry.message, metadata])}\n`;
}

/**
 * The digest of every line the build has stored now. Call it once the build's producers are
 * done (LogSink.settle): a line stored later is after the lines the digest covers.
 */
export async function digestOfLog(logs: BuildLogsRepository, buildId: string): Promise<LogDigest> {
  const hash = createHash('sha256');
  let lines = 0;
  for (;;) {
    const batch = await logs.linesFrom(buildId, lines, BATCH);
    for (const line of batch) hash.update(logDigestLine(toLogEntry(line)), 'utf8');
    lines += batch.length;
    if (batch.length < BATCH) break;
  }
  return { sha256: hash.digest('hex'), lines };
}
