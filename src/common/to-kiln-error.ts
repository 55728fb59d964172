import { HttpException } from '@nestjs/common';
import type { Request } from 'express';
import { translateDatabaseError } from './database-errors.js';
import { ErrorCode, KilnError } from './errors.js';

/**
 * Whatever was thrown, as the KilnError the client may see: domain errors as they are (an
 * internal one without its message), Nest's HTTP exceptions and database errors translated, the
 * rest an internal error. Both transports use it: the HTTP filter and the WebSocket refusals.
 */
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

export function pathOf(request: Pick<Request, 'originalUrl'>): string {
  return new URL(request.originalUrl, 'http://kiln.invalid').pathname;
}
