import { STATUS_CODES } from 'node:http';
import { assertUnreachable, ErrorCode, type ErrorDetails, type KilnError } from './errors.js';
import { REQUEST_ID_HEADER } from './request-id.middleware.js';

/** The spec's Error.code values (section 7); the wire never carries anything else. */
export const API_ERROR_CODES = [
  'INVALID_REQUEST',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'CONFLICT',
  'INTERNAL_SERVER_ERROR',
] as const;
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/** The spec's Error shape (section 2.6). */
export interface ErrorBody {
  error: string;
  code: ApiErrorCode;
  timestamp: string;
  trace_id: string | null;
  details?: ErrorDetails;
}

/**
 * The one mapping from domain error codes to HTTP. Codes the spec has no value for keep their
 * HTTP status and use the nearest spec code (docs/adr/0003-error-model.md).
 */
export function httpStatusOf(code: ErrorCode): { status: number; apiCode: ApiErrorCode } {
  switch (code) {
    case ErrorCode.InvalidRequest:
      return { status: 400, apiCode: 'INVALID_REQUEST' };
    case ErrorCode.PayloadTooLarge:
      return { status: 413, apiCode: 'INVALID_REQUEST' };
    case ErrorCode.RateLimited:
      return { status: 429, apiCode: 'INVALID_REQUEST' };
    case ErrorCode.Unauthorized:
      return { status: 401, apiCode: 'UNAUTHORIZED' };
    case ErrorCode.Forbidden:
      return { status: 403, apiCode: 'FORBIDDEN' };
    case ErrorCode.NotFound:
      return { status: 404, apiCode: 'NOT_FOUND' };
    case ErrorCode.Conflict:
      return { status: 409, apiCode: 'CONFLICT' };
    case ErrorCode.NotImplemented:
      return { status: 501, apiCode: 'INTERNAL_SERVER_ERROR' };
    case ErrorCode.Unavailable:
      return { status: 503, apiCode: 'INTERNAL_SERVER_ERROR' };
    case ErrorCode.Internal:
      return { status: 500, apiCode: 'INTERNAL_SERVER_ERROR' };
    default:
      return assertUnreachable(code);
  }
}

/** The Error body of a domain error, and its HTTP status: what every refusal sends. */
export function errorResponseOf(
  error: KilnError,
  traceId: string | null,
): { status: number; body: ErrorBody } {
  const { status, apiCode } = httpStatusOf(error.code);
  return {
    status,
    body: {
      error: error.message,
      code: apiCode,
      timestamp: new Date().toISOString(),
      trace_id: traceId,
      ...(error.details === undefined ? {} : { details: error.details }),
    },
  };
}

/**
 * A whole HTTP/1.1 response carrying the Error body, for answers written straight onto a socket
 * (a refused WebSocket upgrade, a request Node's parser refused): the connection closes after it.
 * `headers` are extra header lines (`Name: value`).
 */
export function rawErrorResponse(
  status: number,
  body: ErrorBody,
  requestId: string,
  headers: readonly string[] = [],
): string {
  const json = JSON.stringify(body);
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(json)}`,
    `${REQUEST_ID_HEADER}: ${requestId}`,
    ...headers,
    'Connection: close',
    '',
    json,
  ].join('\r\n');
}
