import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A Docker Registry HTTP API v2 front with its token server on the same port, as much of both as
 * kiln's push pre-flight uses, following the documented wire:
 *
 * - Token flow (https://distribution.github.io/distribution/spec/auth/token/): a /v2/ request
 *   without a token gets 401 and `WWW-Authenticate: Bearer realm="<url>/token",service="..."`
 *   (plus `scope` and `error="insufficient_scope"` / `error="invalid_token"` when a token was
 *   sent, as distribution registry/auth/token/accesscontroller.go writes them).
 * - Token endpoint (same page, and .../spec/auth/jwt/): `GET /token?service=&scope=` with Basic
 *   auth; wrong credentials 401; otherwise 200 `{token, access_token, expires_in, issued_at}` whose
 *   JWT `access` claim holds the intersection of requested and granted actions (anonymous
 *   clients get a token too). Signed HS256 with a random key; `opaqueTokens` issues random strings
 *   instead, as registries whose tokens the client cannot read do.
 * - Access per request (distribution registry/handlers/app.go appendAccessRecords): GET/HEAD
 *   pull; POST/PUT/PATCH pull and push; DELETE delete.
 * - Uploads (OCI distribution-spec "Pushing blobs"; Docker Registry API v2 "Canceling an
 *   Upload"): `POST /v2/<name>/blobs/uploads/` 202 with Location, Docker-Upload-UUID and
 *   `Range: 0-0`; `DELETE` of the Location 204; an unknown upload 404 BLOB_UPLOAD_UNKNOWN. A name
 *   outside the OCI grammar matches no route: 404 as distribution's router answers.
 * - `basicAuthMode` (distribution's htpasswd auth): 401 `Basic realm="fake-registry"` for
 *   missing or wrong credentials, 403 DENIED for a user without the action.
 * - `projects` (Harbor): the token service grants nothing on a repository whose project does
 *   not exist (goharbor/harbor src/core/service/token/creator.go), and /v2/<name>/... there
 *   answers 401 UNAUTHORIZED "project <p> not found" with an empty challenge
 *   (src/server/middleware/v2auth/auth.go). Harbor does not answer 404 here.
 */

export type Action = 'pull' | 'push' | 'delete';

export interface FakeTokenRegistryOptions {
  /** Harbor-like: only repositories whose first path part is listed exist. */
  readonly projects?: readonly string[];
  /** Basic auth on /v2/ instead of bearer tokens. */
  readonly basicAuthMode?: boolean;
  /** Tokens the client cannot decode (random strings) instead of JWTs. */
  readonly opaqueTokens?: boolean;
  /**
   * Error messages end with the Authorization header the request carried, as some registries
   * and proxies echo it (`DENIED: denied for Basic cm9ib3Q6…`).
   */
  readonly echoAuthorization?: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
}

interface User {
  readonly password: string;
  readonly access: Readonly<Record<string, readonly string[]>>;
}

interface AccessEntry {
  readonly type: string;
  readonly name: string;
  readonly actions: string[];
}

interface Claims {
  readonly iss: string;
  readonly sub: string;
  readonly aud: string;
  readonly exp: number;
  readonly nbf: number;
  readonly iat: number;
  readonly jti: string;
  readonly access: AccessEntry[];
}

interface Fault {
  readonly status: number;
  remaining: number;
  readonly match: RegExp;
}

export const SERVICE = 'fake-registry';
const ISSUER = 'fake-token-server';
const TOKEN_SECONDS = 300;
const NAME = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*';
const UPLOADS_ROUTE = new RegExp(`^/v2/(${NAME})/blobs/uploads/([^/]*)$`);
const ERROR_CODES: Record<number, string> = {
  401: 'UNAUTHORIZED',
  403: 'DENIED',
  404: 'NAME_UNKNOWN',
  429: 'TOOMANYREQUESTS',
};

export class FakeTokenRegistry {
  /** Every request, in arrival order. */
  readonly requests: RecordedRequest[] = [];
  /** Every token the token endpoint handed out. */
  readonly issuedTokens: string[] = [];
  /** Accept requests and never answer them. */
  hang = false;
  basicAuthMode: boolean;

  private readonly server: Server;
  private readonly key = randomBytes(32);
  private readonly users = new Map<string, User>();
  private readonly opaque = new Map<string, Claims>();
  private readonly uploads = new Map<string, { name: string; open: boolean }>();
  private readonly faults: Fault[] = [];
  private readonly projects: ReadonlySet<string> | undefined;
  private readonly opaqueTokens: boolean;
  private readonly echoAuthorization: boolean;

  private constructor(options: FakeTokenRegistryOptions) {
    this.basicAuthMode = options.basicAuthMode ?? false;
    this.echoAuthorization = options.echoAuthorization ?? false;
    this.opaqueTokens = options.opaqueTokens ?? false;
    this.projects = options.projects === undefined ? undefined : new Set(options.projects);
    this.server = createServer((request, response) => this.handle(request, response));
  }

  static async start(options: FakeTokenRegistryOptions = {}): Promise<FakeTokenRegistry> {
    const registry = new FakeTokenRegistry(options);
    await new Promise<void>((done) => registry.server.listen(0, '127.0.0.1', done));
    return registry;
  }

  /** `127.0.0.1:<port>`, the registry host kiln is given. */
  get address(): string {
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  get url(): string {
    return `http://${this.address}`;
  }

  get realm(): string {
    return `${this.url}/token`;
  }

  /** A user and the actions it has per repository, e.g. `{ 'team/app': ['pull', 'push'] }`. */
  addUser(name: string, password: string, access: Record<string, readonly Action[]>): void {
    this.users.set(name, { password, access });
  }

  /** The next `count` requests whose `METHOD /path` matches `match` get `status`. */
  failNext(status: number, count = 1, match: RegExp = /./): void {
    this.faults.push({ status, remaining: count, match });
  }

  /** Uploads started and not cancelled. */
  openUploads(): { name: string; uuid: string }[] {
    return [...this.uploads]
      .filter(([, upload]) => upload.open)
      .map(([uuid, upload]) => ({ name: upload.name, uuid }));
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((done) => this.server.close(() => done()));
    this.server.closeAllConnections();
    await closed;
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const url = new URL(request.url ?? '/', this.url);
    const method = request.method ?? 'GET';
    this.requests.push({
      method,
      path: url.pathname,
      query: url.searchParams,
      headers: request.headers,
    });
    if (this.hang) return;
    response.setHeader('Docker-Distribution-Api-Version', 'registry/2.0');
    const fault = this.faults.find(
      (f) => f.remaining > 0 && f.match.test(`${method} ${url.pathname}`),
    );
    if (fault !== undefined) {
      fault.remaining -= 1;
      sendErrors(response, fault.status, ERROR_CODES[fault.status] ?? 'UNKNOWN', 'injected fault');
      return;
    }
    if (url.pathname === '/token' && method === 'GET' && !this.basicAuthMode) {
      this.token(request, url, response);
    } else if (url.pathname === '/v2/' && method === 'GET') {
      this.base(request, response);
    } else {
      const route = UPLOADS_ROUTE.exec(url.pathname);
      if (route === null) {
        response.writeHead(404, { 'Content-Type': 'text/plain' }).end('404 page not found\n');
        return;
      }
      this.uploadRoute(request, response, method, route[1]!, route[2]!);
    }
  }

  private base(request: IncomingMessage, response: ServerResponse): void {
    if (this.authorize(request, response, undefined, [])) {
      response.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    }
  }

  private uploadRoute(
    request: IncomingMessage,
    response: ServerResponse,
    method: string,
    name: string,
    uuid: string,
  ): void {
    if (method === 'POST' && uuid === '') {
      if (!this.authorize(request, response, name, ['pull', 'push'])) return;
      const id = randomUUID();
      this.uploads.set(id, { name, open: true });
      response
        .writeHead(202, {
          Location: `/v2/${name}/blobs/uploads/${id}`,
          'Docker-Upload-UUID': id,
          Range: '0-0',
          'Content-Length': '0',
        })
        .end();
    } else if (method === 'DELETE' && uuid !== '') {
      if (!this.authorize(request, response, name, ['delete'])) return;
      const upload = this.uploads.get(uuid);
      if (upload === undefined || !upload.open || upload.name !== name) {
        sendErrors(response, 404, 'BLOB_UPLOAD_UNKNOWN', 'blob upload unknown to registry');
        return;
      }
      upload.open = false;
      response.writeHead(204).end();
    } else {
      sendErrors(response, 405, 'UNSUPPORTED', 'The operation is unsupported.');
    }
  }

  /**
   * True when the request may do `actions` on repository `name` (none: the /v2/ base); otherwise
   * writes the refusal the real registry writes and returns false.
   */
  private authorize(
    request: IncomingMessage,
    response: ServerResponse,
    name: string | undefined,
    actions: string[],
  ): boolean {
    const authorization = request.headers.authorization ?? '';
    if (this.basicAuthMode) return this.authorizeBasic(authorization, response, name, actions);

    const scope = name === undefined ? undefined : `repository:${name}:${actions.join(',')}`;
    const [scheme = '', token = ''] = authorization.split(' ', 2);
    if (scheme.toLowerCase() !== 'bearer' || token === '') {
      this.challenge(response, scope, undefined);
      return false;
    }
    const claims = this.verify(token);
    if (claims === undefined) {
      this.challenge(response, scope, 'invalid_token');
      return false;
    }
    if (name === undefined) return true;
    const project = name.split('/')[0]!;
    if (this.projects !== undefined && !this.projects.has(project)) {
      // Harbor's v2auth middleware: the project lookup fails before any scope check.
      response.setHeader('WWW-Authenticate', '');
      sendErrors(response, 401, 'UNAUTHORIZED', `project ${project} not found`);
      return false;
    }
    const granted = claims.access
      .filter((entry) => entry.type === 'repository' && entry.name === name)
      .flatMap((entry) => entry.actions);
    if (!actions.every((action) => granted.includes(action))) {
      this.challenge(response, scope, 'insufficient_scope');
      return false;
    }
    return true;
  }

  private authorizeBasic(
    authorization: string,
    response: ServerResponse,
    name: string | undefined,
    actions: string[],
  ): boolean {
    const user = this.basicUser(authorization);
    if (user === undefined) {
      response.setHeader('WWW-Authenticate', `Basic realm="${SERVICE}"`);
      sendErrors(
        response,
        401,
        'UNAUTHORIZED',
        this.echo('authentication required', authorization),
      );
      return false;
    }
    if (name === undefined) return true;
    const granted = user.access[name] ?? [];
    if (!actions.every((action) => granted.includes(action))) {
      sendErrors(
        response,
        403,
        'DENIED',
        this.echo('requested access to the resource is denied', authorization),
      );
      return false;
    }
    return true;
  }

  private echo(message: string, authorization: string): string {
    return this.echoAuthorization && authorization !== ''
      ? `${message} for ${authorization}`
      : message;
  }

  private challenge(response: ServerResponse, scope?: string, error?: string): void {
    let header = `Bearer realm="${this.realm}",service="${SERVICE}"`;
    if (scope !== undefined) header += `,scope="${scope}"`;
    if (error !== undefined) header += `,error="${error}"`;
    response.setHeader('WWW-Authenticate', header);
    sendErrors(response, 401, 'UNAUTHORIZED', 'authentication required');
  }

  private token(request: IncomingMessage, url: URL, response: ServerResponse): void {
    if (url.searchParams.get('service') !== SERVICE) {
      sendJson(response, 400, { details: 'unknown service' });
      return;
    }
    let subject = '';
    let user: User | undefined;
    if (request.headers.authorization !== undefined) {
      const found = this.basicUser(request.headers.authorization);
      if (found === undefined) {
        sendJson(response, 401, { details: 'incorrect username or password' });
        return;
      }
      [subject, user] = [found.name, found];
    }
    const access = url.searchParams.getAll('scope').flatMap((scope) => {
      const entry = parseScope(scope);
      return entry === undefined ? [] : [this.grant(entry, user)];
    });
    const now = Math.floor(Date.now() / 1000);
    const claims: Claims = {
      iss: ISSUER,
      sub: subject,
      aud: SERVICE,
      exp: now + TOKEN_SECONDS,
      nbf: now - 1,
      iat: now,
      jti: randomUUID(),
      access,
    };
    const token = this.sign(claims);
    this.issuedTokens.push(token);
    sendJson(response, 200, {
      token,
      access_token: token,
      expires_in: TOKEN_SECONDS,
      issued_at: new Date(now * 1000).toISOString(),
    });
  }

  /** The requested actions the user holds (anonymous users hold none). */
  private grant(requested: AccessEntry, user: User | undefined): AccessEntry {
    const project = requested.name.split('/')[0]!;
    const exists = this.projects === undefined || this.projects.has(project);
    const held = exists && user !== undefined ? (user.access[requested.name] ?? []) : [];
    return { ...requested, actions: requested.actions.filter((a) => held.includes(a)) };
  }

  private basicUser(authorization: string): (User & { name: string }) | undefined {
    const [scheme = '', encoded = ''] = authorization.split(' ', 2);
    if (scheme.toLowerCase() !== 'basic') return undefined;
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon === -1) return undefined;
    const name = decoded.slice(0, colon);
    const user = this.users.get(name);
    if (user === undefined || !sameText(user.password, decoded.slice(colon + 1))) return undefined;
    return { ...user, name };
  }

  private sign(claims: Claims): string {
    if (this.opaqueTokens) {
      const token = randomBytes(24).toString('hex');
      this.opaque.set(token, claims);
      return token;
    }
    const header = base64url({ typ: 'JWT', alg: 'HS256', kid: 'fake' });
    const payload = base64url(claims);
    return `${header}.${payload}.${this.mac(`${header}.${payload}`)}`;
  }

  /** The claims of a token this server issued and that is still valid, else undefined. */
  private verify(token: string): Claims | undefined {
    let claims: Claims | undefined;
    if (this.opaqueTokens) {
      claims = this.opaque.get(token);
    } else {
      const [header = '', payload = '', signature = ''] = token.split('.');
      if (!sameText(this.mac(`${header}.${payload}`), signature)) return undefined;
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Claims;
    }
    const now = Math.floor(Date.now() / 1000);
    if (claims === undefined || claims.iss !== ISSUER || claims.aud !== SERVICE) return undefined;
    return claims.nbf <= now && now < claims.exp ? claims : undefined;
  }

  private mac(text: string): string {
    return createHmac('sha256', this.key).update(text).digest('base64url');
  }
}

/** `repository:<name>:<actions>` as the token spec writes a scope. */
function parseScope(scope: string): AccessEntry | undefined {
  const first = scope.indexOf(':');
  const last = scope.lastIndexOf(':');
  if (first === -1 || first === last) return undefined;
  return {
    type: scope.slice(0, first),
    name: scope.slice(first + 1, last),
    actions: scope.slice(last + 1).split(','),
  };
}

function sendErrors(response: ServerResponse, status: number, code: string, message: string): void {
  sendJson(response, status, { errors: [{ code, message, detail: null }] });
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(body));
}

function base64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function sameText(a: string, b: string): boolean {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
}
