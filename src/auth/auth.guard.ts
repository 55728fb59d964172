import { type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard as PassportAuthGuard } from '@nestjs/passport';
import type { Request, Response } from 'express';
import { ForbiddenError, RateLimitedError, UnauthorizedError } from '../common/errors.js';
import { setRateLimitHeaders } from '../common/rate-limit-headers.js';
import { RateLimitService } from '../ratelimit/rate-limit.service.js';
import { Authorizer, parseTenantHeader } from './authorizer.js';
import type { Permission } from './permissions.js';
import { PERMISSION_KEY, PUBLIC_KEY } from './require-permission.decorator.js';
import type { AuthenticatedUser, KilnRequest } from './tenant-context.js';

const API_PATH = /^\/api\/v1(\/|$)/;

/**
 * The global guard. In order: a route must be @Public or declare a permission (default deny);
 * a valid bearer token (401); an X-Tenant-ID that is a non-nil UUID (400); the caller's rate
 * limit (429); membership of that tenant (403); the route's permission in the member's role (403).
 * Every /api/v1 response carries the X-RateLimit-* headers of the caller's window; callers
 * without a valid token are counted by client address.
 */
@Injectable()
export class AuthGuard extends PassportAuthGuard('jwt') {
  constructor(
    private readonly reflector: Reflector,
    private readonly authorizer: Authorizer,
    private readonly rateLimits: RateLimitService,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return false;
    const request = context.switchToHttp().getRequest<Request & KilnRequest>();
    const response = context.switchToHttp().getResponse<Response>();
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets) === true) {
      if (API_PATH.test(request.path))
        await this.limit(request, response, `ip|${request.ip ?? ''}`);
      return true;
    }
    const permission = this.reflector.getAllAndOverride<Permission | undefined>(
      PERMISSION_KEY,
      targets,
    );
    if (permission === undefined) throw new ForbiddenError('This route declares no permission');

    try {
      await super.canActivate(context);
    } catch (error) {
      if (error instanceof UnauthorizedError)
        await this.limit(request, response, `ip|${request.ip ?? ''}`);
      throw error;
    }
    const userId = request.user!.userId;
    const tenantId = parseTenantHeader(request.headers['x-tenant-id']);
    await this.limit(request, response, `user|${tenantId}|${userId}`);
    request.tenant = await this.authorizer.authorizeMember(userId, tenantId, permission);
    return true;
  }

  private async limit(request: Request, response: Response, caller: string): Promise<void> {
    const decision = await this.rateLimits.consume(
      caller,
      RateLimitService.classOf(request.method),
    );
    if (decision === undefined) return;
    setRateLimitHeaders(response, decision, false);
    if (!decision.allowed)
      throw new RateLimitedError('Too many requests; wait until X-RateLimit-Reset', decision);
  }

  override handleRequest<TUser = AuthenticatedUser>(
    error: unknown,
    user: TUser | false,
    info: unknown,
  ): TUser {
    if (error instanceof UnauthorizedError) throw error;
    if (error !== null && error !== undefined)
      throw new UnauthorizedError('Invalid or expired access token');
    if (user === false || user === undefined || user === null) {
      const missing = info instanceof Error && info.message === 'No auth token';
      throw new UnauthorizedError(
        missing ? 'A bearer access token is required' : 'Invalid or expired access token',
      );
    }
    return user;
  }
}
