import type { Logger } from 'pino';
import { withoutCredentials } from '../../common/url-credentials.js';
import {
  type CommitState,
  type CommitStatusPoster,
  describeState,
  type GitProvider,
  StatusPostError,
  type StatusTarget,
} from './commit-status.js';

/** One build whose commit status is behind its state. */
export interface StatusJob {
  readonly buildId: string;
  readonly tenantId: string;
  readonly provider: GitProvider;
  /** The trigger's status target; `token` is a secret reference (vault:…, aws-sm:…, azure-kv:…). */
  readonly target: StatusTarget & { readonly token: string };
  readonly sha: string;
  /** What the build's state says the commit should show. */
  readonly desired: CommitState;
  /** What was last posted; null before the first post. */
  readonly posted: CommitState | null;
  /** Failed attempts at posting `desired`. */
  readonly attempts: number;
  readonly buildNumber: number;
}

/**
 * The commit-status bookkeeping of builds (builds.status_posted, status_attempts, status_next_at,
 * status_error). Whoever changes a build's desired state sets its attempts to 0 and makes it due at
 * once, so that a later state (success after running) starts afresh, even after a give-up.
 */
export interface StatusStore {
  /**
   * Up to `limit` builds whose desired state is not the posted one and whose next attempt is due,
   * claimed so that no other replica handles them meanwhile (FOR UPDATE SKIP LOCKED, and a
   * status_next_at pushed past the time a post may take).
   */
  due(limit: number): Promise<StatusJob[]>;
  /**
   * `state` was posted: status_posted, attempts 0, no error. When the desired state has moved on
   * meanwhile, the build is due again at once.
   */
  posted(buildId: string, state: CommitState): Promise<void>;
  /**
   * An attempt at `state` failed: its attempts so far, when to try again, and why. Ignored for
   * the count when the desired state has moved on meanwhile (the build is due at once instead).
   */
  failed(
    buildId: string,
    state: CommitState,
    attempts: number,
    nextAt: Date,
    error: string,
  ): Promise<void>;
  /** No more attempts at `state`; not due again unless the desired state changes. */
  gaveUp(buildId: string, state: CommitState, error: string): Promise<void>;
}

export interface TokenResolver {
  /** The token a reference names in the tenant's secret manager; throws with a message naming the reference, never a value. */
  resolve(tenantId: string, reference: string): Promise<string>;
}

export interface BuildLogNote {
  /** Appends `line` (a whole `[kiln] …` line) to the build's log, masked as every line is. */
  note(buildId: string, line: string): Promise<void>;
}

export interface StatusReporterDeps {
  readonly store: StatusStore;
  readonly tokens: TokenResolver;
  readonly log: BuildLogNote;
  /** The poster for a provider, bound to kiln's timeout (config.externalCalls.timeoutMs). */
  readonly posterFor: (provider: GitProvider) => CommitStatusPoster;
  /** Where the console is (KILN_PUBLIC_URL): a status links to the build's page there. */
  readonly publicUrl: string;
  readonly logger: Logger;
  readonly clock?: () => Date;
  /** In [0, 1): the jitter's source. */
  readonly random?: () => number;
  /** Builds claimed per tick. */
  readonly batch?: number;
}

export const MAX_ATTEMPTS = 10;
const FIRST_DELAY_MS = 2_000;
const MAX_DELAY_MS = 5 * 60_000;
const JITTER = 0.2;

/**
 * The wait after failed attempt `attempt` (1-based): 2 s doubled per attempt up to 5 min, give or
 * take 20 % so that builds failing together (a host's outage) do not retry together.
 */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(FIRST_DELAY_MS * 2 ** (attempt - 1), MAX_DELAY_MS);
  return Math.round(base * (1 + JITTER * (2 * random() - 1)));
}

interface Failure {
  readonly reason: string;
  readonly retryable: boolean;
  readonly retryAfterMs: number | null;
}

/**
 * Brings commits' statuses up to their builds' states (docs/adr/0053-triggers.md). Each tick
 * claims the builds that are due and posts each one's desired state. A failure never touches the
 * build's own status: it is retried with backoff (2 s … 5 min, {@link MAX_ATTEMPTS} attempts per
 * desired state), given up at once when the host refused for good (401, 404, …), and written to
 * the build's log as one `[kiln]` line per attempt, which names the host and the reason but never
 * the token.
 */
export class StatusReporter {
  private readonly clock: () => Date;
  private readonly random: () => number;
  private readonly batch: number;
  private readonly publicUrl: string;

  constructor(private readonly deps: StatusReporterDeps) {
    this.clock = deps.clock ?? (() => new Date());
    this.random = deps.random ?? Math.random;
    this.batch = deps.batch ?? 20;
    this.publicUrl = deps.publicUrl.replace(/\/+$/, '');
  }

  /**
   * Posts what is due; returns how many builds were handled. An abort of `signal` (shutdown) leaves
   * the builds it interrupts to their claim's expiry, with nothing recorded.
   */
  async tick(signal?: AbortSignal): Promise<number> {
    const jobs = await this.deps.store.due(this.batch);
    const results = await Promise.allSettled(jobs.map((job) => this.handle(job, signal)));
    results.forEach((result, index) => {
      if (result.status === 'rejected') {
        this.deps.logger.error(
          { err: result.reason as unknown, buildId: jobs[index]?.buildId },
          'commit status bookkeeping failed; the build is tried again when its claim expires',
        );
      }
    });
    return jobs.length;
  }

  private async handle(job: StatusJob, signal: AbortSignal | undefined): Promise<void> {
    // Nothing to post; recording it again releases the claim.
    if (job.posted === job.desired) return this.deps.store.posted(job.buildId, job.desired);
    let token: string;
    try {
      token = await this.deps.tokens.resolve(job.tenantId, job.target.token);
    } catch (error) {
      // A manager that is down and a reference that names nothing look alike here: both are retried.
      const why = error instanceof Error ? error.message : String(error);
      return this.failed(job, { reason: why, retryable: true, retryAfterMs: null }, undefined);
    }
    try {
      await this.deps.posterFor(job.provider).post(
        job.target,
        token,
        job.sha,
        job.desired,
        {
          targetUrl: `${this.publicUrl}/builds/${job.buildId}`,
          description: `Build #${job.buildNumber} ${describeState(job.desired)}`,
        },
        signal,
      );
    } catch (error) {
      if (signal?.aborted === true) return;
      const failure: Failure =
        error instanceof StatusPostError
          ? { reason: error.message, retryable: error.retryable, retryAfterMs: error.retryAfterMs }
          : { reason: String(error), retryable: true, retryAfterMs: null };
      return this.failed(job, failure, token);
    }
    await this.deps.store.posted(job.buildId, job.desired);
  }

  private async failed(job: StatusJob, failure: Failure, token: string | undefined): Promise<void> {
    const { store } = this.deps;
    const reason = masked(withoutCredentials(failure.reason), token);
    const attempts = job.attempts + 1;
    let outcome: string;
    if (!failure.retryable) {
      await store.gaveUp(job.buildId, job.desired, reason);
      outcome = 'not retrying';
    } else if (attempts >= MAX_ATTEMPTS) {
      await store.gaveUp(job.buildId, job.desired, reason);
      outcome = `giving up after ${attempts} attempts`;
    } else {
      const waitMs = Math.max(
        backoffMs(attempts, this.random),
        Math.min(failure.retryAfterMs ?? 0, MAX_DELAY_MS),
      );
      const nextAt = new Date(this.clock().getTime() + waitMs);
      await store.failed(job.buildId, job.desired, attempts, nextAt, reason);
      outcome = `retrying in ${Math.max(1, Math.round(waitMs / 1000))}s`;
    }
    const host = hostOf(job.target.apiUrl);
    this.deps.logger.warn(
      { buildId: job.buildId, provider: job.provider, host, state: job.desired, attempts, reason },
      'commit status could not be posted',
    );
    const line = `[kiln] commit status ${job.desired} could not be posted to ${host}: ${reason}; ${outcome}`;
    try {
      await this.deps.log.note(job.buildId, line);
    } catch (error) {
      this.deps.logger.warn(
        { err: error, buildId: job.buildId },
        'could not note a line in the build log',
      );
    }
  }
}

function hostOf(apiUrl: string): string {
  try {
    return new URL(apiUrl).host;
  } catch {
    return withoutCredentials(apiUrl);
  }
}

function masked(text: string, token: string | undefined): string {
  const secret = token?.trim();
  return secret === undefined || secret === '' ? text : text.replaceAll(secret, '[token]');
}
