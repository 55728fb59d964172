import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { isDatabaseUnavailable } from '../common/database-errors.js';
import { LOG_CHANNEL, type LogEntryLevel, type StoredLogLine } from './log-entry.js';

export interface NewLogLine {
  readonly ts: Date;
  readonly level: LogEntryLevel;
  readonly message: string;
  readonly metadata: Record<string, string> | null;
}

export interface AppendResult {
  /** Lines stored by this call (the truncation marker included). */
  readonly stored: number;
  /** Lines refused because the build's log reached its cap. */
  readonly dropped: number;
  /** The highest seq stored for the build afterwards; -1 when it has no lines. */
  readonly lastSeq: number;
  readonly truncated: boolean;
}

/**
 * The connection failed while an append was committing: the lines may or may not be stored. The
 * build has `logLinesIfCommitted` lines if they were. Wraps the driver's error as `cause`.
 */
export class UncertainCommitError extends Error {
  constructor(
    readonly logLinesIfCommitted: number,
    cause: unknown,
  ) {
    super('the connection failed while log lines were being committed', { cause });
    this.name = 'UncertainCommitError';
  }
}

interface RawLine {
  seq: number;
  ts: Date;
  level: LogEntryLevel;
  message: string;
  metadata: Record<string, string> | null;
}

@Injectable()
export class BuildLogsRepository {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Appends lines with the next dense seqs in one transaction that holds the build row, so
   * concurrent appends to one build never interleave or leave gaps. Past `capBytes` the remaining
   * lines are dropped and one marker line says so. NOTIFY carries the new highest seq at commit.
   * Undefined when the build does not exist.
   *
   * When the connection fails during COMMIT, nobody knows whether the lines were stored: that
   * throws an {@link UncertainCommitError}. Retrying with `storedIfLogLines` set to its
   * `logLinesIfCommitted` stores nothing when the build already has that many lines (the first
   * attempt did commit), so the retry neither loses nor duplicates lines of a single writer.
   */
  async append(
    buildId: string,
    lines: readonly NewLogLine[],
    capBytes: number,
    marker: (capBytes: number) => NewLogLine,
    options: { readonly storedIfLogLines?: number } = {},
  ): Promise<AppendResult | undefined> {
    let logLinesIfCommitted: number | undefined;
    try {
      return await this.dataSource.transaction(async (manager) => {
        const rows = await manager.query<
          Array<{ log_lines: number; log_bytes: string; log_truncated: boolean }>
        >('SELECT log_lines, log_bytes, log_truncated FROM builds WHERE id = $1 FOR UPDATE', [
          buildId,
        ]);
        const row = rows[0];
        if (row === undefined) return undefined;
        if (row.log_lines === options.storedIfLogLines) {
          return {
            stored: 0,
            dropped: 0,
            lastSeq: row.log_lines - 1,
            truncated: row.log_truncated,
          };
        }
        let bytes = Number(row.log_bytes);
        const accepted: NewLogLine[] = [];
        let truncated = row.log_truncated;
        let addedBytes = 0;
        let kept = 0;
        for (const line of lines) {
          if (truncated) break;
          const size = Buffer.byteLength(line.message, 'utf8');
          if (bytes + size > capBytes) {
            accepted.push(marker(capBytes));
            truncated = true;
            break;
          }
          bytes += size;
          addedBytes += size;
          kept++;
          accepted.push(line);
        }
        const dropped = lines.length - kept;
        const first = row.log_lines;
        if (accepted.length > 0) {
          await manager.query(
            `INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
             SELECT $1, $2::int + (t.ord - 1)::int, t.ts, t.level, t.message, t.metadata
               FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::jsonb[]) WITH ORDINALITY
                    AS t(ts, level, message, metadata, ord)`,
            [
              buildId,
              first,
              accepted.map((l) => l.ts.toISOString()),
              accepted.map((l) => l.level),
              accepted.map((l) => l.message),
              accepted.map((l) => (l.metadata === null ? null : JSON.stringify(l.metadata))),
            ],
          );
        }
        if (accepted.length > 0 || dropped > 0) {
          await manager.query(
            `UPDATE builds SET log_lines = log_lines + $2, log_bytes = log_bytes + $3,
                    log_truncated = $4, log_dropped_lines = log_dropped_lines + $5 WHERE id = $1`,
            [buildId, accepted.length, addedBytes, truncated, dropped],
          );
        }
        const lastSeq = first + accepted.length - 1;
        if (accepted.length > 0) {
          await manager.query('SELECT pg_notify($1, $2)', [LOG_CHANNEL, `${buildId}:${lastSeq}`]);
        }
        // Only COMMIT is left: a failure from here on may have stored the lines.
        logLinesIfCommitted = first + accepted.length;
        return { stored: accepted.length, dropped, lastSeq, truncated };
      });
    } catch (error) {
      if (logLinesIfCommitted === undefined || !isDatabaseUnavailable(error)) throw error;
      throw new UncertainCommitError(logLinesIfCommitted, error);
    }
  }

  /** The URL of the database the log store writes to: its password is one of kiln's secrets. */
  connectionUrl(): string | undefined {
    const { url } = this.dataSource.options as { url?: string };
    return url;
  }

  /** Lines with seq in [fromSeq, fromSeq + limit), in order. */
  async linesFrom(buildId: string, fromSeq: number, limit: number): Promise<StoredLogLine[]> {
    const rows = await this.dataSource.query<RawLine[]>(
      `SELECT seq, ts, level, message, metadata FROM build_log_lines
        WHERE build_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3`,
      [buildId, fromSeq, limit],
    );
    return rows;
  }
}
