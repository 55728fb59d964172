import { type ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard as PassportAuthGuard } from '@nestjs/passport';
import type { Request } from 'express';
import { ForbiddenError, UnauthorizedError } from '../common/errors.js';
import { Authorizer } from './authorizer.js';
import { isSystemPermission, isUserPermission, type Permission } from './permissions.js';
import { PERMISSION_KEY, PUBLIC_KEY } from './require-permission.decorator.js';
import type { AuthenticatedUser, KilnRequest } from './tenant-context.js';

/**
 * The global guard. In order: a route must be @Public or declare a permission (default deny);
 * a valid bearer token (verified by ApiRateLimitMiddleware on /api/v1, else passport-jwt's
 * JwtStrategy) whose user still exists and is enabled (401); for a system permission, an
 * installation administrator (403); then, unless the permission is a user or a system permission
 * (no tenant, X-Tenant-ID ignored),
 * an X-Tenant-ID that is a non-nil UUID (400); membership of that tenant (403); the route's
 * permission in the member's role (403). Rate limits are counted before it, by
 * ApiRateLimitMiddleware.
 */
@Injectable()
export class AuthGuard extends PassportAuthGuard('jwt') {
  constructor(
    private readonly reflector: Reflector,
    private readonly authorizer: Authorizer,
  ) {
    super();
  }

  override async canActivate(context: ExecutionContext): Promise<boolean> {
    if (context.getType() !== 'http') return false;
    const request = context.switchToHttp().getRequest<Request & KilnRequest>();
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets) === true) return true;
    const permission = this.reflector.getAllAndOverride<Permission | undefined>(
      PERMISSION_KEY,
      targets,
    );
    if (permission === undefined) throw new ForbiddenError('This route declares no permission');

    // On /api/v1 ApiRateLimitMiddleware has verified the token with the same key and rules and
    // set the user; passport checks the others, and words the 401 of a missing or refused token.
    if (request.user === undefined) await super.canActivate(context);
    const caller = request.user!;
    if (isUserPermission(permission)) await this.authorizer.authorizeUser(caller, permission);
    else if (isSystemPermission(permission))
      await this.authorizer.authorizeSystem(caller, permission);
    else
      request.tenant = await this.authorizer.authorize(
        caller,
        request.headers['x-tenant-id'],
        permission,
      );
    return true;
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
