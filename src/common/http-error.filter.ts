import { type ArgumentsHost, Catch, type ExceptionFilter } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { errorResponseOf } from './error-body.js';
import { ErrorCode, RateLimitedError } from './errors.js';
import { setRateLimitHeaders } from './rate-limit-headers.js';
import { currentRequestContext } from './request-context.js';
import { pathOf, toKilnError } from './to-kiln-error.js';

/**
 * Every error leaving the HTTP API, whatever threw it, becomes the spec's Error body. Server-side
 * failures are logged with the trace id the client sees; their messages never reach the client.
 */
/** Seconds a client waits before retrying a 503. */
const UNAVAILABLE_RETRY_AFTER = '5';

@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  constructor(private readonly logger: Logger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    if (host.getType() !== 'http') return;
    const request = host.switchToHttp().getRequest<Request>();
    const response = host.switchToHttp().getResponse<Response>();
    const error = toKilnError(exception, request);
    const traceId = currentRequestContext()?.requestId ?? null;
    const { status, body } = errorResponseOf(error, traceId);

    if (status >= 500) {
      const fields = { trace_id: traceId, method: request.method, path: pathOf(request), status };
      // An unavailable dependency is expected while it restarts: one line, no stack, per request.
      if (error.code === ErrorCode.Unavailable) {
        this.logger.warn(
          { ...fields, reason: causeOf(exception) },
          'request failed: dependency unavailable',
        );
      } else {
        this.logger.error({ ...fields, err: exception }, 'request failed');
      }
    }
    if (response.headersSent) {
      response.destroy();
      return;
    }
    if (error instanceof RateLimitedError) setRateLimitHeaders(response, error.rateLimit, true);
    // A dependency restarting (the database, the Kubernetes API server) is usually back soon.
    if (error.code === ErrorCode.Unavailable)
      response.setHeader('Retry-After', UNAVAILABLE_RETRY_AFTER);
    response.status(status).json(body);
  }
}

function causeOf(exception: unknown): string {
  let e: unknown = exception;
  while (e instanceof Error && e.cause !== undefined) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
