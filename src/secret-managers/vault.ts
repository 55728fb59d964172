import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, type Dispatcher, fetch } from 'undici';
import { withoutCredentials } from '../common/url-credentials.js';
import {
  DEFAULT_RESOLVE_LIMITS,
  type ResolveLimits,
  type SecretManager,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from './secret-manager.js';
import { type SecretReference, type VaultReference } from '../manifest/secret-reference.js';
import { KUBERNETES_SERVICE_ACCOUNT_TOKEN, type VaultSettings } from './settings.js';
import { untilAborted } from './abort.js';

/**
 * HashiCorp Vault through its HTTP API (no client library: two endpoints are all kiln needs).
 * - KV v2 "read secret version": `GET /v1/{mount}/data/{path}[?version=N]`, answering
 *   `{ data: { data, metadata } }`, 404 for a missing secret or a deleted/destroyed version
 *   https://developer.hashicorp.com/vault/api-docs/secret/kv/kv-v2#read-secret-version
 * - Kubernetes auth "login": `POST /v1/auth/{mount}/login` with `{ role, jwt }`, answering
 *   `{ auth: { client_token, lease_duration } }`
 *   https://developer.hashicorp.com/vault/api-docs/auth/kubernetes#login
 * - Enterprise / HCP namespaces: the `X-Vault-Namespace` header, on the login too
 *   https://developer.hashicorp.com/vault/docs/enterprise/namespaces
 */

/** A Vault token, and whether it came from a login (then a 403 may mean it was revoked). */
interface ClientToken {
  readonly value: string;
  readonly fromLogin: boolean;
}

interface CachedLogin {
  readonly token: string;
  /** Epoch ms after which a new login is made instead (shortly before the lease ends). */
  readonly renewAt: number;
}

/** An answer from Vault: its status, and its body as JSON (undefined when it is not JSON). */
interface VaultAnswer {
  readonly status: number;
  readonly body: unknown;
}

type FetchInit = NonNullable<Parameters<typeof fetch>[1]>;

const REDIRECTS: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 5;

/** A login is renewed this long before its lease ends, at most; at least 80% of it is used. */
const RENEW_MARGIN_MS = 60_000;
const MAX_BACKOFF_MS = 1_000;

export class VaultSecretManager implements SecretManager {
  readonly type = 'vault' as const;
  private readonly address: string;
  private dispatcher: Promise<Dispatcher | undefined> | undefined;
  private login: CachedLogin | undefined;
  private pendingLogin: Promise<CachedLogin> | undefined;

  /** `now` is the clock that ages a login token; tests pass their own. */
  constructor(
    private readonly settings: VaultSettings,
    private readonly limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {
    this.address = settings.address.replace(/\/+$/, '');
  }

  /**
   * The value of the reference's key in its KV v2 secret. A 403 on the read is the tenant's
   * policy saying no (SecretNotFoundError); with a token from a Kubernetes login it is first
   * taken for a revoked token, and the read is tried once more after a fresh login. An abort
   * of `signal` rejects with the signal's reason.
   */
  async resolve(reference: SecretReference, signal?: AbortSignal): Promise<string> {
    if (reference.manager !== 'vault') {
      throw new Error(`VaultSecretManager cannot resolve a ${reference.manager} reference`);
    }
    const url = `${this.address}/v1/${segments(reference.mount)}/data/${segments(reference.path)}`;
    const query = reference.version === undefined ? '' : `?version=${reference.version}`;
    const read = async (token: ClientToken): Promise<VaultAnswer> =>
      this.send(`reading ${reference.text}`, url + query, { token: token.value }, signal);
    let token = await this.clientToken(signal);
    let answer = await read(token);
    if (answer.status === 403 && token.fromLogin) {
      this.forgetLogin(token.value);
      token = await this.clientToken(signal);
      answer = await read(token);
    }
    return valueOf(reference, answer);
  }

  private async clientToken(signal: AbortSignal | undefined): Promise<ClientToken> {
    const { auth } = this.settings;
    if (auth.method === 'token') {
      // Read on every resolve, so a rotated Secret file is picked up without a restart.
      const value = (await this.readSetupFile('the Vault token file', auth.tokenFile)).trim();
      if (value === '') {
        throw new SecretManagerUnavailableError(
          'vault',
          `the Vault token file ${auth.tokenFile} is empty`,
        );
      }
      return { value, fromLogin: false };
    }
    if (this.login !== undefined && this.now() < this.login.renewAt) {
      return { value: this.login.token, fromLogin: true };
    }
    // Concurrent resolves share one login; it is bounded by the limits, not by one caller's signal.
    this.pendingLogin ??= this.kubernetesLogin(auth.role, auth.mount, auth.jwtFile).finally(() => {
      this.pendingLogin = undefined;
    });
    this.login = await untilAborted(this.pendingLogin, signal);
    return { value: this.login.token, fromLogin: true };
  }

  private forgetLogin(token: string): void {
    if (this.login?.token === token) this.login = undefined;
  }

  private async kubernetesLogin(
    role: string,
    mount = 'kubernetes',
    jwtFile = KUBERNETES_SERVICE_ACCOUNT_TOKEN,
  ): Promise<CachedLogin> {
    // Projected service-account tokens rotate: read the file at each login.
    const jwt = (await this.readSetupFile('the service-account token file', jwtFile)).trim();
    const startedAt = this.now();
    const answer = await this.send(
      `kiln's kubernetes login for role ${role}`,
      `${this.address}/v1/auth/${segments(mount)}/login`,
      { body: JSON.stringify({ role, jwt }) },
      undefined,
    );
    if (answer.status === 400 || answer.status === 401 || answer.status === 403) {
      throw new SecretManagerUnavailableError(
        'vault',
        `Vault refused kiln's kubernetes login for role ${role} (HTTP ${answer.status})`,
      );
    }
    const auth = field(answer.body, 'auth');
    const token = field(auth, 'client_token');
    const lease = field(auth, 'lease_duration');
    if (answer.status !== 200 || typeof token !== 'string' || token === '') {
      throw new SecretManagerUnavailableError(
        'vault',
        `Vault answered HTTP ${answer.status} without a client token to kiln's kubernetes login for role ${role}`,
      );
    }
    const leaseMs = typeof lease === 'number' && lease > 0 ? lease * 1000 : Infinity;
    return { token, renewAt: startedAt + leaseMs - Math.min(RENEW_MARGIN_MS, leaseMs / 5) };
  }

  private async readSetupFile(what: string, path: string): Promise<string> {
    try {
      return await readFile(path, 'utf8');
    } catch (error) {
      throw new SecretManagerUnavailableError('vault', `cannot read ${what} ${path}`, {
        cause: error,
      });
    }
  }

  /**
   * One request, as a POST when there is a body. Network errors, timeouts, 429 and 5xx are tried
   * again up to `limits.attempts` in all, then end in SecretManagerUnavailableError; every other
   * answer is returned for the caller to read.
   */
  private async send(
    what: string,
    url: string,
    request: { token?: string; body?: string },
    signal: AbortSignal | undefined,
  ): Promise<VaultAnswer> {
    const dispatcher = await this.tlsDispatcher();
    const headers: Record<string, string> = {};
    if (request.token !== undefined) headers['X-Vault-Token'] = request.token;
    if (this.settings.namespace !== undefined)
      headers['X-Vault-Namespace'] = this.settings.namespace;
    if (request.body !== undefined) headers['Content-Type'] = 'application/json';
    const { attempts, timeoutMs } = this.limits;
    let failure: { detail: string; cause?: unknown } = { detail: 'no attempt was made' };
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await backoff(attempt, signal);
      const timeout = AbortSignal.timeout(timeoutMs);
      try {
        const response = await this.fetchFollowingOwnRedirects(what, url, {
          method: request.body === undefined ? 'GET' : 'POST',
          headers,
          body: request.body,
          signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
          ...(dispatcher === undefined ? {} : { dispatcher }),
        });
        const text = await response.text();
        if (response.status !== 429 && response.status < 500) {
          return { status: response.status, body: parseJson(text) };
        }
        failure = {
          detail:
            response.status === 503
              ? 'Vault answered HTTP 503 (sealed, or a standby without an active node)'
              : `Vault answered HTTP ${response.status}`,
        };
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if (error instanceof SecretManagerUnavailableError) throw error;
        failure = timeout.aborted
          ? { detail: `Vault did not answer within ${timeoutMs} ms` }
          : { detail: `cannot reach Vault at ${withoutCredentials(this.address)}`, cause: error };
      }
    }
    throw new SecretManagerUnavailableError(
      'vault',
      `${what}: ${failure.detail} (${attempts} attempt${attempts === 1 ? '' : 's'})`,
      { cause: failure.cause },
    );
  }

  /**
   * `fetch` that follows a redirect only within the configured Vault's origin: the token and
   * namespace headers go to no other host (fetch would forward them, as they are not
   * `Authorization`). A redirect elsewhere (a standby naming another node's address, a proxy) is
   * an error naming where it pointed; configure the address that answers for the cluster.
   */
  private async fetchFollowingOwnRedirects(
    what: string,
    url: string,
    init: FetchInit,
  ): Promise<Awaited<ReturnType<typeof fetch>>> {
    const origin = new URL(this.address).origin;
    let target = url;
    let request = init;
    for (let hop = 0; ; hop++) {
      const response = await fetch(target, { ...request, redirect: 'manual' });
      const location = response.headers.get('location');
      if (!REDIRECTS.has(response.status) || location === null) return response;
      await response.body?.cancel();
      const next = new URL(location, target);
      if (next.origin !== origin) {
        throw new SecretManagerUnavailableError(
          'vault',
          `${what}: Vault at ${withoutCredentials(origin)} redirected to ${withoutCredentials(next.origin)}, another origin; kiln sends its Vault token only to the configured address`,
        );
      }
      if (hop >= MAX_REDIRECTS) {
        throw new SecretManagerUnavailableError(
          'vault',
          `${what}: Vault redirected more than ${MAX_REDIRECTS} times`,
        );
      }
      // 303, and 301/302 of a POST, go on as a GET without the body (as fetch would).
      const asGet = response.status === 303 || (request.method === 'POST' && response.status < 303);
      request = asGet ? { ...request, method: 'GET', body: undefined } : request;
      target = next.href;
    }
  }

  /** With `caFile`, an agent that trusts that PEM for https; made once. */
  private async tlsDispatcher(): Promise<Dispatcher | undefined> {
    const { caFile } = this.settings;
    if (caFile === undefined) return undefined;
    this.dispatcher ??= this.readSetupFile('the CA file', caFile).then(
      (ca) => new Agent({ connect: { ca } }),
      (error: unknown) => {
        this.dispatcher = undefined; // a file mounted later is read on the next resolve
        throw error;
      },
    );
    return this.dispatcher;
  }
}

/** The value of `reference.key` in a read's answer, or why there is none. */
function valueOf(reference: VaultReference, answer: VaultAnswer): string {
  const where = `${reference.mount}/data/${reference.path}`;
  const version = reference.version === undefined ? '' : ` version ${reference.version}`;
  const notFound = (detail: string): SecretNotFoundError =>
    new SecretNotFoundError(reference.text, detail);
  const secret = field(answer.body, 'data');
  const metadata = field(secret, 'metadata');
  switch (answer.status) {
    case 200: {
      const data = field(secret, 'data');
      if (typeof data !== 'object' || data === null) {
        throw notFound(`Vault's answer for ${where} is not a KV version 2 secret`);
      }
      if (!Object.hasOwn(data, reference.key)) {
        throw notFound(`the secret at ${where}${version} has no key ${reference.key}`);
      }
      const value: unknown = (data as Record<string, unknown>)[reference.key];
      if (typeof value !== 'string') {
        throw notFound(`the key ${reference.key} of ${where}${version} is not a string`);
      }
      return value;
    }
    case 404:
      // A deleted or destroyed version still answers 404 with its metadata.
      if (field(metadata, 'destroyed') === true) {
        throw notFound(`version ${String(field(metadata, 'version'))} of ${where} was destroyed`);
      }
      if (isNonEmptyString(field(metadata, 'deletion_time'))) {
        throw notFound(`version ${String(field(metadata, 'version'))} of ${where} was deleted`);
      }
      throw notFound(`Vault has no secret at ${where}${version}`);
    case 403:
      throw notFound(
        `permission denied reading ${where} (the tenant's Vault policy does not allow it, or kiln's token is no longer valid)`,
      );
    default:
      throw new SecretManagerUnavailableError(
        'vault',
        `reading ${reference.text}: Vault answered HTTP ${answer.status}`,
      );
  }
}

/** A mount or path with each segment URL-encoded and its slashes kept. */
function segments(path: string): string {
  return path.split('/').filter(Boolean).map(encodeURIComponent).join('/');
}

/** `value[name]` when value is an object, else undefined. */
function field(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null
    ? (value as Record<string, unknown>)[name]
    : undefined;
}

function isNonEmptyString(value: unknown): boolean {
  return typeof value === 'string' && value !== '';
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Waits 100, 200, 400 ... ms (at most MAX_BACKOFF_MS) before attempt `attempt`. */
async function backoff(attempt: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(Math.min(100 * 2 ** (attempt - 2), MAX_BACKOFF_MS), undefined, { signal });
  } catch {
    throw signal?.reason;
  }
}
