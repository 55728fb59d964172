import { Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { ForbiddenError, InvalidRequestError, UnauthorizedError } from '../common/errors.js';
import { isUuid, NIL_UUID } from '../common/formats.js';
import { KilnConfig } from '../config/config.js';
import { JWT_ALGORITHM, JWT_CLOCK_TOLERANCE_SECONDS } from './jwt.constants.js';
import { MembershipsRepository } from './memberships.repository.js';
import { type Permission, permissionsOf } from './permissions.js';
import type { TenantContext } from './tenant-context.js';

export interface VerifiedToken {
  readonly userId: string;
  /** When the token stops being accepted (exp + the clock tolerance). */
  readonly expiresAt: Date;
}

/** The claims every kiln access token must carry; anything else is not a kiln token. */
export function subjectOf(payload: Record<string, unknown>): VerifiedToken | undefined {
  const { sub, exp } = payload;
  if (typeof exp !== 'number' || typeof sub !== 'string' || !isUuid(sub)) return undefined;
  return {
    userId: sub.toLowerCase(),
    expiresAt: new Date((exp + JWT_CLOCK_TOLERANCE_SECONDS) * 1000),
  };
}

/**
 * The tenant and permission checks shared by the HTTP guard and the WebSocket upgrade: the
 * X-Tenant-ID must be a non-nil UUID (400), the user a member of that tenant (403), and the
 * member's role must grant the permission (403).
 */
@Injectable()
export class Authorizer {
  constructor(
    private readonly jwt: JwtService,
    private readonly memberships: MembershipsRepository,
    private readonly config: KilnConfig,
  ) {}

  /** Verifies a bearer token the way the HTTP strategy does (HS256 only, iss, aud, exp). */
  async verifyToken(token: string): Promise<VerifiedToken> {
    let payload: Record<string, unknown>;
    try {
      payload = await this.jwt.verifyAsync<Record<string, unknown>>(token, {
        algorithms: [JWT_ALGORITHM],
        issuer: this.config.jwtIssuer,
        audience: this.config.jwtAudience,
        clockTolerance: JWT_CLOCK_TOLERANCE_SECONDS,
      });
    } catch {
      throw new UnauthorizedError('Invalid or expired access token');
    }
    const verified = subjectOf(payload);
    if (verified === undefined) throw new UnauthorizedError('Invalid access token');
    return verified;
  }

  async authorizeMember(
    userId: string,
    tenantId: string,
    permission: Permission,
  ): Promise<TenantContext> {
    const role = await this.memberships.roleOf(tenantId, userId);
    if (role === undefined) throw new ForbiddenError('Not a member of this tenant');
    const permissions = permissionsOf(role);
    if (!permissions.includes(permission)) {
      throw new ForbiddenError(`Your role in this tenant lacks the permission ${permission}`);
    }
    return { userId, tenantId, role, permissions };
  }
}

export function parseTenantHeader(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '') {
    throw new InvalidRequestError('The X-Tenant-ID header is required', {
      'X-Tenant-ID': 'required',
    });
  }
  const value = raw.trim().toLowerCase();
  if (!isUuid(value) || value === NIL_UUID) {
    throw new InvalidRequestError('X-Tenant-ID must be a tenant UUID (not the nil UUID)', {
      'X-Tenant-ID': 'must be a non-nil UUID',
    });
  }
  return value;
}
