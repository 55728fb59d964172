import { Inject, Injectable, type OnModuleDestroy, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../common/database-errors.js';
import { NotFoundError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { Metrics } from '../metrics/metrics.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { heldLine, splitUtf8 } from './held-line.js';
import { type BuilderFormat } from '../manifest/formats.js';
import {
  type AppendResult,
  BuildLogsRepository,
  type NewLogLine,
  UncertainCommitError,
} from './build-logs.repository.js';
import { AppendGroups } from './append-groups.js';
import { MAX_LINE_BYTES } from './line-splitter.js';
import {
  Backlog,
  type Held,
  type HeldLine,
  type LogBufferLimits,
  type Step,
  toNewLogLine,
} from './log-backlog.js';
import { type Registration, SecretMasker } from './secret-masker.js';
import { withoutCredentials } from '../common/url-credentials.js';

/** Secrets longer than this are refused: the held-back tail of a cut line must cover any form. */
const MAX_SECRET_CHARS = 1024;
/** Characters held back from a cut line: more than the longest masked form (base64 of 1 KiB). */
const CARRY_CHARS = 4096;

/** One line as a runner or the pod-log follower hands it over. */
export interface LogLineInput {
  readonly text: string;
  /** When the builder printed it; defaults to the time of append. */
  readonly ts?: Date;
  /** The container (or local process step) that printed it: metadata.container. */
  readonly container?: string;
  /** The builder whose output this is, to read levels and steps the right way. */
  readonly format?: BuilderFormat;
  /** The line was cut at the splitter's byte cap and goes on in the next line. */
  readonly continued?: boolean;
}

/** What `append` did with a batch: stored it, or held it until the database is back. */
export type SinkAppendResult =
  | (AppendResult & { readonly buffered: false })
  | {
      readonly buffered: true;
      /** Lines this build has waiting in memory for the database, this batch included. */
      readonly pending: number;
    };

export type { LogBufferLimits } from './log-backlog.js';

/** Optional provider overriding {@link DEFAULT_LOG_BUFFER_LIMITS} (tests use tiny ones). */
export const LOG_BUFFER_LIMITS = Symbol('LOG_BUFFER_LIMITS');

/**
 * 50,000 lines or 16 MiB per build: minutes of a busy build's output, enough to ride out a
 * PostgreSQL restart or failover, at a memory cost bounded per running build.
 */
export const DEFAULT_LOG_BUFFER_LIMITS: LogBufferLimits = {
  maxLines: 50_000,
  maxBytes: 16 * 1024 * 1024,
  releaseTimeoutMs: 120_000,
};

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;
/**
 * The one way log lines enter kiln. In order: registered secrets are masked (before anything is
 * stored or sent); lines longer than 64 KiB are split, marked in metadata; level and step are read
 * from the builder's output and steps are reported as the build's progress; the batch is written
 * with dense seqs and announced with NOTIFY. A build's log is capped (KILN_LOG_MAX_BYTES_PER_BUILD):
 * past it, one marker line says so and further lines are counted as dropped, never lost silently.
 *
 * kiln's own secrets (JWT signing secret, database URL and password, bootstrap admin password) are
 * masked in every build's lines, with the build's registered ones.
 *
 * Writes for one build happen one after another, in call order. When the database cannot be
 * reached, `append` holds the build's lines in memory and resolves (a producer is neither blocked
 * nor failed by an outage); later lines queue behind them, and they are stored in order, with
 * backoff, once the database is back. Past {@link LogBufferLimits} the oldest held lines are
 * dropped and one WARN line stored in their place says how many. `release` waits for held lines.
 */
@Injectable()
export class LogSink implements OnModuleDestroy {
  private readonly maskers = new Map<string, SecretMasker>();
  /** Masks builds that registered no secret of their own: kiln's secrets only. */
  private readonly processMasker = new SecretMasker();
  private readonly processSecrets = new Set<string>();
  private readonly reportedStep = new Map<string, number>();
  /**
   * How many lines each build had after this process's last write to it: the next append then
   * usually takes one statement. Another writer of the same build makes it stale, which costs
   * that append a statement, never a line.
   */
  private readonly knownLines = new Map<string, number>();
  /** The masked tail of a cut line, held back until the rest of the line arrives. */
  private readonly carries = new Map<string, { text: string; line: LogLineInput }>();
  /** The last write queued for each build: the next one starts after it. */
  private readonly writes = new Map<string, Promise<unknown>>();
  /** Builds whose lines wait in memory for the database. */
  private readonly backlogs = new Map<string, Backlog>();
  private readonly limits: LogBufferLimits;
  /** Appends of many builds that wait for the database go in one transaction (group commit). */
  private readonly groups: AppendGroups;

  constructor(
    private readonly logs: BuildLogsRepository,
    private readonly lifecycle: BuildLifecycle,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    @Optional() @Inject(LOG_BUFFER_LIMITS) limits?: Partial<LogBufferLimits>,
    /** Without Metrics (medium tests build the sink by hand) nothing is counted. */
    @Optional() private readonly metrics?: Metrics,
  ) {
    this.limits = { ...DEFAULT_LOG_BUFFER_LIMITS, ...limits };
    this.groups = new AppendGroups(logs);
    this.registerProcessSecrets(kilnSecrets(config, logs.connectionUrl()));
  }

  /**
   * kiln's own secrets, masked in every build's output from now on. Named for the warning logged
   * when one cannot be masked (shorter than 8 characters…). Registering a value again is a no-op.
   */
  registerProcessSecrets(secrets: Readonly<Record<string, string | undefined>>): void {
    for (const [name, secret] of Object.entries(secrets)) {
      if (secret === undefined || this.processSecrets.has(secret)) continue;
      const result = registerIn(this.processMasker, secret);
      if (!result.accepted) {
        this.logger.warn(
          { secret: name, reason: result.reason },
          "kiln's own secret not registered for masking",
        );
        continue;
      }
      this.processSecrets.add(secret);
      for (const masker of this.maskers.values()) masker.register(secret);
    }
  }

  /** Values to mask in this build's output (build-arg secrets, registry credentials…). */
  registerSecrets(buildId: string, secrets: readonly string[]): Registration[] {
    let masker = this.maskers.get(buildId);
    if (masker === undefined) {
      masker = new SecretMasker();
      for (const secret of this.processSecrets) masker.register(secret);
      this.maskers.set(buildId, masker);
    }
    const results = secrets.map((secret) => registerIn(masker, secret));
    for (const result of results) {
      if (!result.accepted)
        this.logger.warn(
          { build_id: buildId, reason: result.reason },
          'secret not registered for masking',
        );
    }
    return results;
  }

  /**
   * This build's masker as a value to hand to whoever learns its secrets (BuildAccess): values
   * given to `register` are masked in its log from then on; `mask` is maskText.
   */
  masking(buildId: string): {
    register(values: readonly string[]): void;
    mask(text: string): string;
  } {
    return {
      register: (values) => {
        if (values.length > 0) this.registerSecrets(buildId, values);
      },
      mask: (text) => this.maskText(buildId, text),
    };
  }

  /**
   * Masks `text` exactly as this build's log lines are masked (its secrets and kiln's own, and
   * the credentials of any URL in it).
   */
  maskText(buildId: string, text: string): string {
    return withoutCredentials(this.maskerFor(buildId).mask(text));
  }

  /**
   * Ends a build's output: stores a held-back tail of a cut line (a producer that stopped
   * mid-line), waits (up to a deadline) for lines held during a database outage to be stored, and
   * forgets the build's secrets.
   */
  async release(buildId: string): Promise<void> {
    const carry = this.carries.get(buildId);
    if (carry !== undefined)
      await this.append(buildId, [{ ...carry.line, text: '', continued: false }]);
    await this.writes.get(buildId);
    const backlog = this.backlogs.get(buildId);
    if (
      backlog !== undefined &&
      !(await settlesWithin(backlog.done, this.limits.releaseTimeoutMs))
    ) {
      this.abandon(backlog);
      if (this.backlogs.get(buildId) === backlog) this.backlogs.delete(buildId);
      this.logger.error(
        { build_id: buildId, lost: backlog.unstored(), waitedMs: this.limits.releaseTimeoutMs },
        'the database stayed unavailable: log lines held for this finished build are lost',
      );
    }
    this.maskers.delete(buildId);
    this.reportedStep.delete(buildId);
    this.knownLines.delete(buildId);
  }

  /**
   * Waits until every line appended for the build so far is stored (or, in a database outage,
   * until the release deadline: then false). Unlike `release`, the build keeps its secrets and
   * may append more: what its provenance digests is what was stored when this resolved.
   */
  async settle(buildId: string): Promise<boolean> {
    await this.writes.get(buildId);
    const backlog = this.backlogs.get(buildId);
    return backlog === undefined || settlesWithin(backlog.done, this.limits.releaseTimeoutMs);
  }

  /** Lines still held in memory are lost with the process: say how many. */
  onModuleDestroy(): void {
    for (const [buildId, backlog] of this.backlogs) {
      this.abandon(backlog);
      this.logger.error(
        { build_id: buildId, lost: backlog.unstored() },
        'shutting down while the database is unavailable: held log lines are lost',
      );
    }
    this.backlogs.clear();
  }

  append(buildId: string, input: readonly LogLineInput[]): Promise<SinkAppendResult> {
    const lines = this.prepare(buildId, input);
    return this.serially(buildId, () => this.write(buildId, lines));
  }

  /** Masks, splits and reads the lines now, in call order (the carry of a cut line depends on it). */
  private prepare(buildId: string, input: readonly LogLineInput[]): HeldLine[] {
    const masker = this.maskerFor(buildId);
    const lines: HeldLine[] = [];
    const now = new Date();
    let carry = this.carries.get(buildId);
    for (const line of input) {
      // A piece cut at the splitter's cap goes on in the next piece: mask it joined with what was
      // held back, and hold back its tail, so a secret across the cut is masked whole.
      // Postgres text cannot hold NUL: it reads as the local runner's LineSplitter writes it.
      const printed = line.text.includes('\u0000')
        ? line.text.replaceAll('\u0000', '\\x00')
        : line.text;
      const joined = carry === undefined ? printed : carry.text + printed;
      const secretless = masker.mask(joined);
      const hidSecret = secretless !== joined;
      const masked = withoutCredentials(secretless);
      let text = masked;
      carry = undefined;
      if (line.continued === true) {
        const cut = Math.max(0, masked.length - CARRY_CHARS);
        carry = { text: masked.slice(cut), line };
        text = masked.slice(0, cut);
        if (text === '') continue;
      }
      const size = Buffer.byteLength(text, 'utf8');
      const ts = line.ts ?? now;
      if (size <= MAX_LINE_BYTES) {
        lines.push(heldLine(line, ts, text, size, line.continued === true, hidSecret));
        continue;
      }
      const pieces = splitUtf8(text, MAX_LINE_BYTES);
      pieces.forEach((piece, index) => {
        const continued = index < pieces.length - 1 || line.continued === true;
        const bytes = Buffer.byteLength(piece, 'utf8');
        lines.push(heldLine(line, ts, piece, bytes, continued, hidSecret));
      });
    }
    if (carry === undefined) this.carries.delete(buildId);
    else this.carries.set(buildId, carry);
    return lines;
  }

  private maskerFor(buildId: string): SecretMasker {
    return this.maskers.get(buildId) ?? this.processMasker;
  }

  /** Runs `task` after the build's previous write has finished, whatever its outcome. */
  private serially<T>(buildId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.writes.get(buildId) ?? Promise.resolve();
    const run = previous.then(task);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.writes.set(buildId, settled);
    void settled.then(() => {
      if (this.writes.get(buildId) === settled) this.writes.delete(buildId);
    });
    return run;
  }

  private async write(buildId: string, lines: HeldLine[]): Promise<SinkAppendResult> {
    const held = this.backlogs.get(buildId);
    if (held !== undefined) return this.hold(buildId, held, lines);
    let result: AppendResult | undefined;
    const known = this.knownLines.get(buildId);
    const timer = this.metrics?.startTimer('kiln_log_append_duration_seconds');
    try {
      let messageBytes = 0;
      for (const line of lines) messageBytes += line.bytes;
      result = await this.groups.append(
        buildId,
        lines.map((l) => l.line),
        this.config.logMaxBytesPerBuild,
        truncationMarker,
        known === undefined ? {} : { knownLogLines: known },
        messageBytes,
      );
    } catch (error) {
      this.knownLines.delete(buildId);
      if (!isDatabaseUnavailable(error)) throw error;
      const backlog = new Backlog(lines, error, this.limits);
      this.backlogs.set(buildId, backlog);
      this.logger.warn(
        { build_id: buildId, err: error },
        'database unavailable: holding log lines in memory until it is back',
      );
      backlog.done = this.drain(buildId, backlog);
      return { buffered: true, pending: backlog.pending };
    }
    if (result === undefined) throw new NotFoundError('Build not found');
    timer?.();
    this.countStored(lines, result);
    this.knownLines.set(buildId, result.lastSeq + 1);
    await this.reportStep(buildId, lines);
    return { buffered: false, ...result };
  }

  private hold(buildId: string, backlog: Backlog, lines: readonly HeldLine[]): SinkAppendResult {
    const dropped = backlog.hold(lines);
    if (dropped > 0) {
      this.metrics?.inc('kiln_log_lines_dropped_total', { cause: 'database_unavailable' }, dropped);
    }
    if (dropped > 0 && !backlog.warnedFull) {
      backlog.warnedFull = true;
      this.logger.warn(
        { build_id: buildId, ...this.limits },
        'log lines held for the database reached their limit: dropping the oldest',
      );
    }
    return { buffered: true, pending: backlog.pending };
  }

  /** Stores a backlog's lines in order, retrying with backoff while the database is unavailable. */
  private async drain(buildId: string, backlog: Backlog): Promise<void> {
    let wait = RETRY_FIRST_MS;
    let stored = 0;
    try {
      for (;;) {
        if (backlog.abandoned) return;
        const batch = backlog.next();
        if (batch === undefined) break;
        let result: AppendResult | undefined;
        const timer = this.metrics?.startTimer('kiln_log_append_duration_seconds');
        try {
          result = await this.logs.append(
            buildId,
            batch.entries.map(toNewLogLine),
            this.config.logMaxBytesPerBuild,
            truncationMarker,
            batch.storedIfLogLines === undefined
              ? {}
              : {
                  storedIfLogLines: batch.storedIfLogLines,
                  ...(batch.storedIfLastLine === undefined
                    ? {}
                    : { storedIfLastLine: batch.storedIfLastLine }),
                },
          );
        } catch (error) {
          if (!isDatabaseUnavailable(error)) throw error;
          if (error instanceof UncertainCommitError) {
            batch.storedIfLogLines = error.logLinesIfCommitted;
            batch.storedIfLastLine = error.lastLine;
          }
          await delay(wait);
          wait = Math.min(wait * 2, RETRY_MAX_MS);
          continue;
        }
        if (result === undefined) throw new NotFoundError('Build not found');
        timer?.();
        this.countStored(batch.entries, result);
        backlog.stored();
        stored += batch.entries.length;
        wait = RETRY_FIRST_MS;
        await this.reportStep(buildId, batch.entries).catch((error: unknown) =>
          this.logger.warn({ build_id: buildId, err: error }, 'build progress not reported'),
        );
      }
      this.logger.info(
        { build_id: buildId, stored },
        'database available again: held log lines stored',
      );
    } catch (error) {
      // The build is gone (deleted while the database was away) or the write is refused for
      // good: retrying cannot help.
      this.abandon(backlog);
      this.logger.error(
        { build_id: buildId, err: error, lost: backlog.unstored() },
        'held log lines could not be stored; they are lost',
      );
    } finally {
      if (this.backlogs.get(buildId) === backlog) this.backlogs.delete(buildId);
    }
  }

  /**
   * Counts what one committed append stored and refused. The repository stores a batch's lines
   * in order up to the cap: the first `entries.length - dropped` of them went in (the cap's
   * marker, when it wrote one, is counted as a stored line).
   */
  private countStored(entries: readonly Held[], result: AppendResult): void {
    if (this.metrics === undefined) return;
    if (result.dropped > 0) {
      this.metrics.inc('kiln_log_lines_dropped_total', { cause: 'limit' }, result.dropped);
    }
    // A retry that found its lines stored by the attempt before it stores nothing again.
    if (result.stored === 0) return;
    const kept = entries.slice(0, entries.length - result.dropped);
    let bytes = 0;
    let masked = 0;
    for (const entry of kept) {
      bytes += entry.kind === 'line' ? entry.bytes : Buffer.byteLength(toNewLogLine(entry).message);
      if (entry.kind === 'line' && entry.masked) masked++;
    }
    this.metrics.inc('kiln_log_lines_stored_total', {}, result.stored);
    this.metrics.inc('kiln_log_bytes_stored_total', {}, bytes);
    if (masked > 0) this.metrics.inc('kiln_log_lines_masked_total', {}, masked);
  }

  /** Gives up on a backlog once: the lines it still holds are lost, and counted as dropped. */
  private abandon(backlog: Backlog): void {
    if (backlog.abandoned) return;
    backlog.abandoned = true;
    if (backlog.pending > 0) {
      this.metrics?.inc(
        'kiln_log_lines_dropped_total',
        { cause: 'database_unavailable' },
        backlog.pending,
      );
    }
  }

  /** Reports the last step read from `entries` as the build's progress when it moved forward. */
  private async reportStep(buildId: string, entries: readonly Held[]): Promise<void> {
    let step: Step | undefined;
    for (const entry of entries) if (entry.kind === 'line' && entry.step) step = entry.step;
    if (step === undefined || step.current <= (this.reportedStep.get(buildId) ?? -1)) return;
    try {
      await this.lifecycle.reportProgress(buildId, step.current, step.total);
      this.reportedStep.set(buildId, step.current);
    } catch (error) {
      // The lines are stored; the next step reports progress again.
      if (!isDatabaseUnavailable(error)) throw error;
      this.logger.warn({ build_id: buildId, err: error }, 'build progress not reported');
    }
  }
}

function registerIn(masker: SecretMasker, secret: string): Registration {
  return secret.length > MAX_SECRET_CHARS
    ? {
        accepted: false,
        reason: `longer than ${MAX_SECRET_CHARS} characters; mount it as a file instead`,
      }
    : masker.register(secret);
}

/** kiln's own secrets known from its configuration and the database it writes to. */
function kilnSecrets(
  config: KilnConfig,
  connectionUrl: string | undefined,
): Record<string, string | undefined> {
  return {
    KILN_JWT_SECRET: config.jwtSecret.kind === 'generated' ? undefined : config.jwtSecret.secret,
    KILN_BOOTSTRAP_ADMIN_PASSWORD: config.bootstrapAdmin?.password,
    ...urlSecrets('DATABASE_URL', config.databaseUrl),
    ...urlSecrets('database connection URL', connectionUrl),
  };
}

function urlSecrets(name: string, url: string | undefined): Record<string, string | undefined> {
  if (url === undefined) return {};
  let password: string | undefined;
  try {
    const encoded = new URL(url).password;
    password = encoded === '' ? undefined : decodeURIComponent(encoded);
  } catch {
    password = undefined;
  }
  return { [name]: url, [`${name} password`]: password };
}

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((done) => {
    timer = setTimeout(() => done(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms).unref());
}

function truncationMarker(capBytes: number): NewLogLine {
  return {
    ts: new Date(),
    level: 'WARN',
    message: `[kiln] this build's log reached ${capBytes} bytes; further lines are not stored`,
    metadata: { truncated: 'true' },
  };
}
