import { type IncomingHttpHeaders, STATUS_CODES } from 'node:http';
import { type Dispatcher, request } from 'undici';
import { withoutCredentials } from '../../common/url-credentials.js';
import { forgejo, gitea } from './gitea.js';
import { github } from './github.js';
import { gitlab } from './gitlab.js';

/**
 * The states kiln shows on a commit: pending (the build was created or waits for a slot), running,
 * success, failure (the build failed) and error (it was cancelled). Each provider's file says how
 * its API spells them.
 */
export type CommitState = 'pending' | 'running' | 'success' | 'failure' | 'error';

export type GitProvider = 'github' | 'gitlab' | 'gitea' | 'forgejo';

/** Where a trigger's commit statuses go (the trigger's `status_target`, token resolved apart). */
export interface StatusTarget {
  /** The API's base URL: https://api.github.com, https://gitlab.example.com/api/v4, … */
  readonly apiUrl: string;
  /** `owner/name`; for GitLab the project's path or numeric id. */
  readonly repository: string;
  /** The label that tells kiln's status from other systems' on the same commit. */
  readonly context: string;
}

export interface StatusDetails {
  /** The build's page in the console. */
  readonly targetUrl: string;
  /** Cut to {@link MAX_DESCRIPTION_CHARS}. */
  readonly description: string;
}

/**
 * Posts one commit status to a git host. Resolves once the host accepted it (or, for GitLab, said
 * the status is already in that state). Rejects with StatusPostError, whose message names the
 * provider, the HTTP status and the host's reason, never the token; or, when `signal` aborts,
 * with the signal's reason.
 */
export interface CommitStatusPoster {
  post(
    target: StatusTarget,
    token: string,
    sha: string,
    state: CommitState,
    details: StatusDetails,
    signal?: AbortSignal,
  ): Promise<void>;
}

/**
 * A post that failed. `retryable`: the host could not be reached, timed out, or answered 5xx, 429
 * or a rate-limit 403, so the same post may succeed later; otherwise (401, 403, 404, 422, a target
 * kiln cannot address) it will not succeed until someone changes the trigger or the token.
 */
export class StatusPostError extends Error {
  constructor(
    message: string,
    /** The host's HTTP status; null when no answer came. */
    readonly status: number | null,
    readonly retryable: boolean,
    /** How long the host asked kiln to wait (`retry-after`, GitHub's rate-limit reset). */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
    this.name = 'StatusPostError';
  }
}

/** GitHub refuses longer descriptions (422); the others show them cut anyway. */
export const MAX_DESCRIPTION_CHARS = 140;

/**
 * How a build in `state` reads after "Build #12 ". The words say "running" where the host has no
 * running state of its own.
 */
export function describeState(state: CommitState): string {
  switch (state) {
    case 'pending':
      return 'is waiting to run';
    case 'running':
      return 'is running';
    case 'success':
      return 'succeeded';
    case 'failure':
      return 'failed';
    case 'error':
      return 'was cancelled';
  }
}

/** What a provider's file knows: how its API spells a status post and what its answers mean. */
interface StatusDialect {
  readonly label: string;
  /** What `repository` must look like, for the error when it does not. */
  readonly repositoryForm: string;
  readonly states: Readonly<Record<CommitState, string>>;
  /** The path below the API URL; null when `repository` is not in the form the provider needs. */
  path(repository: string, sha: string): string | null;
  headers(token: string): Record<string, string>;
  body(status: {
    state: string;
    context: string;
    targetUrl: string;
    description: string;
  }): Record<string, string>;
  /** An error answer that means the status is already in `state`. */
  alreadyPosted?(statusCode: number, reason: string, state: string): boolean;
  /** An answer besides 429 that asks kiln to slow down. */
  rateLimited?(statusCode: number, headers: IncomingHttpHeaders): boolean;
}

const DIALECTS = { github, gitlab, gitea, forgejo } satisfies Record<GitProvider, StatusDialect>;

export interface PosterOptions {
  /** Per post (config.externalCalls.timeoutMs). */
  readonly timeoutMs: number;
  /** undici's global dispatcher when absent. */
  readonly dispatcher?: Dispatcher;
}

export function posterFor(provider: GitProvider, options: PosterOptions): CommitStatusPoster {
  return new HttpStatusPoster(DIALECTS[provider], options);
}

class HttpStatusPoster implements CommitStatusPoster {
  constructor(
    private readonly dialect: StatusDialect,
    private readonly options: PosterOptions,
  ) {}

  async post(
    target: StatusTarget,
    token: string,
    sha: string,
    state: CommitState,
    details: StatusDetails,
    signal?: AbortSignal,
  ): Promise<void> {
    signal?.throwIfAborted();
    const { label } = this.dialect;
    const secret = token.trim();
    if (secret === '') throw new StatusPostError(`${label}: the token is empty`, null, false);
    const url = this.urlOf(target, sha);
    const providerState = this.dialect.states[state];
    const body = this.dialect.body({
      state: providerState,
      context: target.context,
      targetUrl: details.targetUrl,
      description: cut(details.description, MAX_DESCRIPTION_CHARS),
    });
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    let statusCode: number;
    let headers: IncomingHttpHeaders;
    let text: string;
    try {
      const response = await request(url, {
        method: 'POST',
        headers: { ...this.dialect.headers(secret), 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
        ...(this.options.dispatcher === undefined ? {} : { dispatcher: this.options.dispatcher }),
      });
      statusCode = response.statusCode;
      headers = response.headers;
      text = await response.body.text();
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      if (timeout.aborted) {
        throw new StatusPostError(
          `${label} did not answer within ${this.options.timeoutMs} ms`,
          null,
          true,
        );
      }
      const why = redact(withoutCredentials(networkProblem(error)), secret);
      throw new StatusPostError(`${label} could not be reached: ${why}`, null, true);
    }
    if (statusCode >= 200 && statusCode < 300) return;
    const reason = redact(withoutCredentials(reasonOf(statusCode, headers, text)), secret);
    if (this.dialect.alreadyPosted?.(statusCode, reason, providerState) === true) return;
    const retryable =
      statusCode >= 500 ||
      statusCode === 429 ||
      statusCode === 408 ||
      this.dialect.rateLimited?.(statusCode, headers) === true;
    throw new StatusPostError(
      `${label} answered HTTP ${statusCode}: ${reason}`,
      statusCode,
      retryable,
      retryable ? retryAfterMs(headers, Date.now()) : null,
    );
  }

  private urlOf(target: StatusTarget, sha: string): URL {
    const { label } = this.dialect;
    const path = this.dialect.path(target.repository, sha);
    if (path === null) {
      throw new StatusPostError(
        `${label} repository ${JSON.stringify(target.repository)} is not ${this.dialect.repositoryForm}`,
        null,
        false,
      );
    }
    try {
      const url = new URL(target.apiUrl.trim().replace(/\/+$/, '') + path);
      if (url.protocol === 'https:' || url.protocol === 'http:') return url;
    } catch {
      // Reported below, as any other URL kiln cannot post to.
    }
    throw new StatusPostError(
      `${label} API URL ${JSON.stringify(withoutCredentials(target.apiUrl))} is not an http(s) URL`,
      null,
      false,
    );
  }
}

/** The host's own words for a refusal: its JSON message, else its text, else the status's name. */
function reasonOf(statusCode: number, headers: IncomingHttpHeaders, text: string): string {
  if (statusCode >= 300 && statusCode < 400) {
    const location = headers.location;
    return typeof location === 'string' ? `redirected to ${location}` : 'redirected';
  }
  const words = (messageOf(parseJson(text)) ?? (text.trimStart().startsWith('<') ? '' : text))
    .replace(/\s+/g, ' ')
    .trim();
  if (words === '') return STATUS_CODES[statusCode] ?? 'no reason given';
  return cut(words, 200);
}

/**
 * `message` (GitHub, Gitea, GitLab; GitLab's validation errors are an object of field → list),
 * GitLab's `error`, and GitHub's `errors[].message` (422 Validation Failed).
 */
function messageOf(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { message, error, errors } = body as Record<string, unknown>;
  const parts: string[] = [];
  if (typeof message === 'string') parts.push(message);
  else if (typeof message === 'object' && message !== null) {
    for (const [field, value] of Object.entries(message)) {
      parts.push(`${field} ${Array.isArray(value) ? value.join(', ') : String(value)}`);
    }
  }
  if (typeof error === 'string') parts.push(error);
  if (Array.isArray(errors)) {
    for (const entry of errors as unknown[]) {
      if (typeof entry === 'string') parts.push(entry);
      else if (typeof entry === 'object' && entry !== null) {
        const detail = (entry as Record<string, unknown>).message;
        if (typeof detail === 'string') parts.push(detail);
      }
    }
  }
  return parts.length === 0 ? undefined : parts.join(': ');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function networkProblem(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && !error.message.includes(code)
    ? `${error.message} (${code})`
    : error.message;
}

/** `retry-after` in seconds or as a date, else GitHub's `x-ratelimit-reset` when none are left. */
function retryAfterMs(headers: IncomingHttpHeaders, now: number): number | null {
  const retryAfter = headers['retry-after'];
  if (typeof retryAfter === 'string' && retryAfter.trim() !== '') {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
    const date = Date.parse(retryAfter);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  const reset = Number(headers['x-ratelimit-reset']);
  if (headers['x-ratelimit-remaining'] === '0' && Number.isFinite(reset)) {
    return Math.max(0, reset * 1000 - now);
  }
  return null;
}

function redact(text: string, secret: string): string {
  return text.replaceAll(secret, '[token]');
}

/** At most `max` characters (code points, not UTF-16 units), an ellipsis marking a cut. */
function cut(text: string, max: number): string {
  const chars = Array.from(text);
  return chars.length <= max ? text : `${chars.slice(0, max - 1).join('')}…`;
}
