import { Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import type { Algorithm } from 'jsonwebtoken';
import { ForbiddenError, InvalidRequestError, UnauthorizedError } from '../common/errors.js';
import { isUuid, NIL_UUID } from '../config/formats.js';
import { KilnConfig } from '../config/config.js';
import { AccessCache } from './access-cache.js';
import { JWT_ALGORITHM, JWT_CLOCK_TOLERANCE_SECONDS } from './jwt.constants.js';
import { API_TOKEN_PREFIX, ApiTokens } from './api-tokens.js';
import type { UserAccess } from './memberships.repository.js';
import {
  permissionsOf,
  type SystemPermission,
  type TenantPermission,
  type UserPermission,
} from './permissions.js';
import type { AuthenticatedUser, TenantContext } from './tenant-context.js';

export interface VerifiedToken extends AuthenticatedUser {
  /** When the token stops being accepted (exp + the clock tolerance, or an API token's expiry). */
  readonly expiresAt: Date;
}

/**
 * The JOSE header parameters kiln's tokens carry. kiln signs with one HMAC key that has no id, so
 * a `kid` names a key kiln does not have; `jku`, `jwk`, `x5u`, `x5c` and the like point at keys
 * kiln never fetches; `crit` lists extensions it does not understand (RFC 7515 4.1.11): all 401.
 */
const TOKEN_HEADER_PARAMETERS = new Set(['alg', 'typ']);
/** `typ` is a media type: case-insensitive, `application/` optional (RFC 7515 4.1.9). */
const JWT_MEDIA_TYPE = /^(application\/)?jwt$/i;

/** The 401 of a valid token whose user was deleted or disabled since it was issued. */
const USER_GONE = "The access token's user no longer exists or is disabled";
/** The 401 of an access token issued before its user changed the password. */
const PASSWORD_CHANGED = 'The password changed after this access token was issued: sign in again';

/** Whether a verified token's header is one kiln issues. */
function isKilnHeader(header: Record<string, unknown>): boolean {
  const { typ } = header;
  return (
    Object.keys(header).every((name) => TOKEN_HEADER_PARAMETERS.has(name)) &&
    (typ === undefined || (typeof typ === 'string' && JWT_MEDIA_TYPE.test(typ)))
  );
}

/** The claims every kiln access token must carry; anything else is not a kiln token. */
function subjectOf(payload: unknown): VerifiedToken | undefined {
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { sub, exp, iat } = payload as Record<string, unknown>;
  if (typeof exp !== 'number' || typeof sub !== 'string' || !isUuid(sub)) return undefined;
  if (typeof iat !== 'number') return undefined;
  return {
    userId: sub.toLowerCase(),
    issuedAt: iat,
    expiresAt: new Date((exp + JWT_CLOCK_TOLERANCE_SECONDS) * 1000),
  };
}

/**
 * What jsonwebtoken checks for every kiln token, with `complete: true` so the header reaches
 * {@link acceptVerifiedToken}. Used by the passport strategy (HTTP guard) and `verifyToken`.
 */
export function tokenVerifyOptions(config: KilnConfig) {
  const algorithms: Algorithm[] = [JWT_ALGORITHM];
  return {
    algorithms,
    issuer: config.jwtIssuer,
    audience: config.jwtAudience,
    clockTolerance: JWT_CLOCK_TOLERANCE_SECONDS,
    complete: true as const,
  };
}

/**
 * The rules a signature-checked token (jsonwebtoken's `complete` result) must also meet: a header
 * kiln issues and the claims of a kiln access token. Throws 401 otherwise.
 */
export function acceptVerifiedToken(verified: unknown): VerifiedToken {
  const { header, payload } = (verified ?? {}) as { header?: unknown; payload?: unknown };
  const subject = subjectOf(payload);
  if (typeof header !== 'object' || header === null || subject === undefined)
    throw new UnauthorizedError('Invalid access token');
  if (!isKilnHeader(header as Record<string, unknown>))
    throw new UnauthorizedError('Invalid access token');
  return subject;
}

/** The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive). */
export function bearerTokenOf(authorization: string | undefined): string | undefined {
  const match = /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  return match?.[1];
}

/**
 * Token, user and tenant checks shared by the HTTP guard, the rate-limit middleware and the
 * WebSocket upgrade, so the three cannot drift apart.
 */
@Injectable()
export class Authorizer {
  constructor(
    private readonly jwt: JwtService,
    private readonly access: AccessCache,
    private readonly apiTokens: ApiTokens,
    private readonly config: KilnConfig,
  ) {}

  /**
   * Accepts exactly the bearer tokens kiln issues. An access token: HS256 signed with kiln's key,
   * `iss`, `aud` and `exp` checked with the clock tolerance, a UUID `sub`, an `iat`, and a header
   * of `alg` and an optional `typ` of JWT. An API token (`kiln_…`): one kiln made, neither revoked
   * nor expired. Anything else is 401.
   */
  async verifyToken(token: string): Promise<VerifiedToken> {
    if (token.startsWith(API_TOKEN_PREFIX)) return this.apiTokens.verify(token);
    let verified: unknown;
    try {
      verified = await this.jwt.verifyAsync(token, tokenVerifyOptions(this.config));
    } catch {
      throw new UnauthorizedError('Invalid or expired access token');
    }
    return acceptVerifiedToken(verified);
  }

  /**
   * For the caller of a verified token, in one query (none while AccessCache holds the answer):
   * the user must still exist and be enabled, and an access token must not be older than its
   * user's last password change (else 401: the token no longer names anyone); the X-Tenant-ID
   * must be a non-nil UUID (400), the user a member of that tenant (403), and the member's role
   * must grant the permission (403). An API token acts in its own tenant (X-Tenant-ID may be left
   * out; another tenant is 403) and needs the permission in its scope as well (403); what the
   * request may do is what both grant.
   */
  async authorize(
    caller: AuthenticatedUser,
    rawTenantId: unknown,
    permission: TenantPermission,
  ): Promise<TenantContext> {
    const scope = caller.apiToken;
    const tenant =
      scope !== undefined && (rawTenantId === undefined || rawTenantId === '')
        ? scope.tenantId
        : tenantIdOf(rawTenantId);
    const access = await this.access.accessOf(
      caller.userId,
      tenant instanceof InvalidRequestError ? null : tenant,
    );
    acceptCaller(caller, access);
    if (tenant instanceof InvalidRequestError) throw tenant;
    if (scope !== undefined && scope.tenantId !== tenant)
      throw new ForbiddenError('This API token acts in another tenant');
    if (access.role === null) throw new ForbiddenError('Not a member of this tenant');
    const held = permissionsOf(access.role);
    const permissions =
      scope === undefined ? held : held.filter((p) => scope.permissions.includes(p));
    if (!held.includes(permission)) {
      throw new ForbiddenError(`Your role in this tenant lacks the permission ${permission}`);
    }
    if (!permissions.includes(permission))
      throw new ForbiddenError(`This API token lacks the permission ${permission}`);
    return { userId: caller.userId, tenantId: tenant, role: access.role, permissions };
  }

  /**
   * Calls `changed` whenever the user's access may have changed (AccessCache.watch); returns
   * what stops it.
   */
  watchAccess(userId: string, changed: () => void): () => void {
    return this.access.watch(userId, changed);
  }

  /**
   * For a route over the caller's own account (a user permission, held by every enabled user):
   * the caller must still be accepted (401, as on every route), answered like `authorize` from
   * AccessCache. No tenant plays a part, whatever X-Tenant-ID says. An API token may list its
   * tenant (`tenant:list`) but never changes its user's account (403).
   */
  async authorizeUser(caller: AuthenticatedUser, permission: UserPermission): Promise<void> {
    acceptCaller(caller, await this.access.accessOf(caller.userId, null));
    if (caller.apiToken !== undefined && permission !== 'tenant:list')
      throw new ForbiddenError(`An API token cannot use ${permission}: sign in as its user`);
  }

  /**
   * For a route over the whole installation (`system:admin`): the caller must still be accepted
   * (401) and be an installation administrator signed in as such, not through an API token
   * (403). No tenant plays a part, whatever X-Tenant-ID says.
   */
  async authorizeSystem(caller: AuthenticatedUser, permission: SystemPermission): Promise<void> {
    const access = await this.access.accessOf(caller.userId, null);
    acceptCaller(caller, access);
    if (caller.apiToken !== undefined)
      throw new ForbiddenError(`An API token cannot use ${permission}: sign in as its user`);
    if (!access.systemAdmin)
      throw new ForbiddenError(
        `This route needs an installation administrator (the permission ${permission})`,
      );
  }
}

/**
 * 401 unless the caller's user still exists and is enabled, and its access token (an API token
 * has no `iat`) was issued no earlier than its password last changed (both to the millisecond).
 */
function acceptCaller(
  caller: AuthenticatedUser,
  access: UserAccess,
): asserts access is NonNullable<UserAccess> {
  if (access === undefined) throw new UnauthorizedError(USER_GONE);
  const changed = access.credentialsChangedAt;
  if (changed !== null && caller.issuedAt !== undefined && caller.issuedAt < changed)
    throw new UnauthorizedError(PASSWORD_CHANGED);
}

/** The X-Tenant-ID as a lower-case non-nil UUID, or the 400 to answer. */
function tenantIdOf(raw: unknown): string | InvalidRequestError {
  if (typeof raw !== 'string' || raw.trim() === '') {
    return new InvalidRequestError('The X-Tenant-ID header is required', {
      'X-Tenant-ID': 'required',
    });
  }
  const value = raw.trim().toLowerCase();
  if (!isUuid(value) || value === NIL_UUID) {
    return new InvalidRequestError('X-Tenant-ID must be a tenant UUID (not the nil UUID)', {
      'X-Tenant-ID': 'must be a non-nil UUID',
    });
  }
  return value;
}
