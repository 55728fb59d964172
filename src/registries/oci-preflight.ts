import {
  type OciRegistryType,
  type PreflightOptions,
  type RegistryCredentials,
  type RegistryPreflight,
  RegistryUnauthorizedError,
  RegistryUnavailableError,
  type RepositoryAddress,
} from './registry.js';
import {
  isRecord,
  networkFailure,
  registrySays,
  scrubSecrets,
  tokenAnswer,
} from './registry-answers.js';

/**
 * The push pre-flight for Harbor, Quay and Artifactory: one pass of the Docker Registry v2 token
 * flow (https://distribution.github.io/distribution/spec/auth/token/), ending in a real but empty
 * push that is cancelled at once:
 *
 * 1. `GET /v2/`: 200 means no auth so far; 401 carries the `WWW-Authenticate` challenge.
 * 2. Bearer: `GET <realm>?service=<service>&scope=repository:<path>:pull,push` with the
 *    credentials as Basic auth. The token server answers 401 only for bad credentials and
 *    otherwise grants what the account holds (the intersection rule of the spec), so when the
 *    token is a JWT its `access` claim (https://distribution.github.io/distribution/spec/auth/jwt/)
 *    already says whether push was granted. Basic: the credentials go on each request.
 * 3. `POST /v2/<path>/blobs/uploads/` (OCI distribution-spec "Pushing blobs"): 202 proves push;
 *    the upload's Location is then DELETEd ("Canceling an Upload") so nothing is left. Registries
 *    that want the `delete` action for that (distribution's appendAccessRecords) answer with a
 *    challenge for it, which is followed once; a cancel that still fails is left to the
 *    registry's upload purging, as no byte was written.
 *
 * Each request has `timeoutMs` (default 5 s) and up to two retries on network errors, timeouts,
 * 429 and 5xx. No message carries the password or a token.
 */

const DEFAULT_TIMEOUT_MS = 5_000;
const ATTEMPTS = 3;

/** A `WWW-Authenticate` challenge (RFC 9110 section 11.6.1): scheme and auth-params. */
export interface Challenge {
  /** Lowercase, e.g. "bearer", "basic". */
  readonly scheme: string;
  /** Lowercase names; quoted values unquoted. */
  readonly params: Readonly<Record<string, string>>;
}

/**
 * Every challenge in a `WWW-Authenticate` value, e.g.
 * `Bearer realm="https://r/token",service="r",scope="repository:a/b:pull,push"`. Quoted values
 * may hold commas, spaces and backslash escapes; several challenges may share one header.
 */
export function parseChallenges(header: string): Challenge[] {
  const challenges: { scheme: string; params: Record<string, string> }[] = [];
  const tokenChar = /[!#$%&'*+.^_`|~0-9A-Za-z-]/;
  let at = 0;
  const skipSpaces = (): void => {
    while (at < header.length && (header[at] === ' ' || header[at] === '\t')) at += 1;
  };
  const readToken = (): string => {
    const start = at;
    while (at < header.length && tokenChar.test(header[at]!)) at += 1;
    return header.slice(start, at);
  };
  // Leniently up to the next ',': some servers leave a URL unquoted, which is not an RFC token.
  const readBare = (): string => {
    const start = at;
    while (at < header.length && header[at] !== ',') at += 1;
    return header.slice(start, at).trim();
  };
  const readQuoted = (): string => {
    let value = '';
    at += 1;
    while (at < header.length && header[at] !== '"') {
      if (header[at] === '\\') at += 1;
      value += header[at] ?? '';
      at += 1;
    }
    at += 1;
    return value;
  };

  while (at < header.length) {
    skipSpaces();
    const word = readToken();
    if (word === '') {
      at += 1; // a ',' between items, or a character no grammar allows
      continue;
    }
    skipSpaces();
    const current = challenges.at(-1);
    if (header[at] === '=' && current !== undefined) {
      at += 1;
      skipSpaces();
      current.params[word.toLowerCase()] = header[at] === '"' ? readQuoted() : readBare();
    } else {
      challenges.push({ scheme: word.toLowerCase(), params: {} });
    }
  }
  return challenges;
}

/**
 * The actions a Docker registry JWT grants on `repository`, read without verifying the
 * signature (only the registry can), or undefined when the token carries no `access` claim the
 * client can read.
 */
export function grantedActions(token: string, repository: string): string[] | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  let claims: unknown;
  try {
    claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!isRecord(claims) || !Array.isArray(claims.access)) return undefined;
  return claims.access.flatMap((entry: unknown) =>
    isRecord(entry) &&
    entry.type === 'repository' &&
    entry.name === repository &&
    Array.isArray(entry.actions)
      ? entry.actions.filter((action): action is string => typeof action === 'string')
      : [],
  );
}

export class OciRegistryPreflight implements RegistryPreflight {
  /** `type` only words the messages: Harbor projects, Quay namespaces, Artifactory keys. */
  constructor(readonly type: OciRegistryType) {}

  async checkPush(
    repository: RepositoryAddress,
    credentials: RegistryCredentials | undefined,
    options: PreflightOptions = {},
  ): Promise<void> {
    await new PushCheck(this.type, repository, credentials, options).run();
  }
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
  readonly url: string;
}

/** One run of the check; holds what the steps share. */
class PushCheck {
  private readonly base: string;
  private readonly label: string;
  private readonly timeoutMs: number;
  /** The password and every token obtained: blanked in anything the registry echoes. */
  private readonly secrets: string[] = [];

  constructor(
    private readonly type: OciRegistryType,
    private readonly repository: RepositoryAddress,
    private readonly credentials: RegistryCredentials | undefined,
    private readonly options: PreflightOptions,
  ) {
    this.base = `${options.insecure === true ? 'http' : 'https'}://${repository.host}`;
    this.label = `${repository.host}/${repository.path}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (credentials !== undefined && credentials.password !== '') {
      // What a registry may echo of the Authorization header it got: the pair and its base64.
      const pair = `${credentials.username}:${credentials.password}`;
      this.secrets.push(
        credentials.password,
        pair,
        Buffer.from(pair, 'utf8').toString('base64'),
        Buffer.from(pair, 'utf8').toString('base64').replace(/=+$/, ''),
      );
    }
  }

  async run(): Promise<void> {
    const ping = await this.send('GET', `${this.base}/v2/`, undefined, 'GET /v2/');
    let authorization: string | undefined;
    if (ping.status === 401) {
      authorization = await this.authorize(ping);
    } else if (ping.status !== 200) {
      throw this.unavailable(
        `GET /v2/ answered ${ping.status}; ${this.repository.host} does not look like an OCI registry`,
      );
    }

    const uploads = `${this.base}/v2/${this.repository.path}/blobs/uploads/`;
    const what = `POST /v2/${this.repository.path}/blobs/uploads/`;
    let upload = await this.send('POST', uploads, authorization, what);
    if (upload.status === 401 && authorization === undefined) {
      // /v2/ was open to everyone; the push itself asks for credentials.
      authorization = await this.authorize(upload);
      upload = await this.send('POST', uploads, authorization, what);
    }
    switch (upload.status) {
      case 202:
        await this.cancel(upload, authorization);
        return;
      case 401:
        throw this.unauthorized(this.pushRefused(upload));
      case 403:
        throw this.unauthorized(
          `the registry denied a push to ${this.repository.path}${this.registrySays(upload)}`,
        );
      case 404:
        throw this.unauthorized(
          `${this.repository.path} does not exist on the registry, or these credentials cannot see it: ` +
            `${this.missingHint()}${this.registrySays(upload)}`,
        );
      default:
        throw this.unavailable(`${what} answered ${upload.status}${this.registrySays(upload)}`);
    }
  }

  /** The Authorization header value that answers `refusal`'s challenge for a push. */
  private async authorize(refusal: Answer): Promise<string> {
    const challenges = parseChallenges(refusal.headers.get('www-authenticate') ?? '');
    const bearer = challenges.find((c) => c.scheme === 'bearer' && c.params.realm !== undefined);
    if (bearer !== undefined) {
      const token = await this.token(bearer, `repository:${this.repository.path}:pull,push`);
      const granted = grantedActions(token, this.repository.path);
      if (granted !== undefined && !granted.includes('push') && !granted.includes('*')) {
        throw this.unauthorized(this.noPush(granted));
      }
      return `Bearer ${token}`;
    }
    if (challenges.some((c) => c.scheme === 'basic')) {
      if (this.credentials === undefined) {
        throw this.unauthorized(
          'the registry requires credentials (Basic auth), and none were given',
        );
      }
      return basic(this.credentials);
    }
    throw this.unauthorized(
      `the registry answered 401 without a Bearer or Basic challenge${this.registrySays(refusal)}`,
    );
  }

  /** A bearer token for `scope` from the challenge's token service. */
  private async token(challenge: Challenge, scope: string): Promise<string> {
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm ?? '');
    } catch {
      throw this.unavailable('the registry named a token service that is not a URL');
    }
    if (
      this.credentials !== undefined &&
      realm.protocol !== 'https:' &&
      this.options.insecure !== true
    ) {
      throw this.unavailable(
        `the token service ${realm.origin} is not HTTPS; kiln sends credentials to it only over HTTPS`,
      );
    }
    if (challenge.params.service !== undefined) {
      realm.searchParams.set('service', challenge.params.service);
    }
    realm.searchParams.append('scope', scope);
    const authorization = this.credentials === undefined ? undefined : basic(this.credentials);
    const what = `the token service ${realm.origin}${realm.pathname}`;
    const answer = await this.send('GET', realm.href, authorization, what);
    if (answer.status === 401 || answer.status === 403) {
      throw this.unauthorized(
        this.credentials === undefined
          ? 'the token service requires credentials, and none were given'
          : `the token service refused these credentials (${answer.status})`,
      );
    }
    if (answer.status !== 200) {
      throw this.unavailable(`${what} answered ${answer.status}`);
    }
    const token = tokenOf(answer.body);
    if (token === undefined) throw this.unavailable(`${what} answered without a token`);
    this.secrets.push(token);
    return token;
  }

  /**
   * Cancels the probe upload. Best effort and never throws: the push check has already passed,
   * and an upload without data is purged by the registry.
   */
  private async cancel(upload: Answer, authorization: string | undefined): Promise<void> {
    const location = upload.headers.get('location');
    if (location === null) return;
    const target = new URL(location, upload.url);
    // The credentials go nowhere but the registry itself.
    if (target.origin !== new URL(this.base).origin) return;
    try {
      const what = 'the upload cancel';
      const answer = await this.send('DELETE', target.href, authorization, what, 1);
      if (answer.status !== 401) return;
      const challenge = parseChallenges(answer.headers.get('www-authenticate') ?? '').find(
        (c) =>
          c.scheme === 'bearer' && c.params.realm !== undefined && c.params.scope !== undefined,
      );
      if (challenge === undefined) return;
      const token = await this.token(challenge, challenge.params.scope!);
      await this.send('DELETE', target.href, `Bearer ${token}`, what, 1);
    } catch {
      // Left to the registry's purge of stale uploads.
    }
  }

  /**
   * One request with the per-attempt timeout, retried on network errors, timeouts, 429 and 5xx;
   * the answer of any other status. `what` names the request in messages.
   */
  private async send(
    method: string,
    url: string,
    authorization: string | undefined,
    what: string,
    attempts = ATTEMPTS,
  ): Promise<Answer> {
    let failure = '';
    let cause: unknown;
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      const timeout = AbortSignal.timeout(this.timeoutMs);
      const signal =
        this.options.signal === undefined
          ? timeout
          : AbortSignal.any([timeout, this.options.signal]);
      try {
        const response = await fetch(url, {
          method,
          headers: authorization === undefined ? {} : { authorization },
          signal,
        });
        const body = await response.text();
        if (response.status !== 429 && response.status < 500) {
          return { status: response.status, headers: response.headers, body, url: response.url };
        }
        failure = `answered ${response.status}`;
        cause = undefined;
      } catch (error) {
        if (this.options.signal?.aborted === true) throw this.options.signal.reason;
        failure = timeout.aborted
          ? `did not answer within ${this.timeoutMs} ms`
          : networkFailure(error);
        cause = error;
      }
    }
    const tries = attempts === 1 ? '' : ` (${attempts} attempts)`;
    throw this.unavailable(`${what} ${failure}${tries}`, cause);
  }

  /** Why the upload start answered 401: no credentials, no push in the scope, or refused. */
  private pushRefused(upload: Answer): string {
    const says = this.registrySays(upload);
    if (this.credentials === undefined) {
      return `the registry requires credentials to push, and none were given${says}`;
    }
    const challenges = parseChallenges(upload.headers.get('www-authenticate') ?? '');
    return challenges.some((c) => c.params.error === 'insufficient_scope')
      ? `these credentials may not push to ${this.repository.path}${says}`
      : `the registry refused these credentials for a push${says}`;
  }

  private noPush(granted: string[]): string {
    const path = this.repository.path;
    if (this.credentials === undefined) {
      return `anonymous users may not push to ${path}; give kiln credentials for this registry`;
    }
    if (granted.length === 0) {
      return `these credentials may not push to ${path}: ${this.missingHint()}`;
    }
    return `these credentials may not push to ${path} (the registry granted ${granted.join(', ')} only)`;
  }

  /** What must exist, and what the account needs, for a push to this repository. */
  private missingHint(): string {
    const first = this.repository.path.split('/')[0]!;
    switch (this.type) {
      case 'harbor':
        return `the Harbor project "${first}" does not exist, or the account is not a member of it with the Developer role or higher`;
      case 'quay':
        return `the Quay organization or user "${first}" does not exist, or the account has no write permission there`;
      case 'artifactory':
        return `the Artifactory repository "${first}" does not exist, or the account has no Deploy permission on it`;
    }
  }

  /** `; the registry said: CODE: message` from an OCI error body, without any secret. */
  private registrySays(answer: Answer): string {
    return registrySays(answer.body, this.secrets);
  }

  private scrub(text: string): string {
    return scrubSecrets(text, this.secrets);
  }

  private unauthorized(detail: string): RegistryUnauthorizedError {
    return new RegistryUnauthorizedError(this.label, detail);
  }

  private unavailable(detail: string, cause?: unknown): RegistryUnavailableError {
    return new RegistryUnavailableError(
      this.label,
      detail,
      cause === undefined ? undefined : { cause },
    );
  }
}

function basic(credentials: RegistryCredentials): string {
  const pair = `${credentials.username}:${credentials.password}`;
  return `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
}

/** The token of a token service's answer. */
function tokenOf(body: string): string | undefined {
  return tokenAnswer(body)?.token;
}
