import { Injectable } from '@nestjs/common';
import { JwtService } from '@nestjs/jwt';
import { randomUUID } from 'node:crypto';
import { KilnConfig } from '../config/config.js';

export interface AccessToken {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
}

@Injectable()
export class TokenService {
  constructor(
    private readonly jwt: JwtService,
    private readonly config: KilnConfig,
  ) {}

  async issue(userId: string): Promise<AccessToken> {
    // `iat` to the millisecond (RFC 7519 NumericDate may be fractional): a password change
    // refuses the tokens issued before it, even in the same second (credentials_changed_at).
    const token = await this.jwt.signAsync(
      { iat: Date.now() / 1000 },
      {
        subject: userId,
        jwtid: randomUUID(),
        expiresIn: this.config.jwtTtlSeconds,
      },
    );
    return { access_token: token, token_type: 'Bearer', expires_in: this.config.jwtTtlSeconds };
  }
}
