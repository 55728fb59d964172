import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { isDatabaseUnavailable } from '../common/database-errors.js';
import { LOG_CHANNEL } from '../database/channels.js';
import type { LogEntryLevel, StoredLogLine } from './log-entry.js';
import { copyLines } from './log-copy.js';

export interface NewLogLine {
  readonly ts: Date;
  readonly level: LogEntryLevel;
  readonly message: string;
  readonly metadata: Record<string, string> | null;
}

export interface AppendOptions {
  /**
   * A retry after an UncertainCommitError: store nothing when the build has this many lines and
   * (when given) `storedIfLastLine` is its last one.
   */
  readonly storedIfLogLines?: number;
  readonly storedIfLastLine?: NewLogLine;
  /**
   * How many lines the build had after this process's last append to it, when it knows: the
   * append then usually takes one statement. Wrong or stale costs one statement, never a line.
   */
  readonly knownLogLines?: number;
}

/** One build's lines for {@link BuildLogsRepository.appendToMany}. */
export interface ManyAppendEntry {
  readonly buildId: string;
  /** At least one line. */
  readonly lines: readonly NewLogLine[];
  /** How many lines the build had after this process's last append to it. */
  readonly knownLogLines: number;
  /** The build's log cap: the whole batch fits under it, or the entry is not taken. */
  readonly capBytes: number;
  /** The lines' message bytes, when the caller counted them already. */
  readonly bytes?: number;
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
    /** The last line the append would have stored: a retry checks it is there. */
    readonly lastLine?: NewLogLine,
  ) {
    super('the connection failed while log lines were being committed', { cause });
    this.name = 'UncertainCommitError';
  }
}

/** The UTF-8 bytes of the lines' messages: what a build's log cap counts. */
export function messageBytes(lines: readonly NewLogLine[]): number {
  let bytes = 0;
  for (const line of lines) bytes += Buffer.byteLength(line.message, 'utf8');
  return bytes;
}

function isForeignKeyViolation(error: unknown): boolean {
  return (error as { driverError?: { code?: unknown } }).driverError?.code === '23503';
}

/** The lines as the four arrays the appends `unnest`: times, levels, messages, metadata. */
function unnestColumns(
  lines: readonly NewLogLine[],
): [string[], string[], string[], Array<string | null>] {
  return [
    lines.map((l) => l.ts.toISOString()),
    lines.map((l) => l.level),
    lines.map((l) => l.message),
    lines.map((l) => (l.metadata === null ? null : JSON.stringify(l.metadata))),
  ];
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { driverError?: { code?: unknown } }).driverError?.code === '23505';
}

/** What LogHub's safety poll looks at for a watched build. */
export interface WatchedBuildState {
  readonly buildId: string;
  readonly status: string;
  /** Lines stored. */
  readonly lines: number;
}

/** One purge batch: lines of a deleted build removed in one transaction. */
export interface PurgeBatch {
  readonly buildId: string;
  readonly deleted: number;
  /** No line of the build is left (its purge record went in the same transaction). */
  readonly done: boolean;
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
   * Appends lines with the next dense seqs in one transaction that holds the build's counter row
   * (`build_logs`, the log store's own table: `builds` is lifecycle's), so
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
    options: AppendOptions = {},
  ): Promise<AppendResult | undefined> {
    if (options.storedIfLogLines === undefined && lines.length > 0) {
      const appended = await this.appendInOneStatement(
        buildId,
        lines,
        capBytes,
        options.knownLogLines,
      );
      if (appended !== 'not-taken') return appended;
    }
    let logLinesIfCommitted: number | undefined;
    let lastLine: NewLogLine | undefined;
    try {
      return await this.dataSource.transaction(async (manager) => {
        const row = await this.lockCounters(manager, buildId);
        if (row === undefined) return undefined; // the build does not exist
        if (
          row.lines === options.storedIfLogLines &&
          (await this.endsWith(manager, buildId, row.lines, options.storedIfLastLine))
        ) {
          return { stored: 0, dropped: 0, lastSeq: row.lines - 1, truncated: row.truncated };
        }
        let bytes = Number(row.bytes);
        const accepted: NewLogLine[] = [];
        let truncated = row.truncated;
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
        const first = row.lines;
        if (accepted.length > 0) {
          await manager.query(
            `INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
             SELECT $1, $2::int + (t.ord - 1)::int, t.ts, t.level, t.message, t.metadata
               FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::jsonb[]) WITH ORDINALITY
                    AS t(ts, level, message, metadata, ord)`,
            [buildId, first, ...unnestColumns(accepted)],
          );
        }
        if (accepted.length > 0 || dropped > 0) {
          await manager.query(
            `UPDATE build_logs SET lines = lines + $2, bytes = bytes + $3, truncated = $4,
                    dropped_lines = dropped_lines + $5 WHERE build_id = $1`,
            [buildId, accepted.length, addedBytes, truncated, dropped],
          );
        }
        const lastSeq = first + accepted.length - 1;
        if (accepted.length > 0) {
          await manager.query('SELECT pg_notify($1, $2)', [LOG_CHANNEL, `${buildId}:${lastSeq}`]);
        }
        // Only COMMIT is left: a failure from here on may have stored the lines.
        logLinesIfCommitted = first + accepted.length;
        lastLine = accepted.at(-1);
        return { stored: accepted.length, dropped, lastSeq, truncated };
      });
    } catch (error) {
      if (isForeignKeyViolation(error)) return undefined; // the build does not exist
      if (logLinesIfCommitted === undefined || !isDatabaseUnavailable(error)) throw error;
      throw new UncertainCommitError(logLinesIfCommitted, error, lastLine);
    }
  }

  /**
   * Whether the build's line `lines - 1` is `line` (its time, level and text): a retry's check
   * that the lines a build has are the uncertain attempt's, not as many stored by another
   * writer. True without a line to compare.
   */
  private async endsWith(
    manager: EntityManager,
    buildId: string,
    lines: number,
    line: NewLogLine | undefined,
  ): Promise<boolean> {
    if (line === undefined) return true;
    const [stored] = await manager.query<Array<{ same: boolean }>>(
      `SELECT ts = $3::timestamptz AND level = $4 AND message = $5 AS same
         FROM build_log_lines WHERE build_id = $1 AND seq = $2`,
      [buildId, lines - 1, line.ts.toISOString(), line.level, line.message],
    );
    return stored?.same === true;
  }

  /**
   * The common append in one statement (one round trip, no transaction to open): the build's
   * first lines (no counter row yet), or lines after exactly `knownLogLines` stored ones, when
   * the whole batch fits under the cap. The counter row is inserted, or updated only while it
   * still says `knownLogLines` lines (a concurrent writer moved it: not taken), the lines are
   * inserted after it and NOTIFY sent, all in the statement. Inserting the counter and the lines
   * in one statement checks the build's key once, so it cannot deadlock with the build's delete
   * as an insert followed by an update of the same row would (see lockCounters). `not-taken`
   * when any condition fails: the transaction form decides then (the marker, the cap).
   */
  private async appendInOneStatement(
    buildId: string,
    lines: readonly NewLogLine[],
    capBytes: number,
    knownLogLines: number | undefined,
  ): Promise<AppendResult | undefined | 'not-taken'> {
    const bytes = messageBytes(lines);
    const first = knownLogLines ?? 0;
    if (bytes > capBytes) return 'not-taken';
    const lastSeq = first + lines.length - 1;
    const counter =
      knownLogLines === undefined
        ? `INSERT INTO build_logs (build_id, lines, bytes)
             SELECT $1::uuid, $2::int, $3::bigint WHERE $3::bigint <= $5::bigint
             ON CONFLICT (build_id) DO NOTHING RETURNING build_id`
        : `UPDATE build_logs SET lines = lines + $2::int, bytes = bytes + $3::bigint
            WHERE build_id = $1::uuid AND lines = $4::int AND NOT truncated
              AND bytes + $3::bigint <= $5::bigint
           RETURNING build_id`;
    try {
      const rows = await this.dataSource.query<unknown[]>(
        `WITH counter AS (${counter}),
              stored AS (
                INSERT INTO build_log_lines (build_id, seq, ts, level, message, metadata)
                SELECT counter.build_id, $4::int + (t.ord - 1)::int, t.ts, t.level, t.message, t.metadata
                  FROM counter,
                       unnest($6::timestamptz[], $7::text[], $8::text[], $9::jsonb[]) WITH ORDINALITY
                         AS t(ts, level, message, metadata, ord))
         SELECT pg_notify($10::text, $11::text) FROM counter`,
        [
          buildId,
          lines.length,
          bytes,
          first,
          capBytes,
          ...unnestColumns(lines),
          LOG_CHANNEL,
          `${buildId}:${lastSeq}`,
        ],
      );
      if (rows.length === 0) return 'not-taken';
      return { stored: lines.length, dropped: 0, lastSeq, truncated: false };
    } catch (error) {
      if (isForeignKeyViolation(error)) return undefined; // the build does not exist
      // Lines without a counter row are a deleted build's, waiting for the purge: the lines'
      // key is checked before the build's (which runs at the statement's end). Nothing was
      // stored; the transaction form finds the build gone.
      if (isUniqueViolation(error)) return 'not-taken';
      // The statement commits by itself: it may have, as a COMMIT that failed may have.
      if (isDatabaseUnavailable(error))
        throw new UncertainCommitError(first + lines.length, error, lines.at(-1));
      throw error;
    }
  }

  /**
   * Appends the lines of many builds in one transaction (docs/adr/0056-log-ingest-groups.md):
   * each entry's lines go after exactly `knownLogLines` stored ones, when its whole batch fits
   * under its cap, as appendInOneStatement does for one build. One statement moves the counters
   * of the entries whose count is still right (locking their rows) and NOTIFYs each (sent at
   * COMMIT), then one COPY stores their lines (Postgres reads COPY rows about twice as fast as
   * INSERT … unnest of parameter arrays). Answers, per entry in order, its result or `not-taken` (a
   * stale count, the cap, a build gone): `append` decides those one by one. Entries must name
   * distinct builds.
   *
   * Only counter rows are updated and no foreign key is checked (build_log_lines has none), so a
   * build deleted meanwhile is not-taken, never an error that fails the others. An error rolls
   * the whole transaction back; a connection that fails leaves each entry uncertain, as a failed
   * COMMIT does (AppendGroups makes the UncertainCommitError of each).
   */
  async appendToMany(
    entries: readonly ManyAppendEntry[],
  ): Promise<Array<AppendResult | 'not-taken'>> {
    if (entries.length === 0) return [];
    const builds = new Set<string>();
    for (const entry of entries) {
      if (builds.has(entry.buildId))
        throw new Error(`build ${entry.buildId} is twice in one group`);
      builds.add(entry.buildId);
    }
    const bytes = entries.map((entry) => entry.bytes ?? messageBytes(entry.lines));
    return this.dataSource.transaction(async (manager) => {
      // NOTIFY here, before the lines: notifications go out at COMMIT, and none if it fails.
      // A CTE: TypeORM answers a bare UPDATE … RETURNING as [rows, count].
      const moved = await manager.query<Array<{ at: number }>>(
        `WITH moved AS (
           UPDATE build_logs b SET lines = b.lines + i.n, bytes = b.bytes + i.bytes
             FROM unnest($1::int[], $2::uuid[], $3::int[], $4::bigint[], $5::int[], $6::bigint[])
                    AS i(at, build_id, n, bytes, known, cap)
            WHERE b.build_id = i.build_id AND b.lines = i.known AND NOT b.truncated
              AND b.bytes + i.bytes <= i.cap
          RETURNING i.at, b.build_id, i.known, i.n)
         SELECT at, pg_notify($7::text, build_id::text || ':' || (known + n - 1)::text)
           FROM moved`,
        [
          entries.map((_, at) => at),
          entries.map((e) => e.buildId),
          entries.map((e) => e.lines.length),
          bytes,
          entries.map((e) => e.knownLogLines),
          entries.map((e) => e.capBytes),
          LOG_CHANNEL,
        ],
      );
      const taken = new Set(moved.map((row) => Number(row.at)));
      if (taken.size === 0) return entries.map(() => 'not-taken' as const);
      await copyLines(
        manager,
        entries.filter((_, at) => taken.has(at)),
      );
      return entries.map((entry, at) =>
        taken.has(at)
          ? {
              stored: entry.lines.length,
              dropped: 0,
              lastSeq: entry.knownLogLines + entry.lines.length - 1,
              truncated: false,
            }
          : ('not-taken' as const),
      );
    });
  }

  /**
   * Locks the build's counter row, created on its first append, and answers it. A lock, not a
   * no-op upsert: the counter UPDATE that follows would then change a row version this transaction
   * made, which makes Postgres check its key against `builds` again (KEY SHARE on the build row)
   * and deadlock with a delete of the build that waits for this row (docs/adr/0027-log-purge.md).
   * Undefined, or a foreign-key violation, when the build does not exist.
   */
  private async lockCounters(
    manager: EntityManager,
    buildId: string,
  ): Promise<{ lines: number; bytes: string; truncated: boolean } | undefined> {
    const lock = () =>
      manager.query<Array<{ lines: number; bytes: string; truncated: boolean }>>(
        'SELECT lines, bytes, truncated FROM build_logs WHERE build_id = $1 FOR NO KEY UPDATE',
        [buildId],
      );
    const [row] = await lock();
    if (row !== undefined) return row;
    await manager.query(
      'INSERT INTO build_logs (build_id) VALUES ($1) ON CONFLICT (build_id) DO NOTHING',
      [buildId],
    );
    // Ours, or a concurrent first append's (committed by now); none when the build was deleted
    // since.
    const [created] = await lock();
    return created;
  }

  /** The URL of the database the log store writes to: its password is one of kiln's secrets. */
  connectionUrl(): string | undefined {
    const { url } = this.dataSource.options as { url?: string };
    return url;
  }

  /**
   * Lines with seq in [fromSeq, fromSeq + limit), in order, and how many the build has stored,
   * read in one statement (one snapshot: the total never trails the page).
   */
  async page(
    buildId: string,
    fromSeq: number,
    limit: number,
  ): Promise<{ lines: StoredLogLine[]; total: number }> {
    // Without a line at fromSeq the one row has only the total (the line's columns are null).
    const rows = await this.dataSource.query<Array<RawLine & { total: number }>>(
      `SELECT s.total, l.seq, l.ts, l.level, l.message, l.metadata
         FROM (SELECT COALESCE((SELECT lines FROM build_logs WHERE build_id = $1), 0) AS total) s
         LEFT JOIN LATERAL (
           SELECT seq, ts, level, message, metadata FROM build_log_lines
            WHERE build_id = $1 AND seq >= $2 ORDER BY seq LIMIT $3) l ON true
        ORDER BY l.seq`,
      [buildId, fromSeq, limit],
    );
    const lines = rows
      .filter((row) => row.seq !== null)
      .map(({ seq, ts, level, message, metadata }) => ({ seq, ts, level, message, metadata }));
    return { lines, total: rows[0]?.total ?? 0 };
  }

  /**
   * Where each container's log resumes: the timestamp of its last stored line and how many of its
   * lines carry exactly that timestamp (pieces of a split line count once: only the last piece
   * has no `continued`). A container with no line stored has no entry. Scans the build's lines:
   * once per follower, for restarts.
   */
  async containerCursors(
    buildId: string,
    containers: readonly string[],
  ): Promise<Map<string, { tsMs: number; seen: number }>> {
    const rows = await this.dataSource.query<Array<{ container: string; ts: Date; seen: number }>>(
      `WITH mine AS (
         SELECT metadata->>'container' AS container, ts FROM build_log_lines
          WHERE build_id = $1 AND metadata->>'container' = ANY($2::text[])
            AND metadata->>'continued' IS NULL),
       last AS (SELECT container, max(ts) AS ts FROM mine GROUP BY container)
       SELECT container, ts, count(*)::int AS seen FROM mine JOIN last USING (container, ts)
        GROUP BY container, ts`,
      [buildId, containers],
    );
    return new Map(rows.map((r) => [r.container, { tsMs: r.ts.getTime(), seen: r.seen }]));
  }

  /**
   * Claims the following of a build's pod logs for `holder` until `ttlMs` from now: true when it
   * had no follower, had this one, or its follower's claim ran out (a process that died). The
   * database's clock decides, so the operators' clocks need not agree.
   */
  async claimFollower(buildId: string, holder: string, ttlMs: number): Promise<boolean> {
    const rows = await this.dataSource.query<unknown[]>(
      `INSERT INTO build_logs (build_id, follower, follower_until)
       VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
       ON CONFLICT (build_id) DO UPDATE
          SET follower = EXCLUDED.follower, follower_until = EXCLUDED.follower_until
        WHERE build_logs.follower IS NULL OR build_logs.follower = EXCLUDED.follower
           OR build_logs.follower_until < clock_timestamp()
       RETURNING build_id`,
      [buildId, holder, ttlMs],
    );
    return rows.length === 1;
  }

  /** Lets go of a claim `holder` has (nothing when another holds it). */
  async releaseFollower(buildId: string, holder: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE build_logs SET follower = NULL, follower_until = NULL
        WHERE build_id = $1 AND follower = $2`,
      [buildId, holder],
    );
  }

  /** How many lines the build has stored (0 before its first). */
  async lineCount(buildId: string): Promise<number> {
    const [row] = await this.dataSource.query<Array<{ lines: number }>>(
      'SELECT lines FROM build_logs WHERE build_id = $1',
      [buildId],
    );
    return row?.lines ?? 0;
  }

  /** Status and line count of each of these builds that exists, in one query. */
  async watchedStates(buildIds: readonly string[]): Promise<WatchedBuildState[]> {
    return this.dataSource.query<WatchedBuildState[]>(
      `SELECT b.id AS "buildId", b.status, coalesce(l.lines, 0)::int AS lines
         FROM builds b LEFT JOIN build_logs l ON l.build_id = b.id
        WHERE b.id = ANY($1::uuid[])`,
      [buildIds],
    );
  }

  /**
   * The commit the build checked out, as its checkout printed it before any build step ran
   * (`kiln: checked out <sha>`: the operator's source container, the local runner's checkout).
   * Only those containers' lines count, so a build cannot claim another commit by printing one.
   */
  async checkedOutCommit(buildId: string): Promise<string | undefined> {
    const [row] = await this.dataSource.query<Array<{ commit: string }>>(
      `SELECT substring(message FROM '^kiln: checked out ([0-9a-f]{40,64})$') AS commit
         FROM build_log_lines
        WHERE build_id = $1 AND metadata->>'container' IN ('source', 'checkout')
          AND message ~ '^kiln: checked out [0-9a-f]{40,64}$'
        ORDER BY seq LIMIT 1`,
      [buildId],
    );
    return row?.commit;
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

  /**
   * Deletes up to `batch` lines of the deleted build that has waited longest for its purge, in one
   * transaction, and records how far it got (or, once none is left, that it is done). Builds
   * another process is purging are skipped. Undefined when no deleted build has lines to purge.
   * Deletes by seq range from `next_seq`, so no batch walks index entries an earlier one deleted.
   */
  async purgeBatch(batch: number): Promise<PurgeBatch | undefined> {
    return this.dataSource.transaction(async (manager) => {
      const [purge] = await manager.query<Array<{ buildId: string; next: string }>>(
        `SELECT build_id AS "buildId", next_seq AS next FROM build_log_purges
          ORDER BY deleted_at, build_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
      );
      if (purge === undefined) return undefined;
      const { buildId } = purge;
      const end = Number(purge.next) + batch;
      const [, deleted] = await manager.query<[unknown[], number]>(
        'DELETE FROM build_log_lines WHERE build_id = $1 AND seq >= $2 AND seq < $3',
        [buildId, purge.next, end],
      );
      const [{ next }] = await manager.query<[{ next: number | null }]>(
        'SELECT min(seq) AS next FROM build_log_lines WHERE build_id = $1 AND seq >= $2',
        [buildId, end],
      );
      if (next === null) {
        await manager.query('DELETE FROM build_log_purges WHERE build_id = $1', [buildId]);
      } else {
        await manager.query('UPDATE build_log_purges SET next_seq = $2 WHERE build_id = $1', [
          buildId,
          next,
        ]);
      }
      return { buildId, deleted, done: next === null };
    });
  }
}
