import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { KilnConfig } from '../config/config.js';
import { UnauthorizedError } from '../common/errors.js';
import type { AuthenticatedUser } from './tenant-context.js';
import { isUuid } from '../common/formats.js';

export const JWT_SECRET = Symbol('JWT_SECRET');
export const JWT_ALGORITHM = 'HS256';
/** Clock skew tolerated on exp/nbf (RFC 7519 4.1.4 allows "some small leeway"). */
export const JWT_CLOCK_TOLERANCE_SECONDS = 60;

/**
 * Verifies bearer tokens: HS256 only (no `none`, no algorithm confusion), issuer and audience
 * checked, `exp` required.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(config: KilnConfig, @Inject(JWT_SECRET) secret: string) {
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      secretOrKey: secret,
      algorithms: [JWT_ALGORITHM],
      issuer: config.jwtIssuer,
      audience: config.jwtAudience,
      ignoreExpiration: false,
      jsonWebTokenOptions: { clockTolerance: JWT_CLOCK_TOLERANCE_SECONDS },
    });
  }

  validate(payload: Record<string, unknown>): AuthenticatedUser {
    const { sub, exp } = payload;
    if (typeof exp !== 'number' || typeof sub !== 'string' || !isUuid(sub)) {
      throw new UnauthorizedError('Invalid access token');
    }
    return { userId: sub.toLowerCase() };
  }
}
