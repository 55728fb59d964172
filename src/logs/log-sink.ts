import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { NotFoundError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { type BuilderFormat, inspectLine } from './builder-output.js';
import {
  type AppendResult,
  BuildLogsRepository,
  type NewLogLine,
} from './build-logs.repository.js';
import { MAX_LINE_BYTES } from './line-splitter.js';
import { type Registration, SecretMasker } from './secret-masker.js';

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

/**
 * The one way log lines enter kiln. In order: registered secrets are masked (before anything is
 * stored or sent); lines longer than 64 KiB are split, marked in metadata; level and step are read
 * from the builder's output and steps are reported as the build's progress; the batch is written
 * with dense seqs and announced with NOTIFY. A build's log is capped (KILN_LOG_MAX_BYTES_PER_BUILD):
 * past it, one marker line says so and further lines are counted as dropped, never lost silently.
 */
@Injectable()
export class LogSink {
  private readonly maskers = new Map<string, SecretMasker>();
  private readonly reportedStep = new Map<string, number>();
  /** The masked tail of a cut line, held back until the rest of the line arrives. */
  private readonly carries = new Map<string, { text: string; line: LogLineInput }>();

  constructor(
    private readonly logs: BuildLogsRepository,
    private readonly lifecycle: BuildLifecycle,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Values to mask in this build's output (build-arg secrets, registry credentials…). */
  registerSecrets(buildId: string, secrets: readonly string[]): Registration[] {
    let masker = this.maskers.get(buildId);
    if (masker === undefined) {
      masker = new SecretMasker();
      this.maskers.set(buildId, masker);
    }
    const results = secrets.map((secret): Registration =>
      secret.length > MAX_SECRET_CHARS
        ? {
            accepted: false,
            reason: `longer than ${MAX_SECRET_CHARS} characters; mount it as a file instead`,
          }
        : masker.register(secret),
    );
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
   * Ends a build's output: stores a held-back tail of a cut line (a producer that stopped
   * mid-line) and forgets the build's secrets.
   */
  async release(buildId: string): Promise<void> {
    const carry = this.carries.get(buildId);
    if (carry !== undefined)
      await this.append(buildId, [{ ...carry.line, text: '', continued: false }]);
    this.maskers.delete(buildId);
    this.reportedStep.delete(buildId);
  }

  async append(buildId: string, input: readonly LogLineInput[]): Promise<AppendResult> {
    const masker = this.maskers.get(buildId);
    const lines: NewLogLine[] = [];
    let step: { current: number; total: number } | undefined;
    const now = new Date();
    let carry = this.carries.get(buildId);
    for (const line of input) {
      // A piece cut at the splitter's cap goes on in the next piece: mask it joined with what was
      // held back, and hold back its tail, so a secret across the cut is masked whole.
      const joined = carry === undefined ? line.text : carry.text + line.text;
      const masked = masker === undefined ? joined : masker.mask(joined);
      let text = masked;
      carry = undefined;
      if (line.continued === true) {
        const cut = Math.max(0, masked.length - CARRY_CHARS);
        carry = { text: masked.slice(cut), line };
        text = masked.slice(0, cut);
        if (text === '') continue;
      }
      const pieces = splitUtf8(text, MAX_LINE_BYTES);
      pieces.forEach((piece, index) => {
        const insight = inspectLine(piece, line.format);
        if (insight.step !== undefined) step = insight.step;
        const continued = index < pieces.length - 1 || line.continued === true;
        const metadata: Record<string, string> = {
          ...insight.metadata,
          ...(line.container === undefined ? {} : { container: line.container }),
          ...(continued ? { continued: 'true' } : {}),
        };
        lines.push({
          ts: line.ts ?? now,
          level: insight.level,
          message: piece,
          metadata: Object.keys(metadata).length === 0 ? null : metadata,
        });
      });
    }
    if (carry === undefined) this.carries.delete(buildId);
    else this.carries.set(buildId, carry);
    const result = await this.logs.append(
      buildId,
      lines,
      this.config.logMaxBytesPerBuild,
      truncationMarker,
    );
    if (result === undefined) throw new NotFoundError('Build not found');
    if (step !== undefined && step.current > (this.reportedStep.get(buildId) ?? -1)) {
      this.reportedStep.set(buildId, step.current);
      await this.lifecycle.reportProgress(buildId, step.current, step.total);
    }
    return result;
  }
}

function truncationMarker(capBytes: number): NewLogLine {
  return {
    ts: new Date(),
    level: 'WARN',
    message: `[kiln] this build's log reached ${capBytes} bytes; further lines are not stored`,
    metadata: { truncated: 'true' },
  };
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
