import { isWebhookDelivery } from '../common/json-body.js';
import { Injectable, type NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { RateLimitedError, UnauthorizedError } from '../common/errors.js';
import { setRateLimitHeaders } from '../common/rate-limit-headers.js';
import { RateLimitService } from '../ratelimit/rate-limit.service.js';
import { Authorizer, bearerTokenOf } from './authorizer.js';
import type { KilnRequest } from './tenant-context.js';

/**
 * Counts every /api/v1 request against its caller before routing, so unknown routes (404), bad
 * tenants (400, 403) and refused tokens (401) are counted and carry the X-RateLimit-* headers like
 * any other response. The caller is the user of a valid bearer token, whatever X-Tenant-ID says
 * (a header the caller chooses cannot buy a fresh budget), else the client address. The user of
 * a token it verified is handed to AuthGuard as `request.user`, as passport would set it, so the
 * token is checked once per request.
 */
@Injectable()
export class ApiRateLimitMiddleware implements NestMiddleware {
  constructor(
    private readonly authorizer: Authorizer,
    private readonly rateLimits: RateLimitService,
  ) {}

  async use(request: Request & KilnRequest, response: Response, next: NextFunction): Promise<void> {
    // A webhook delivery is limited per trigger (WebhookReceiver): git hosts send from shared
    // addresses, whose budget one busy repository would otherwise spend for all.
    if (isWebhookDelivery(request)) {
      next();
      return;
    }
    const decision = await this.rateLimits.consume(
      await this.callerOf(request),
      RateLimitService.classOf(request.method),
    );
    if (decision !== undefined) {
      setRateLimitHeaders(response, decision, false);
      if (!decision.allowed)
        throw new RateLimitedError('Too many requests; wait until X-RateLimit-Reset', decision);
    }
    next();
  }

  private async callerOf(request: Request & KilnRequest): Promise<string> {
    const token = bearerTokenOf(request.headers.authorization);
    if (token !== undefined) {
      try {
        const { userId, issuedAt, apiToken } = await this.authorizer.verifyToken(token);
        request.user = { userId, issuedAt, apiToken };
        return `user|${userId}`;
      } catch (error) {
        if (!(error instanceof UnauthorizedError)) throw error;
      }
    }
    return `ip|${request.ip ?? ''}`;
  }
}
