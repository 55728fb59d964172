import { setTimeout as sleep } from 'node:timers/promises';
import { type Challenge, parseChallenges } from './oci-preflight.js';
import type { RegistryCredentials } from './registry.js';
import { networkFailure, registrySays, scrubSecrets, tokenAnswer } from './registry-answers.js';

/**
 * The HTTP side of the OCI distribution client (oci-referrers.ts): one registry host, its auth,
 * timeouts, retries and capped reads. Auth follows the Docker Registry v2 token flow as the push
 * pre-flight does (oci-preflight.ts): every request goes out anonymously first, or with what an
 * earlier 401 taught; a 401 carries a `WWW-Authenticate` challenge, answered with a Bearer token
 * for `repository:<path>:pull` (reads) or `repository:<path>:pull,push` (writes) from the
 * challenge's realm, or with Basic credentials. Tokens are kept per repository and access until
 * they expire. No message carries the password or a token.
 */

const DEFAULT_TIMEOUT_MS = 30_000;
const ATTEMPTS = 3;
const RETRY_DELAY_MS = 200;
const MAX_REDIRECTS = 5;
/** The token spec's default lifetime when a token service names none. */
const DEFAULT_TOKEN_SECONDS = 60;
/** A token is renewed this long before it expires, so it does not lapse in flight. */
const TOKEN_MARGIN_MS = 10_000;
const MAX_TOKEN_RESPONSE = 64 * 1024;

/**
 * A registry refused, answered what kiln cannot use, or could not be reached. The message names
 * the registry host, the operation and the status; it never carries a credential or a token.
 */
export class OciRegistryError extends Error {
  constructor(
    readonly host: string,
    readonly operation: string,
    /** The HTTP status of the answer at fault; undefined when there was none. */
    readonly status: number | undefined,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${host}: ${operation}: ${detail}`, options);
    this.name = 'OciRegistryError';
  }
}

export interface OciClientOptions {
  /** Plain HTTP instead of HTTPS (a local registry in tests, a registry on the node). */
  readonly insecure?: boolean;
  /** For this one registry host; sent to nothing else (its token service excepted). */
  readonly credentials?: RegistryCredentials;
  /** Per attempt, body included; 30 s unless given. */
  readonly timeoutMs?: number;
  readonly fetch?: typeof fetch;
}

/** What a request needs: `pull` reads, `push` writes (and reads). */
export type Access = 'pull' | 'push';

export interface OciRequest {
  readonly method: 'GET' | 'HEAD' | 'POST' | 'PUT';
  /** A path on the registry (`/v2/...`), or an absolute URL it gave (an upload's Location). */
  readonly target: string;
  readonly repository: string;
  readonly access: Access;
  /** Names the request in messages, e.g. `PUT manifest team/app@sha256:…`. */
  readonly operation: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: Buffer;
  /** The most body bytes read; a longer answer is an error. */
  readonly maxBytes: number;
}

export interface OciAnswer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  /** Where the answer came from, after redirects: a relative Location resolves against it. */
  readonly url: string;
}

interface Token {
  readonly value: string;
  readonly expiresAt: number;
}

export class OciSession {
  private readonly origin: string;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly credentials: RegistryCredentials | undefined;
  private readonly tokens = new Map<string, Token>();
  /** Set once the registry asked for Basic auth: the credentials then go with every request. */
  private basic = false;
  /** The password and every token obtained: blanked in anything the registry echoes. */
  private readonly secrets: string[] = [];

  constructor(
    readonly host: string,
    private readonly options: OciClientOptions,
  ) {
    // Docker Hub's references name docker.io; its registry API answers at registry-1.docker.io.
    const apiHost =
      host === 'docker.io' || host === 'index.docker.io' ? 'registry-1.docker.io' : host;
    this.origin = `${options.insecure === true ? 'http' : 'https'}://${apiHost}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.credentials = options.credentials;
    if (this.credentials !== undefined && this.credentials.password !== '') {
      // What a registry may echo of the Authorization header it got: the pair and its base64.
      const pair = `${this.credentials.username}:${this.credentials.password}`;
      const encoded = Buffer.from(pair, 'utf8').toString('base64');
      this.secrets.push(this.credentials.password, pair, encoded, encoded.replace(/=+$/, ''));
    }
  }

  /**
   * One request, authorized as the registry asks: the answer of any status but a network
   * failure, a timeout, 429 or 5xx (retried, then thrown) or a body over `maxBytes` (thrown).
   */
  async send(request: OciRequest): Promise<OciAnswer> {
    const url = new URL(request.target, this.origin);
    // An upload Location on another host gets no credentials: they are for this registry only.
    const ours = url.origin === this.origin;
    const cached = ours ? this.cachedAuthorization(request) : undefined;
    const answer = await this.exchange(request, url, cached);
    if (answer.status !== 401 || !ours) return answer;
    // A cached token may have been revoked or lack the scope: the challenge decides afresh.
    this.tokens.delete(tokenKey(request.repository, request.access));
    const authorization = await this.authorize(answer, request);
    return this.exchange(request, url, authorization);
  }

  /**
   * The error for an answer the caller did not expect, with why in words and what the registry
   * said (its OCI error body, secrets blanked).
   */
  refusal(
    request: Pick<OciRequest, 'operation' | 'access' | 'repository'>,
    answer: OciAnswer,
  ): OciRegistryError {
    const says = this.registrySays(answer);
    let why: string;
    switch (answer.status) {
      case 401: {
        const challenges = parseChallenges(answer.headers.get('www-authenticate') ?? '');
        if (this.credentials === undefined) {
          why = 'the registry requires credentials, and none were given';
        } else if (challenges.some((c) => c.params.error === 'insufficient_scope')) {
          why = `these credentials may not ${request.access} ${request.repository}`;
        } else {
          why = 'the registry refused these credentials';
        }
        break;
      }
      case 403:
        why = `the registry denied ${request.access} on ${request.repository}`;
        break;
      case 404:
        why = 'not found';
        break;
      default:
        why = 'unexpected';
    }
    return this.error(
      request.operation,
      answer.status,
      `answered ${answer.status} (${why})${says}`,
    );
  }

  error(
    operation: string,
    status: number | undefined,
    detail: string,
    cause?: unknown,
  ): OciRegistryError {
    return new OciRegistryError(
      this.host,
      operation,
      status,
      this.scrub(detail),
      cause === undefined ? undefined : { cause },
    );
  }

  private cachedAuthorization(request: OciRequest): string | undefined {
    if (this.basic && this.credentials !== undefined) return basicAuthorization(this.credentials);
    const now = Date.now();
    // A push token covers pulls of the same repository.
    const accesses: Access[] = request.access === 'pull' ? ['pull', 'push'] : ['push'];
    for (const access of accesses) {
      const token = this.tokens.get(tokenKey(request.repository, access));
      if (token !== undefined && token.expiresAt > now) return `Bearer ${token.value}`;
    }
    return undefined;
  }

  /** The Authorization header value that answers `refusal`'s challenge for `request`. */
  private async authorize(refusal: OciAnswer, request: OciRequest): Promise<string> {
    const challenges = parseChallenges(refusal.headers.get('www-authenticate') ?? '');
    const bearer = challenges.find((c) => c.scheme === 'bearer' && c.params.realm !== undefined);
    if (bearer !== undefined) {
      const actions = request.access === 'push' ? 'pull,push' : 'pull';
      const token = await this.token(
        bearer,
        `repository:${request.repository}:${actions}`,
        request,
      );
      this.tokens.set(tokenKey(request.repository, request.access), token);
      return `Bearer ${token.value}`;
    }
    if (challenges.some((c) => c.scheme === 'basic')) {
      if (this.credentials === undefined) {
        throw this.error(
          request.operation,
          401,
          'answered 401 (the registry requires credentials, Basic auth, and none were given)',
        );
      }
      this.basic = true;
      return basicAuthorization(this.credentials);
    }
    throw this.error(
      request.operation,
      401,
      `answered 401 without a Bearer or Basic challenge${this.registrySays(refusal)}`,
    );
  }

  /** A token for `scope` from the challenge's token service (the credentials as Basic auth). */
  private async token(challenge: Challenge, scope: string, request: OciRequest): Promise<Token> {
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm ?? '');
    } catch {
      throw this.error(
        request.operation,
        401,
        'the registry named a token service that is not a URL',
      );
    }
    if (
      this.credentials !== undefined &&
      realm.protocol !== 'https:' &&
      this.options.insecure !== true
    ) {
      throw this.error(
        request.operation,
        401,
        `the token service ${realm.origin} is not HTTPS; kiln sends credentials to it only over HTTPS`,
      );
    }
    if (challenge.params.service !== undefined) {
      realm.searchParams.set('service', challenge.params.service);
    }
    realm.searchParams.append('scope', scope);
    const what = `${request.operation}: the token service ${realm.origin}${realm.pathname}`;
    const answer = await this.exchange(
      { ...request, method: 'GET', operation: what, body: undefined, maxBytes: MAX_TOKEN_RESPONSE },
      realm,
      this.credentials === undefined ? undefined : basicAuthorization(this.credentials),
      {},
    );
    if (answer.status !== 200) {
      const why =
        answer.status === 401 || answer.status === 403
          ? this.credentials === undefined
            ? ' (it requires credentials, and none were given)'
            : ' (it refused these credentials)'
          : '';
      throw this.error(what, answer.status, `answered ${answer.status}${why}`);
    }
    const parsed = tokenAnswer(answer.body.toString('utf8'));
    if (parsed === undefined) throw this.error(what, 200, 'answered without a token');
    this.secrets.push(parsed.token);
    const lifetimeMs = (parsed.expiresIn ?? DEFAULT_TOKEN_SECONDS) * 1000;
    return { value: parsed.token, expiresAt: Date.now() + lifetimeMs - TOKEN_MARGIN_MS };
  }

  /**
   * The request with the per-attempt timeout, retried on network errors, timeouts, 429 and 5xx.
   * GET and HEAD follow redirects by hand, so that the Authorization header goes to this
   * registry only and not to the storage a blob redirect names.
   */
  private async exchange(
    request: OciRequest,
    url: URL,
    authorization: string | undefined,
    extraHeaders: Readonly<Record<string, string>> = request.headers ?? {},
  ): Promise<OciAnswer> {
    let failure = '';
    let status: number | undefined;
    let cause: unknown;
    for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
      if (attempt > 1) await sleep(RETRY_DELAY_MS * 2 ** (attempt - 2));
      const timeout = AbortSignal.timeout(this.timeoutMs);
      try {
        let target = url;
        let auth = authorization;
        for (let hop = 0; ; hop += 1) {
          const response = await this.fetch(target, {
            method: request.method,
            headers: auth === undefined ? extraHeaders : { ...extraHeaders, authorization: auth },
            body: request.body === undefined ? undefined : new Uint8Array(request.body),
            redirect: 'manual',
            signal: timeout,
          });
          const location = response.headers.get('location');
          const follows =
            (request.method === 'GET' || request.method === 'HEAD') &&
            [301, 302, 303, 307, 308].includes(response.status) &&
            location !== null;
          if (follows && hop < MAX_REDIRECTS) {
            await response.body?.cancel();
            target = new URL(location, target);
            if (target.origin !== url.origin) auth = undefined;
            continue;
          }
          const body = await readCapped(response, request.maxBytes);
          if (body === undefined) {
            throw this.error(
              request.operation,
              response.status,
              `the answer is larger than ${request.maxBytes} bytes, more than kiln reads`,
            );
          }
          const answer = {
            status: response.status,
            headers: response.headers,
            body,
            url: target.href,
          };
          if (answer.status !== 429 && answer.status < 500) return answer;
          failure = `answered ${answer.status}${this.registrySays(answer)}`;
          status = answer.status;
          cause = undefined;
          break;
        }
      } catch (error) {
        if (error instanceof OciRegistryError) throw error;
        failure = timeout.aborted
          ? `did not answer within ${this.timeoutMs} ms`
          : networkFailure(error);
        status = undefined;
        cause = error;
      }
    }
    throw this.error(request.operation, status, `${failure} (${ATTEMPTS} attempts)`, cause);
  }

  /** `; the registry said: CODE: message` from an OCI error body, without any secret. */
  private registrySays(answer: OciAnswer): string {
    return registrySays(answer.body.toString('utf8'), this.secrets);
  }

  private scrub(text: string): string {
    return scrubSecrets(text, this.secrets);
  }
}

function tokenKey(repository: string, access: Access): string {
  return `${access} ${repository}`;
}

function basicAuthorization(credentials: RegistryCredentials): string {
  const pair = `${credentials.username}:${credentials.password}`;
  return `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
}

/** The body, or undefined when it is longer than `maxBytes` (then it is not read further). */
async function readCapped(response: Response, maxBytes: number): Promise<Buffer | undefined> {
  if (response.body === null) return Buffer.alloc(0);
  const declared = Number(response.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body.cancel();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  // Leaving the loop early cancels the stream: the rest is never downloaded.
  for await (const chunk of response.body) {
    total += chunk.byteLength;
    if (total > maxBytes) return undefined;
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}
