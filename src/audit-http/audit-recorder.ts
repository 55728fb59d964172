import { Inject, Injectable } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from 'pino';
import type { AuditActor, AuditTarget } from '../audit/audit-event.js';
import { bounded, MAX_EMAIL, MAX_USER_AGENT, resultOfStatus } from '../audit/audit-event.js';
import { AuditLog } from '../audit/audit-log.js';
import type { KilnRequest } from '../auth/tenant-context.js';
import { UsersRepository } from '../auth/users.repository.js';
import { LOGGER } from '../common/logger.js';
import { REQUEST_ID_HEADER } from '../common/request-id.middleware.js';
import { isUuid } from '../config/formats.js';
import {
  AUDITED_METHODS,
  AuditRouteMatcher,
  type MatchedRoute,
  UNLISTED_ACTION,
} from './audit-actions.js';

/** Where the request keeps what its handler answered that the audit event may name. */
export const AUDIT_STATE = Symbol('kiln.audit');

/**
 * What AuditResultInterceptor saw of a handler's answer: ids only, never the answer. By field
 * name: `id`, and each route's `createdField` (a member's `user_id`, a key's `key_id`).
 */
export interface AuditState {
  created?: Record<string, string>;
}

type AuditedRequest = Request & KilnRequest & { [AUDIT_STATE]?: AuditState };

const API_PATH = '/api/v1/';
// An attempted login's e-mail is kept only when it looks like one: a password typed into the
// e-mail field must not land in the audit log.
const EMAIL_SHAPE = /^[^\s@]{1,200}@[^\s@]{1,200}$/;
const MAX_ADDRESS = 64;

/**
 * Records every state-changing API call (POST, PUT, PATCH and DELETE under /api/v1) as one audit
 * event (docs/adr/0049-audit-log.md), whatever answered it: the handler, the guard (401, 403),
 * the rate limit (429), validation (400) or a fault (500). Installed before every other API
 * middleware. The event is recorded when the answer is complete and before its last byte leaves,
 * so a client that has its answer finds the event in GET /api/v1/audit.
 */
@Injectable()
export class AuditRecorder {
  private readonly matcher = new AuditRouteMatcher();

  constructor(
    private readonly audit: AuditLog,
    private readonly users: UsersRepository,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** The Express middleware (app.factory.ts installs it ahead of the API's own). */
  readonly middleware = (req: Request, res: Response, next: NextFunction): void => {
    if (!AUDITED_METHODS.has(req.method) || !req.path.startsWith(API_PATH)) {
      next();
      return;
    }
    const request = req as AuditedRequest;
    request[AUDIT_STATE] = {};
    // Taken now: a middleware mounted on a path (the rate limit's) rewrites req.url while it
    // runs, and leaves it rewritten when it throws.
    const path = req.path;
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    let ending = false;
    res.end = ((...args: unknown[]) => {
      if (ending) return end(...args);
      ending = true;
      void this.record(request, path, res).finally(() => end(...args));
      return res;
    }) as Response['end'];
    next();
  };

  private async record(req: AuditedRequest, path: string, res: Response): Promise<void> {
    try {
      const matched = this.routeOf(req, path);
      if (matched === undefined) return;
      const { audit, params } = matched;
      const status = res.statusCode;
      const result = resultOfStatus(status);
      const state = req[AUDIT_STATE] ?? {};
      const actor = await this.actorOf(req, matched, result === 'success');
      const targetIdOf = (): string | null => {
        if (audit.self) return actor.userId;
        if (audit.param !== undefined) return params[audit.param] ?? null;
        if (result !== 'success') return null;
        return state.created?.[audit.createdField ?? 'id'] ?? null;
      };
      const target: AuditTarget | null =
        audit.target === null ? null : { type: audit.target, id: targetIdOf() };
      await this.audit.record({
        actor,
        tenantId: this.tenantOf(req, matched, target),
        action: audit.action,
        target,
        result,
        status,
        requestId: bounded(res.getHeader(REQUEST_ID_HEADER), 128),
        sourceAddress: bounded(req.ip, MAX_ADDRESS),
        userAgent: bounded(req.headers['user-agent'], MAX_USER_AGENT),
      });
    } catch (error) {
      this.logger.error(
        { err: error, method: req.method, path },
        'audit: a state-changing request could not be recorded',
      );
    }
  }

  /** The audited route, or for a route missing from AUDIT_ROUTES, what Express matched. */
  private routeOf(req: AuditedRequest, path: string): MatchedRoute | undefined {
    const matched = this.matcher.match(req.method, path);
    if (matched !== undefined) return matched;
    const template: unknown = (req.route as { path?: unknown } | undefined)?.path;
    if (typeof template !== 'string') return undefined;
    const route = `${req.method} ${req.baseUrl}${template}`;
    return {
      route,
      audit: { action: UNLISTED_ACTION, target: 'route', param: 'route' },
      params: { route },
    };
  }

  private async actorOf(
    req: AuditedRequest,
    { audit }: MatchedRoute,
    succeeded: boolean,
  ): Promise<AuditActor> {
    const nobody: AuditActor = { type: 'anonymous', userId: null, email: null, apiTokenId: null };
    if (audit.buildPod) return { ...nobody, type: 'upload_token' };
    if (audit.action === 'auth.login') {
      const tried: unknown = (req.body as { email?: unknown } | undefined)?.email;
      const email =
        typeof tried === 'string' && EMAIL_SHAPE.test(tried.trim())
          ? bounded(tried.trim().toLowerCase(), MAX_EMAIL)
          : null;
      if (!succeeded || email === null) return { ...nobody, email };
      const user = await this.users.findByEmail(email);
      return { ...nobody, type: 'user', userId: user?.id ?? null, email };
    }
    const caller = req.user;
    if (caller === undefined) return nobody;
    const user = await this.users.findById(caller.userId);
    return {
      type: caller.apiToken === undefined ? 'user' : 'api_token',
      userId: caller.userId,
      email: user?.email ?? null,
      apiTokenId: caller.apiToken?.id ?? null,
    };
  }

  /**
   * The tenant the call acted in: the one the guard let it act in; else a tenant it targets (an
   * installation administrator's change); else an API token's own; else, for a known caller
   * refused in a tenant (a role without the permission, not a member), the X-Tenant-ID it named.
   * An unknown caller's X-Tenant-ID is not recorded: anyone could write into a tenant's log.
   */
  private tenantOf(
    req: AuditedRequest,
    { audit }: MatchedRoute,
    target: AuditTarget | null,
  ): string | null {
    if (req.tenant !== undefined) return req.tenant.tenantId;
    if (audit.tenantTarget)
      return target?.id !== undefined && target.id !== null && isUuid(target.id)
        ? target.id.toLowerCase()
        : null;
    if (audit.installation || audit.buildPod || req.user === undefined) return null;
    if (req.user.apiToken !== undefined) return req.user.apiToken.tenantId;
    const named = req.headers['x-tenant-id'];
    return typeof named === 'string' && isUuid(named.trim()) ? named.trim().toLowerCase() : null;
  }
}
