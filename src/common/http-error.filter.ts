import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException } from '@nestjs/common';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { translateDatabaseError } from './database-errors.js';
import { errorResponseOf } from './error-body.js';
import { ErrorCode, KilnError, RateLimitedError } from './errors.js';
import { setRateLimitHeaders } from './rate-limit-headers.js';
import { currentRequestContext } from './request-context.js';

const HTTP_STATUS_CODES = new Map<number, ErrorCode>([
  [400, ErrorCode.InvalidRequest],
  [401, ErrorCode.Unauthorized],
  [403, ErrorCode.Forbidden],
  [404, ErrorCode.NotFound],
  [409, ErrorCode.Conflict],
  [413, ErrorCode.PayloadTooLarge],
  [429, ErrorCode.RateLimited],
  [501, ErrorCode.NotImplemented],
  [503, ErrorCode.Unavailable],
]);

/**
 * Every error leaving the HTTP API, whatever threw it, becomes the spec's Error body. Server-side
 * failures are logged with the trace id the client sees; their messages never reach the client.
 */
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
    response.status(status).json(body);
  }
}

export function toKilnError(
  exception: unknown,
  request: Pick<Request, 'method' | 'originalUrl'>,
): KilnError {
  if (exception instanceof KilnError) {
    return exception.code === ErrorCode.Internal
      ? new KilnError(ErrorCode.Internal, 'Internal server error')
      : exception;
  }
  if (exception instanceof HttpException) {
    // A KilnError thrown in Express middleware (the JSON body checks) arrives wrapped by Nest's
    // adapter, with body-parser's status (403 for a failed verify): the domain error decides.
    if (exception.cause instanceof KilnError) return toKilnError(exception.cause, request);
    return fromHttpException(exception, request);
  }
  return (
    translateDatabaseError(exception) ?? new KilnError(ErrorCode.Internal, 'Internal server error')
  );
}

function fromHttpException(
  exception: HttpException,
  request: Pick<Request, 'method' | 'originalUrl'>,
): KilnError {
  const status = exception.getStatus();
  const code =
    HTTP_STATUS_CODES.get(status) ??
    (status >= 500 ? ErrorCode.Internal : ErrorCode.InvalidRequest);
  switch (code) {
    case ErrorCode.NotFound:
      // Nest's router answers unknown routes with "Cannot GET /x"; say it in our words.
      return new KilnError(code, `No route for ${request.method} ${pathOf(request)}`);
    case ErrorCode.PayloadTooLarge:
      return new KilnError(code, 'Request body is too large');
    case ErrorCode.InvalidRequest:
      return exception.cause instanceof SyntaxError
        ? new KilnError(code, 'Request body is not valid JSON')
        : new KilnError(code, messageOf(exception));
    case ErrorCode.Internal:
    case ErrorCode.Unavailable:
    case ErrorCode.NotImplemented:
      return new KilnError(
        code,
        code === ErrorCode.Internal ? 'Internal server error' : messageOf(exception),
      );
    case ErrorCode.Unauthorized:
    case ErrorCode.Forbidden:
    case ErrorCode.Conflict:
    case ErrorCode.RateLimited:
      return new KilnError(code, messageOf(exception));
  }
}

function messageOf(exception: HttpException): string {
  const response = exception.getResponse();
  if (typeof response === 'string') return response;
  const message = (response as { message?: unknown }).message;
  if (typeof message === 'string') return message;
  if (Array.isArray(message)) return message.map(String).join('; ');
  return exception.message;
}

function pathOf(request: Pick<Request, 'originalUrl'>): string {
  return new URL(request.originalUrl, 'http://kiln.invalid').pathname;
}

function causeOf(exception: unknown): string {
  let e: unknown = exception;
  while (e instanceof Error && e.cause !== undefined) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
