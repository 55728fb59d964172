import { Injectable } from '@nestjs/common';
import { InvalidRequestError, RateLimitedError, UnauthorizedError } from '../common/errors.js';
import { counterKey } from '../ratelimit/rate-limit.service.js';
import { KilnConfig } from '../config/config.js';
import { AccessChanges } from './access-changes.js';
import { LoginThrottleRepository } from './login-throttle.repository.js';
import { checkNewPassword, PasswordHasher } from './password-hasher.js';
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
    private readonly changes: AccessChanges,
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
    const key = await this.countAttempt(normalised, clientAddress);
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

  /**
   * The signed-in user's new password, given its current one: counted against the same limit as
   * logins (a stolen access token must not become a way to guess the password). Access tokens
   * issued before it are refused on every replica; the answer is a new one. API tokens stay
   * valid: they are revoked on their own.
   */
  async changePassword(
    userId: string,
    current: string,
    next: string,
    clientAddress: string,
  ): Promise<AccessToken> {
    checkNewPassword(next, 'new_password');
    const user = await this.users.findById(userId);
    if (user === undefined || user.disabled)
      throw new UnauthorizedError("The access token's user no longer exists or is disabled");
    const key = await this.countAttempt(user.email, clientAddress);
    if (!(await this.hasher.verify(user.passwordHash, current))) {
      throw new InvalidRequestError('The current password is not right', {
        current_password: 'is not the current password',
      });
    }
    await this.throttle.clear(key);
    await this.users.changePassword(user.id, await this.hasher.hash(next), new Date());
    this.changes.changed(user.id);
    return this.tokens.issue(user.id);
  }

  /**
   * Counts one attempt at a password for the e-mail from the client address (the key, returned,
   * is cleared on success): past KILN_LOGIN_MAX_FAILURES in the window, 429 until it ends.
   */
  private async countAttempt(email: string, clientAddress: string): Promise<string> {
    const key = counterKey(`${email}|${clientAddress}`);
    const { loginMaxFailures: limit, loginWindowSeconds: window } = this.config;
    const { attempts, windowStartedAt } = await this.throttle.countAttempt(key, window, new Date());
    if (attempts > limit) {
      throw new RateLimitedError('Too many failed logins; wait before trying again', {
        limit,
        remaining: 0,
        resetAt: new Date(windowStartedAt.getTime() + window * 1000),
      });
    }
    return key;
  }
}
