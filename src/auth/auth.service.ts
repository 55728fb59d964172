import { Injectable } from '@nestjs/common';
import { RateLimitedError, UnauthorizedError } from '../common/errors.js';
import { counterKey } from '../ratelimit/rate-limit.service.js';
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
   * disabled user give the same 401 after the same work. Every attempt is counted per e-mail +
   * client address before the password is checked (a success clears the count), so parallel
   * guesses cannot overtake the count: past the limit the answer is 429 until the window ends.
   */
  async login(email: string, password: string, clientAddress: string): Promise<AccessToken> {
    const normalised = email.trim().toLowerCase();
    const key = counterKey(`${normalised}|${clientAddress}`);
    const { loginMaxFailures: limit, loginWindowSeconds: window } = this.config;

    const { attempts, windowStartedAt } = await this.throttle.countAttempt(key, window, new Date());
    if (attempts > limit) {
      throw new RateLimitedError('Too many failed logins; wait before trying again', {
        limit,
        remaining: 0,
        resetAt: new Date(windowStartedAt.getTime() + window * 1000),
      });
    }

    const user = await this.users.findByEmail(normalised);
    const valid = await this.hasher.verify(user?.passwordHash, password);
    if (user === undefined || !valid || user.disabled)
      throw new UnauthorizedError(INVALID_CREDENTIALS);
    await this.throttle.clear(key);
    if (this.hasher.needsRehash(user.passwordHash)) {
      await this.users.updatePasswordHash(user.id, await this.hasher.hash(password));
    }
    return this.tokens.issue(user.id);
  }
}
