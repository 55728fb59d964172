import { isDatabaseUnavailable } from '../common/database-errors.js';
import {
  type AppendOptions,
  type AppendResult,
  type BuildLogsRepository,
  messageBytes,
  type NewLogLine,
  UncertainCommitError,
} from './build-logs.repository.js';

/**
 * How many groups are written at once, each on a pooled connection of its own: a group waits on
 * three round trips (the counters, COPY, COMMIT), so a few overlap to keep Postgres busy.
 */
const MAX_IN_FLIGHT = 4;
/** A group holds at most this many lines or message bytes; the rest wait for the next. */
const MAX_GROUP_LINES = 20_000;
const MAX_GROUP_BYTES = 8 * 1024 * 1024;

interface Waiting {
  readonly buildId: string;
  readonly lines: readonly NewLogLine[];
  readonly knownLogLines: number;
  readonly capBytes: number;
  readonly bytes: number;
  /** The append on its own, as the repository decides it (a group did not take it). */
  readonly alone: () => Promise<AppendResult | undefined>;
  readonly resolve: (result: AppendResult | undefined) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Group commit for log appends (docs/adr/0056-log-ingest-groups.md): appends of many builds that
 * arrive while the database is busy with earlier ones go in one transaction
 * (BuildLogsRepository.appendToMany: the counters, one COPY, COMMIT), so the statements and
 * commits per second stay few however many builds print at once. An append that finds the database idle goes at once, in a group of
 * its own (after the current tick, which others may join): grouping adds no wait when there is
 * nothing to wait for.
 *
 * An entry the group does not take (another writer made its count stale, the cap, the
 * build gone), and every entry of a group the database refused (a deadlock, say), is appended on
 * its own with BuildLogsRepository.append, which decides it as before. When the connection fails
 * while a group commits, each of its entries fails as its own append would have: with an
 * UncertainCommitError saying how many lines its build has if the group was stored.
 *
 * Callers keep one append per build in flight (LogSink writes a build's batches one after
 * another): a build is never in two groups at once.
 */
export class AppendGroups {
  private waiting: Waiting[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Groups sent, and the appends they carried: for tests and the bench. */
  readonly sent = { groups: 0, appends: 0 };

  constructor(private readonly logs: BuildLogsRepository) {}

  /** As BuildLogsRepository.append, grouped with other builds' appends when it can be. */
  append(
    buildId: string,
    lines: readonly NewLogLine[],
    capBytes: number,
    marker: (capBytes: number) => NewLogLine,
    options: AppendOptions = {},
    /** The lines' message bytes, when the caller counted them already. */
    knownBytes?: number,
  ): Promise<AppendResult | undefined> {
    const { knownLogLines } = options;
    if (knownLogLines === undefined || options.storedIfLogLines !== undefined || lines.length === 0)
      return this.logs.append(buildId, lines, capBytes, marker, options);
    const bytes = knownBytes ?? messageBytes(lines);
    if (bytes > capBytes || lines.length > MAX_GROUP_LINES || bytes > MAX_GROUP_BYTES)
      return this.logs.append(buildId, lines, capBytes, marker, options);
    return new Promise<AppendResult | undefined>((resolve, reject) => {
      this.waiting.push({
        buildId,
        lines,
        knownLogLines,
        capBytes,
        bytes,
        // The count the group found stale is not offered again.
        alone: () => this.logs.append(buildId, lines, capBytes, marker, {}),
        resolve,
        reject,
      });
      this.schedule();
    });
  }

  /** Sends the next group after this tick, unless MAX_IN_FLIGHT are out: then after one ends. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= MAX_IN_FLIGHT || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.inFlight >= MAX_IN_FLIGHT) return;
      const group = this.take();
      if (group.length === 0) return;
      this.inFlight++;
      void this.send(group).finally(() => {
        this.inFlight--;
        this.schedule();
      });
      this.schedule();
    });
  }

  /** The waiting appends that fit one group, one per build, in arrival order. */
  private take(): Waiting[] {
    const group: Waiting[] = [];
    const rest: Waiting[] = [];
    const builds = new Set<string>();
    let lines = 0;
    let bytes = 0;
    for (const entry of this.waiting) {
      const fits =
        group.length === 0 ||
        (lines + entry.lines.length <= MAX_GROUP_LINES && bytes + entry.bytes <= MAX_GROUP_BYTES);
      if (!fits || builds.has(entry.buildId)) {
        rest.push(entry);
        continue;
      }
      group.push(entry);
      builds.add(entry.buildId);
      lines += entry.lines.length;
      bytes += entry.bytes;
    }
    this.waiting = rest;
    return group;
  }

  private async send(group: readonly Waiting[]): Promise<void> {
    this.sent.groups++;
    this.sent.appends += group.length;
    let results: Array<AppendResult | 'not-taken'>;
    try {
      results = await this.logs.appendToMany(group);
    } catch (error) {
      if (isDatabaseUnavailable(error)) {
        // The connection went during the group: its COMMIT may have gone through.
        for (const entry of group) {
          entry.reject(
            new UncertainCommitError(
              entry.knownLogLines + entry.lines.length,
              error,
              entry.lines.at(-1),
            ),
          );
        }
        return;
      }
      // Refused as a whole (nothing stored): each on its own decides.
      results = group.map(() => 'not-taken');
    }
    await Promise.all(
      group.map(async (entry, at) => {
        const result = results[at]!;
        if (result !== 'not-taken') return entry.resolve(result);
        try {
          entry.resolve(await entry.alone());
        } catch (error) {
          entry.reject(error);
        }
      }),
    );
  }
}
