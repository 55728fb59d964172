import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { Role, TenantPermission } from './permissions.js';

/** Who is calling, for which tenant, allowed to do what: set by AuthGuard on every API request. */
export interface TenantContext {
  readonly userId: string;
  readonly tenantId: string;
  readonly role: Role;
  readonly permissions: readonly TenantPermission[];
}

/** What an API token may do: in one tenant, at most these permissions (and its user's role's). */
export interface ApiTokenScope {
  readonly id: string;
  readonly tenantId: string;
  readonly permissions: readonly TenantPermission[];
}

/** The subject of a verified bearer token: an access token (JWT) or an API token. */
export interface AuthenticatedUser {
  readonly userId: string;
  /** An access token's `iat` (seconds): one issued before the password changed is refused. */
  readonly issuedAt?: number;
  /** Set when the bearer is an API token. */
  readonly apiToken?: ApiTokenScope;
}

export interface KilnRequest {
  user?: AuthenticatedUser;
  tenant?: TenantContext;
}

/** Handler parameter: the request's TenantContext (only on routes that declare a tenant permission). */
export const CurrentTenant = createParamDecorator((_data: unknown, ctx: ExecutionContext) => {
  const tenant = ctx.switchToHttp().getRequest<KilnRequest>().tenant;
  if (tenant === undefined) throw new Error('CurrentTenant used on a route without a permission');
  return tenant;
});

/** Handler parameter: the caller, whose token and account AuthGuard checked (any permission). */
export const CurrentUser = createParamDecorator((_data: unknown, ctx: ExecutionContext) => {
  const user = ctx.switchToHttp().getRequest<KilnRequest>().user;
  if (user === undefined) throw new Error('CurrentUser used on a route without a permission');
  return user;
});
