import { randomBytes, randomUUID } from 'node:crypto';
import {
  createServer as createHttpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TlsMaterial } from './kube/tls.js';

/**
 * A fake HashiCorp Vault on 127.0.0.1 speaking the documented HTTP API, only as much of it as
 * VaultSecretManager uses:
 * - KV v2 "read secret version", `GET /v1/{mount}/data/{path}[?version=N]`
 *   https://developer.hashicorp.com/vault/api-docs/secret/kv/kv-v2#read-secret-version
 * - Kubernetes auth "login", `POST /v1/auth/{mount}/login` with `{ role, jwt }`
 *   https://developer.hashicorp.com/vault/api-docs/auth/kubernetes#login
 * - namespaces through `X-Vault-Namespace`
 *   https://developer.hashicorp.com/vault/docs/enterprise/namespaces
 * - errors as `{"errors": [...]}` with Vault's status codes
 *   https://developer.hashicorp.com/vault/api-docs#http-status-codes
 *
 * Simplifications: a token's policies are path prefixes granting read (Vault's `path "kv/data/app/*"
 * { capabilities = ["read"] }`); a token is valid only in the namespace it was made in; the
 * namespace is taken from the header only, not from a path prefix.
 */

export interface RecordedRequest {
  readonly method: string;
  /** Path and query, e.g. `/v1/kv/data/app?version=2`. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

export interface TokenOptions {
  /** The namespace the token was made in; default the root namespace. */
  readonly namespace?: string;
  /** Path prefixes the token may read, e.g. `kv/data/app/`. */
  readonly policies: readonly string[];
}

export interface KubernetesRoleOptions {
  /** The service-account JWT this role accepts (the fake does no TokenReview). */
  readonly jwt: string;
  /** What each login's fresh token may read. */
  readonly policies: readonly string[];
  /** The login token's TTL, answered as `auth.lease_duration`; the token stops working after it. */
  readonly ttlSeconds: number;
  readonly namespace?: string;
}

interface Token {
  readonly namespace: string;
  readonly policies: readonly string[];
  readonly expiresAt: number;
  readonly fromLogin: boolean;
}

interface Version {
  data: Record<string, unknown> | null;
  readonly createdTime: string;
  deletionTime: string;
  destroyed: boolean;
}

const ROOT = '';

export class FakeVault {
  /** Answer nothing: requests are accepted and left open until stop(). */
  hang = false;
  /** Answer every request with 503 `Vault is sealed`. */
  sealed = false;
  readonly requests: RecordedRequest[] = [];
  private loginCount = 0;
  private readonly tokens = new Map<string, Token>();
  private readonly roles = new Map<string, KubernetesRoleOptions>();
  /** Key: namespace, mount, path; value: versions 1..n at index 0..n-1. */
  private readonly secrets = new Map<string, Version[]>();
  private readonly mounts = new Set<string>();
  private readonly failures: number[] = [];
  private readonly redirects: Array<{ status: number; to: string }> = [];

  private readonly server: Server;
  private listeningUrl = '';

  private constructor(tls: TlsMaterial | undefined) {
    const handler = (request: IncomingMessage, response: ServerResponse): void => {
      this.handle(request, response).catch((error: unknown) => {
        response.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    };
    this.server =
      tls === undefined
        ? createHttpServer(handler)
        : createHttpsServer({ cert: tls.certPem, key: tls.keyPem }, handler);
  }

  /** Plain HTTP, or HTTPS with `tls` (a certificate for 127.0.0.1). */
  static async start(options: { tls?: TlsMaterial } = {}): Promise<FakeVault> {
    const vault = new FakeVault(options.tls);
    await new Promise<void>((done) => vault.server.listen(0, '127.0.0.1', done));
    const { port } = vault.server.address() as { port: number };
    vault.listeningUrl = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
    return vault;
  }

  /** `http://127.0.0.1:<port>`, or https with TLS; kept after stop(). */
  get url(): string {
    return this.listeningUrl;
  }

  /** Successful Kubernetes logins so far. */
  get logins(): number {
    return this.loginCount;
  }

  /** Writes a new version of a KV v2 secret (mounting `mount` if needed); returns its number. */
  put(mount: string, path: string, data: Record<string, unknown>, namespace = ROOT): number {
    this.mounts.add(`${namespace}\n${mount}`);
    const key = secretKey(namespace, mount, path);
    const versions = this.secrets.get(key) ?? [];
    versions.push({
      data,
      createdTime: new Date().toISOString(),
      deletionTime: '',
      destroyed: false,
    });
    this.secrets.set(key, versions);
    return versions.length;
  }

  /** Soft-deletes a version, as `DELETE /v1/{mount}/data/{path}` or `/delete/` does. */
  deleteVersion(mount: string, path: string, version: number, namespace = ROOT): void {
    this.version(namespace, mount, path, version).deletionTime = new Date().toISOString();
  }

  /** Destroys a version's data for good, as `/destroy/` does. */
  destroy(mount: string, path: string, version: number, namespace = ROOT): void {
    const destroyed = this.version(namespace, mount, path, version);
    destroyed.data = null;
    destroyed.destroyed = true;
  }

  addToken(token: string, options: TokenOptions): void {
    this.tokens.set(token, {
      namespace: normalizeNamespace(options.namespace),
      policies: options.policies,
      expiresAt: Infinity,
      fromLogin: false,
    });
  }

  addKubernetesRole(mount: string, role: string, options: KubernetesRoleOptions): void {
    this.roles.set(roleKey(normalizeNamespace(options.namespace), mount, role), options);
  }

  /** Revokes every token a Kubernetes login made (their leases were revoked, Vault restored...). */
  revokeLoginTokens(): void {
    for (const [token, entry] of this.tokens) if (entry.fromLogin) this.tokens.delete(token);
  }

  /** The next `count` requests are answered with `status` and a Vault error body. */
  failNext(status: number, count = 1): void {
    for (let i = 0; i < count; i++) this.failures.push(status);
  }

  /**
   * The next `count` requests are redirected with `status` to `to` (a base URL: the request's path
   * and query are kept), as a standby node or a proxy in front of Vault may answer.
   */
  redirectNext(status: number, to: string, count = 1): void {
    for (let i = 0; i < count; i++) this.redirects.push({ status, to });
  }

  async stop(): Promise<void> {
    const closed = new Promise((done) => this.server.close(done));
    this.server.closeAllConnections();
    await closed;
  }

  private version(namespace: string, mount: string, path: string, version: number): Version {
    const found = this.secrets.get(secretKey(namespace, mount, path))?.[version - 1];
    if (found === undefined) throw new Error(`no version ${version} of ${mount}/${path}`);
    return found;
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    this.requests.push({
      method: request.method ?? '',
      url: request.url ?? '',
      headers: request.headers,
    });
    const body = await readBody(request);
    if (this.hang) return;
    if (this.sealed) return send(response, 503, { errors: ['Vault is sealed'] });
    const failure = this.failures.shift();
    if (failure !== undefined) return send(response, failure, { errors: [`injected ${failure}`] });
    const redirect = this.redirects.shift();
    if (redirect !== undefined) {
      response
        .writeHead(redirect.status, { Location: new URL(request.url ?? '/', redirect.to).href })
        .end();
      return;
    }

    const url = new URL(request.url ?? '/', 'http://vault');
    const namespace = normalizeNamespace(request.headers['x-vault-namespace']);
    const apiPath = url.pathname.startsWith('/v1/') ? url.pathname.slice('/v1/'.length) : undefined;
    const login = apiPath?.match(/^auth\/(.+)\/login$/);
    if (login?.[1] !== undefined) {
      if (request.method !== 'POST' && request.method !== 'PUT') {
        return send(response, 405, {
          errors: ['1 error occurred:\n\t* unsupported operation\n\n'],
        });
      }
      return this.login(response, namespace, decodeURIComponent(login[1]), body);
    }
    const token = this.tokenFor(request.headers['x-vault-token'], namespace);
    if (apiPath === undefined || token === undefined || !allows(token, apiPath)) {
      return send(response, 403, { errors: ['permission denied'] });
    }
    const read = this.secretPath(namespace, apiPath);
    if (read === undefined) {
      return send(response, 404, {
        errors: [`no handler for route "${apiPath}". route entry not found.`],
      });
    }
    if (request.method !== 'GET') {
      return send(response, 405, { errors: ['1 error occurred:\n\t* unsupported operation\n\n'] });
    }
    this.read(response, namespace, read.mount, read.path, url.searchParams.get('version'));
  }

  private login(response: ServerResponse, namespace: string, mount: string, body: string): void {
    let input: unknown;
    try {
      input = JSON.parse(body);
    } catch (error) {
      return send(response, 400, {
        errors: [`failed to parse JSON input: ${(error as Error).message}`],
      });
    }
    const { role, jwt } = (input ?? {}) as { role?: unknown; jwt?: unknown };
    if (typeof role !== 'string' || role === '')
      return send(response, 400, { errors: ['missing role'] });
    if (typeof jwt !== 'string' || jwt === '')
      return send(response, 400, { errors: ['missing jwt'] });
    const entry = this.roles.get(roleKey(namespace, mount, role));
    if (entry === undefined)
      return send(response, 400, { errors: [`invalid role name "${role}"`] });
    if (jwt !== entry.jwt) return send(response, 403, { errors: ['permission denied'] });
    const token = `hvs.${randomBytes(18).toString('base64url')}`;
    this.tokens.set(token, {
      namespace,
      policies: entry.policies,
      expiresAt: Date.now() + entry.ttlSeconds * 1000,
      fromLogin: true,
    });
    this.loginCount++;
    send(response, 200, {
      ...envelope(),
      auth: {
        client_token: token,
        accessor: randomUUID(),
        policies: ['default', ...entry.policies],
        token_policies: ['default', ...entry.policies],
        metadata: { role, service_account_name: 'kiln', service_account_namespace: 'kiln' },
        lease_duration: entry.ttlSeconds,
        renewable: true,
        entity_id: randomUUID(),
        token_type: 'service',
        orphan: true,
      },
    });
  }

  private read(
    response: ServerResponse,
    namespace: string,
    mount: string,
    path: string,
    versionParam: string | null,
  ): void {
    const versions = this.secrets.get(secretKey(namespace, mount, path)) ?? [];
    const asked = versionParam === null ? 0 : Number(versionParam);
    if (!Number.isInteger(asked) || asked < 0) {
      return send(response, 400, { errors: ['invalid version'] });
    }
    const number = asked === 0 ? versions.length : asked;
    const version = versions[number - 1];
    if (version === undefined) return send(response, 404, { errors: [] });
    const metadata = {
      created_time: version.createdTime,
      custom_metadata: null,
      deletion_time: version.deletionTime,
      destroyed: version.destroyed,
      version: number,
    };
    // A deleted or destroyed version: 404, with the metadata and no data.
    const gone = version.destroyed || version.deletionTime !== '';
    send(response, gone ? 404 : 200, {
      ...envelope(),
      data: { data: gone ? null : version.data, metadata },
    });
  }

  private tokenFor(header: string | string[] | undefined, namespace: string): Token | undefined {
    if (typeof header !== 'string') return undefined;
    const token = this.tokens.get(header);
    if (token === undefined || token.namespace !== namespace) return undefined;
    if (Date.now() >= token.expiresAt) {
      this.tokens.delete(header);
      return undefined;
    }
    return token;
  }

  /** `{mount}/data/{path}` split at a KV mount of `namespace`, the longest that matches. */
  private secretPath(
    namespace: string,
    apiPath: string,
  ): { mount: string; path: string } | undefined {
    let best: { mount: string; path: string } | undefined;
    for (const entry of this.mounts) {
      const [ns, mount] = entry.split('\n') as [string, string];
      const prefix = `${mount}/data/`;
      if (ns !== namespace || !apiPath.startsWith(prefix) || apiPath.length === prefix.length)
        continue;
      if (best === undefined || mount.length > best.mount.length) {
        best = { mount, path: decodeURIComponent(apiPath.slice(prefix.length)) };
      }
    }
    return best;
  }
}

function allows(token: Token, apiPath: string): boolean {
  return token.policies.some((prefix) => apiPath.startsWith(prefix));
}

function normalizeNamespace(value: string | string[] | undefined): string {
  return typeof value === 'string' ? value.replace(/^\/+|\/+$/g, '') : ROOT;
}

function secretKey(namespace: string, mount: string, path: string): string {
  return `${namespace}\n${mount}\n${path}`;
}

function roleKey(namespace: string, mount: string, role: string): string {
  return `${namespace}\n${mount}\n${role}`;
}

/** The fields every Vault response carries around `data` or `auth`. */
function envelope(): Record<string, unknown> {
  return {
    request_id: randomUUID(),
    lease_id: '',
    renewable: false,
    lease_duration: 0,
    data: null,
    wrap_info: null,
    warnings: null,
    auth: null,
  };
}

function send(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
  response.end(JSON.stringify(body));
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
