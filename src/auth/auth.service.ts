import { Injectable } from '@nestjs/common';
import { RateLimitedError, UnauthorizedError } from '../common/errors.js';
import { KilnConfig } from '../config/config.js';
import { LoginThrottleRepository } from './login-throttle.repository.js';
import { PasswordHasher } from './password-hasher.js';
import { type AccessToken, TokenService } from './token.service.js';
import { UsersRepository } from './users.repository.js';

const INVALID_CREDENTIALS = 'Invalid email or password';

@Injectable()
export class AuthService {
  constructor(
    private readonly users: UsersRepository,
    private readonly hasher: PasswordHasher,
    private readonly tokens: TokenService,
    private readonly throttle: LoginThrottleRepository,
    private readonly config: KilnConfig,
  ) {}

  /**
   * Exchanges e-mail and password for an access token. Unknown e-mail, wrong password and a
   * disabled user give the same 401 after the same work; failures are counted per e-mail + client
   * address and past the limit the answer is 429 until the window ends.
   */
  async login(email: string, password: string, clientAddress: string): Promise<AccessToken> {
    const normalised = email.trim().toLowerCase();
    const key = `${normalised}|${clientAddress}`;
    const { loginMaxFailures: limit, loginWindowSeconds: window } = this.config;
    const now = new Date();

    const state = await this.throttle.current(key, window, now);
    if (state !== undefined && state.failures >= limit) {
      throw new RateLimitedError('Too many failed logins; wait before trying again', {
        limit,
        remaining: 0,
        resetAt: new Date(state.windowStartedAt.getTime() + window * 1000),
      });
    }

    const user = await this.users.findByEmail(normalised);
    const valid = await this.hasher.verify(user?.passwordHash, password);
    if (user === undefined || !valid || user.disabled) {
      await this.throttle.recordFailure(key, window, now);
      throw new UnauthorizedError(INVALID_CREDENTIALS);
    }
    await this.throttle.clear(key);
    if (this.hasher.needsRehash(user.passwordHash)) {
      await this.users.updatePasswordHash(user.id, await this.hasher.hash(password));
    }
    return this.tokens.issue(user.id);
  }
}
