import { createSecretKey, type KeyObject } from 'node:crypto';
import { type MiddlewareConsumer, Module, type NestModule } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { JwtService } from '@nestjs/jwt';
import { PassportModule } from '@nestjs/passport';
import { KilnConfig } from '../config/config.js';
import { RateLimitModule } from '../ratelimit/rate-limit.module.js';
import { AccessCache } from './access-cache.js';
import { AccountController } from './account.controller.js';
import { ApiTokens } from './api-tokens.js';
import { ApiTokensController } from './api-tokens.controller.js';
import { ApiTokensRepository } from './api-tokens.repository.js';
import { AdminTenantsController } from './admin-tenants.controller.js';
import { AdminUsersController } from './admin-users.controller.js';
import { ApiRateLimitMiddleware } from './api-rate-limit.middleware.js';
import { AuthController } from './auth.controller.js';
import { AuthGuard } from './auth.guard.js';
import { AuthService } from './auth.service.js';
import { Authorizer } from './authorizer.js';
import { resolveSecretSource } from '../secrets/secret-source.js';
import { JWT_ALGORITHM, JWT_KEY, JWT_SECRET } from './jwt.constants.js';
import { JwtStrategy } from './jwt.strategy.js';
import { LoginThrottleRepository } from './login-throttle.repository.js';
import { MembersController } from './members.controller.js';
import { TenancyModule } from './tenancy.module.js';
import { TenantsController } from './tenants.controller.js';
import { TokenService } from './token.service.js';

const secretProvider = {
  provide: JWT_SECRET,
  inject: [KilnConfig],
  useFactory: (config: KilnConfig) => resolveSecretSource(config.jwtSecret),
};

const keyProvider = {
  provide: JWT_KEY,
  inject: [JWT_SECRET],
  useFactory: (secret: string): KeyObject => createSecretKey(Buffer.from(secret, 'utf8')),
};

/**
 * Login, access tokens and API tokens, the caller's own account and tenants, the rate limit every
 * API request counts against, and the global guard.
 */
@Module({
  imports: [TenancyModule, RateLimitModule, PassportModule],
  controllers: [
    AuthController,
    AccountController,
    TenantsController,
    ApiTokensController,
    AdminTenantsController,
    AdminUsersController,
    MembersController,
  ],
  exports: [Authorizer],
  providers: [
    secretProvider,
    keyProvider,
    {
      provide: JwtService,
      inject: [KilnConfig, JWT_KEY],
      useFactory: (config: KilnConfig, key: KeyObject) =>
        new JwtService({
          secret: key,
          signOptions: {
            algorithm: JWT_ALGORITHM,
            issuer: config.jwtIssuer,
            audience: config.jwtAudience,
          },
        }),
    },
    AuthService,
    AccessCache,
    ApiTokensRepository,
    ApiTokens,
    Authorizer,
    TokenService,
    JwtStrategy,
    LoginThrottleRepository,
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
})
export class AuthModule implements NestModule {
  configure(consumer: MiddlewareConsumer): void {
    // A path (app.module.ts API_PREFIX), not the controllers: unknown routes are counted too.
    consumer.apply(ApiRateLimitMiddleware).forRoutes('api/v1');
  }
}
