import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { type WebSocket, WebSocketServer } from 'ws';
import { Authorizer, bearerTokenOf } from '../auth/authorizer.js';
import { errorResponseOf, rawErrorResponse } from '../common/error-body.js';
import { retryAfterSeconds } from '../common/rate-limit-headers.js';
import {
  ForbiddenError,
  InvalidRequestError,
  KilnError,
  NotFoundError,
  RateLimitedError,
  UnavailableError,
  UnauthorizedError,
} from '../common/errors.js';
import { isUuid } from '../config/formats.js';
import { toKilnError } from '../common/to-kiln-error.js';
import { LOGGER } from '../common/logger.js';
import { MAX_INT4 } from '../common/validators.js';
import { requestIdFrom } from '../common/request-context.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { LogHub } from '../logs/log-hub.js';
import { Metrics } from '../metrics/metrics.js';
import { LogStreamSession, type SessionEnd } from './log-stream.session.js';

const ROUTE = /^\/api\/v1\/builds\/([^/]+)\/logs\/stream$/;
/** The one subprotocol kiln speaks; a browser offers it beside its `bearer.<token>` entry. */
export const LOG_STREAM_PROTOCOL = 'kiln.logs.v1';
const BEARER_PROTOCOL = 'bearer.';
const TENANT_PROTOCOL = 'tenant.';
const MAX_INBOUND_BYTES = 64 * 1024;
/** The page scheme behind an upgrade's X-Forwarded-Proto of `ws`/`wss` (Traefik writes these). */
const WEBSOCKET_SCHEMES = new Map([
  ['ws', 'http'],
  ['wss', 'https'],
]);

interface Upgrade {
  readonly buildId: string;
  readonly fromSeq: number;
  readonly userId: string;
  readonly expiresAt: Date;
  /** The bearer token and X-Tenant-ID the stream was opened with, to check them again. */
  readonly token: string;
  readonly tenant: unknown;
}

/**
 * WebSocket GET /api/v1/builds/{id}/logs/stream, on Nest's own HTTP server. Every check happens
 * during the HTTP upgrade, before any 101: a refusal is a plain HTTP response with the Error body
 * and the spec's status (400, 401, 403, 404; 429 past the per-user connection limit).
 * Credentials: `Authorization: Bearer` and `X-Tenant-ID` headers, or, for browsers, subprotocol
 * entries `bearer.<token>` and `tenant.<uuid>` beside `kiln.logs.v1` (only that one is echoed).
 * See docs/adr/0007-log-store-and-stream.md.
 */
@Injectable()
export class LogStreamServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_INBOUND_BYTES,
    perMessageDeflate: false,
    handleProtocols: (protocols) =>
      protocols.has(LOG_STREAM_PROTOCOL) ? LOG_STREAM_PROTOCOL : false,
  });
  private readonly perUser: StreamSlots;
  private readonly sessions = new Set<Promise<void>>();
  private closing = false;

  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly authorizer: Authorizer,
    private readonly lifecycle: BuildLifecycle,
    private readonly hub: LogHub,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
    private readonly metrics: Metrics,
  ) {
    this.perUser = new StreamSlots(config.wsMaxConnectionsPerUser);
  }

  onApplicationBootstrap(): void {
    // Handshakes the ws library refuses (bad Sec-WebSocket-Version or -Key) get the Error body
    // like every other refusal, and the version kiln speaks (RFC 6455 section 4.4).
    this.wss.on('wsClientError', (error: Error, socket: Duplex, request: IncomingMessage) => {
      this.refuse(
        socket,
        requestIdFrom(request.headers['x-request-id']),
        new InvalidRequestError(`Invalid WebSocket handshake: ${error.message}`),
        ['Sec-WebSocket-Version: 13'],
      );
    });
    const server = this.adapterHost.httpAdapter.getHttpServer() as Server;
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      const requestId = requestIdFrom(request.headers['x-request-id']);
      const path = new URL(request.url ?? '/', 'http://kiln.invalid').pathname;
      const match = ROUTE.exec(path);
      if (this.closing) {
        return this.refuse(
          socket,
          requestId,
          new UnavailableError('kiln is shutting down; connect again shortly'),
        );
      }
      if (match === null) {
        return this.refuse(socket, requestId, new NotFoundError(`No WebSocket route for ${path}`));
      }
      this.authorize(request, match[1]!).then(
        (upgrade) => this.accept(request, socket, head, upgrade, requestId),
        (error: unknown) => {
          const known = toKilnError(error, { method: 'GET', originalUrl: path });
          if (!(error instanceof KilnError)) {
            this.logger.error(
              { err: error, trace_id: requestId, path },
              'log stream upgrade failed',
            );
          }
          this.refuse(socket, requestId, known);
        },
      );
    });
  }

  private async authorize(request: IncomingMessage, rawBuildId: string): Promise<Upgrade> {
    const origin = request.headers.origin;
    if (
      origin !== undefined &&
      origin !== ownOriginOf(request, this.config.trustProxyHops) &&
      !this.config.wsAllowedOrigins.includes(origin)
    ) {
      throw new ForbiddenError(`Origin ${origin} may not open log streams`);
    }
    const protocols = (request.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim())
      .filter((p) => p !== '');
    const token =
      bearerTokenOf(request.headers.authorization) ??
      protocols.find((p) => p.startsWith(BEARER_PROTOCOL))?.slice(BEARER_PROTOCOL.length);
    if (token === undefined || token === '')
      throw new UnauthorizedError('A bearer access token is required');
    const verified = await this.authorizer.verifyToken(token);
    const tenant =
      request.headers['x-tenant-id'] ??
      protocols.find((p) => p.startsWith(TENANT_PROTOCOL))?.slice(TENANT_PROTOCOL.length);
    const { tenantId } = await this.authorizer.authorize(verified, tenant, 'build:read');
    if (!isUuid(rawBuildId))
      throw new InvalidRequestError('id must be a UUID', { id: 'must be a UUID' });
    const buildId = rawBuildId.toLowerCase();
    const offset = new URL(request.url ?? '/', 'http://kiln.invalid').searchParams.get('offset');
    // Line seqs are Postgres `integer`s: a larger offset names no line and must not reach a query.
    const fromSeq = offset === null ? 0 : Number(offset);
    if (offset !== null && (!/^\d+$/.test(offset) || fromSeq > MAX_INT4)) {
      throw new InvalidRequestError(`offset must be an integer from 0 to ${MAX_INT4}`, {
        offset: `must be an integer from 0 to ${MAX_INT4}`,
      });
    }
    await this.lifecycle.get(tenantId, buildId);
    return {
      buildId,
      fromSeq,
      userId: verified.userId,
      expiresAt: verified.expiresAt,
      token,
      tenant,
    };
  }

  /**
   * Synchronous from the limit check to the upgrade, so parallel upgrades cannot all pass the
   * check. The reserved slot is released exactly once, on whichever comes first: the socket
   * closing (a client that hung up, or a handshake the ws library refused: its callback then
   * never runs) or the session ending.
   */
  private accept(
    request: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    upgrade: Upgrade,
    requestId: string,
  ): void {
    if (socket.destroyed || !socket.readable || !socket.writable) {
      socket.destroy(); // the client hung up while its upgrade was being checked
      return;
    }
    if (this.closing) {
      this.refuse(
        socket,
        requestId,
        new UnavailableError('kiln is shutting down; connect again shortly'),
      );
      return;
    }
    const release = this.perUser.reserve(upgrade.userId);
    if (release === undefined) {
      this.refuse(
        socket,
        requestId,
        new RateLimitedError('Too many open log streams for this user', {
          limit: this.config.wsMaxConnectionsPerUser,
          remaining: 0,
          resetAt: new Date(Date.now() + 1000),
        }),
      );
      return;
    }
    socket.once('close', release);
    try {
      this.wss.handleUpgrade(request, socket, head, (ws: WebSocket) =>
        this.stream(ws, socket, upgrade, release),
      );
    } catch (error) {
      release();
      socket.destroy();
      this.logger.error({ err: error, trace_id: requestId }, 'log stream upgrade failed');
    }
  }

  private stream(ws: WebSocket, socket: Duplex, upgrade: Upgrade, release: () => void): void {
    const session = new LogStreamSession(
      ws,
      socket,
      upgrade.buildId,
      upgrade.fromSeq,
      {
        hub: this.hub,
        findBuild: (id) => this.lifecycle.find(id),
        logger: this.logger,
        watchAccess: (changed) => this.authorizer.watchAccess(upgrade.userId, changed),
        stillAllowed: () => this.stillAllowed(upgrade),
      },
      {
        batchSize: 500,
        highWaterMark: 1024 * 1024,
        stallMs: this.config.wsStallMs,
        heartbeatMs: this.config.wsHeartbeatMs,
        expiresAt: upgrade.expiresAt,
      },
    );
    this.metrics.add('kiln_log_streams_open', {}, 1);
    const running: Promise<void> = session.run().then(
      (end) => this.ended(running, release, end),
      () => this.ended(running, release, 'error'),
    );
    this.sessions.add(running);
  }

  /** A session is over: its slot is free, and it is counted with why it ended. */
  private ended(running: Promise<void>, release: () => void, end: SessionEnd): void {
    this.sessions.delete(running);
    release();
    this.metrics.add('kiln_log_streams_open', {}, -1);
    // Closed by the client after kiln said it shuts down (1001): the shutdown ended it.
    const reason = end === 'client' && this.closing ? 'shutdown' : end;
    this.metrics.inc('kiln_log_stream_sessions_closed_total', { reason });
  }

  /** Answers an upgrade with an error and no 101, counted as a refused session. */
  private refuse(
    socket: Duplex,
    requestId: string,
    error: KilnError,
    headers: readonly string[] = [],
  ): void {
    this.metrics.inc('kiln_log_stream_sessions_closed_total', { reason: 'refused' });
    refuse(socket, requestId, error, headers);
  }

  /**
   * Whether the stream's caller may still read its build: its token and X-Tenant-ID checked again
   * as at the upgrade. A check that cannot be made (the database away) keeps the stream open.
   */
  private async stillAllowed(upgrade: Upgrade): Promise<boolean> {
    try {
      const verified = await this.authorizer.verifyToken(upgrade.token);
      await this.authorizer.authorize(verified, upgrade.tenant, 'build:read');
      return true;
    } catch (error) {
      if (error instanceof UnauthorizedError || error instanceof ForbiddenError) return false;
      this.logger.warn(
        { err: error, build_id: upgrade.buildId },
        "could not check a log stream's access again; it stays open",
      );
      return true;
    }
  }

  /**
   * Closes every stream (1001: clients reconnect elsewhere with ?offset) and refuses new ones.
   * Called first on shutdown: upgraded sockets would otherwise keep the HTTP server open.
   */
  async closeAll(): Promise<void> {
    this.closing = true;
    for (const client of this.wss.clients)
      client.close(1001, 'server shutting down; reconnect with ?offset');
    await Promise.race([
      Promise.allSettled([...this.sessions]),
      new Promise((done) => setTimeout(done, 2_000).unref()),
    ]);
    for (const client of this.wss.clients) client.terminate();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.closeAll();
    this.wss.close();
  }
}

/**
 * The origin of a page kiln itself served to this client (the console at `/`): the scheme the
 * client reached kiln by, and the Host it asked for. The scheme is the connection's (https on TLS,
 * else http) unless kiln trusts proxies (KILN_TRUST_PROXY_HOPS, as for X-Forwarded-For): then the
 * X-Forwarded-Proto entry the outermost trusted proxy wrote. Undefined when the Host is missing or
 * is not a bare host[:port], or the scheme is neither http nor https: no browser Origin matches.
 */
function ownOriginOf(request: IncomingMessage, trustProxyHops: number): string | undefined {
  const { host } = request.headers;
  if (host === undefined) return undefined;
  const forwarded =
    trustProxyHops > 0
      ? forwardedProtoOf(request.headers['x-forwarded-proto'], trustProxyHops)
      : undefined;
  const scheme = forwarded ?? (request.socket instanceof TLSSocket ? 'https' : 'http');
  if (scheme !== 'http' && scheme !== 'https') return undefined;
  let url: URL;
  try {
    url = new URL(`${scheme}://${host}`);
  } catch {
    return undefined;
  }
  // A Host carrying user info, a path, a query or a fragment names no origin of kiln's.
  return url.href === `${url.origin}/` ? url.origin : undefined;
}

/**
 * Each proxy appends its entry (or replaces the header): counted from the right, as proxy-addr
 * counts X-Forwarded-For hops, the `hops`-th entry is the outermost trusted proxy's, the scheme the
 * client used. Fewer entries than hops: the leftmost. Some proxies (Traefik) write `ws`/`wss` for
 * an upgrade: the page that opened it was http/https.
 */
function forwardedProtoOf(header: string | string[] | undefined, hops: number): string | undefined {
  const entries = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== '');
  const entry = entries[Math.max(0, entries.length - hops)];
  return entry === undefined ? undefined : (WEBSOCKET_SCHEMES.get(entry) ?? entry);
}

/** Answers an upgrade with a plain HTTP error in the spec's Error shape; no 101 is ever sent. */
function refuse(
  socket: Duplex,
  requestId: string,
  error: KilnError,
  headers: readonly string[] = [],
): void {
  // As the ws library does: a client that never closes its side must not hold the socket open.
  socket.once('finish', () => socket.destroy());
  const { status, body } = errorResponseOf(error, requestId);
  const retryAfter =
    error instanceof RateLimitedError ? [`Retry-After: ${retryAfterSeconds(error.rateLimit)}`] : [];
  socket.end(rawErrorResponse(status, body, requestId, [...headers, ...retryAfter]));
}

/** Open log streams per user: a slot is held from its reservation until its release. */
class StreamSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /**
   * One of the user's slots, or undefined when all are taken. The returned function frees it;
   * calling it again does nothing.
   */
  reserve(userId: string): (() => void) | undefined {
    const open = this.open.get(userId) ?? 0;
    if (open >= this.limit) return undefined;
    this.open.set(userId, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(userId) ?? 1) - 1;
      if (left <= 0) this.open.delete(userId);
      else this.open.set(userId, left);
    };
  }
}
