import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { ExtractJwt, Strategy } from 'passport-jwt';
import { KilnConfig } from '../config/config.js';
import { UnauthorizedError } from '../common/errors.js';
import type { AuthenticatedUser } from './tenant-context.js';
import { subjectOf } from './authorizer.js';
import { JWT_ALGORITHM, JWT_CLOCK_TOLERANCE_SECONDS, JWT_SECRET } from './jwt.constants.js';

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
    const verified = subjectOf(payload);
    if (verified === undefined) throw new UnauthorizedError('Invalid access token');
    return { userId: verified.userId };
  }
}
