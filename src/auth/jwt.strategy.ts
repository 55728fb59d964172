import type { KeyObject } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import { Strategy } from 'passport-jwt';
import { KilnConfig } from '../config/config.js';
import { acceptVerifiedToken, bearerTokenOf, tokenVerifyOptions } from './authorizer.js';
import { JWT_KEY } from './jwt.constants.js';
import type { AuthenticatedUser } from './tenant-context.js';

/**
 * The HTTP side of token checks, through passport-jwt: HS256 only, issuer, audience and `exp`
 * checked, and then the same header and claim rules as the WebSocket upgrade and the rate-limit
 * middleware (`acceptVerifiedToken`): no `kid` or key-locating parameter, `typ` JWT or absent.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(config: KilnConfig, @Inject(JWT_KEY) key: KeyObject) {
    const { algorithms, issuer, audience, ...jsonWebTokenOptions } = tokenVerifyOptions(config);
    super({
      jwtFromRequest: (request: Request) => bearerTokenOf(request.headers.authorization) ?? null,
      // passport-jwt hands the key to jsonwebtoken unchanged, which takes a KeyObject; its
      // typings say string | Buffer only.
      secretOrKey: key as unknown as Buffer,
      algorithms,
      issuer,
      audience,
      ignoreExpiration: false,
      jsonWebTokenOptions,
    });
  }

  validate(verified: unknown): AuthenticatedUser {
    const { userId, issuedAt } = acceptVerifiedToken(verified);
    return { userId, issuedAt };
  }
}
