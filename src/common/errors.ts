/**
 * Domain errors. Services throw these; one filter (http-error.filter.ts) turns them into the
 * spec's Error body. No HTTP import here: the mapping to status codes lives in the filter.
 */
export enum ErrorCode {
  InvalidRequest = 'InvalidRequest',
  PayloadTooLarge = 'PayloadTooLarge',
  Unauthorized = 'Unauthorized',
  Forbidden = 'Forbidden',
  NotFound = 'NotFound',
  Conflict = 'Conflict',
  RateLimited = 'RateLimited',
  /** No kiln route answers 501; an HttpException with that status (Nest's) keeps it. */
  NotImplemented = 'NotImplemented',
  Unavailable = 'Unavailable',
  Internal = 'Internal',
}

/** Field name → message, as in the Error body's `details`. */
export type ErrorDetails = Record<string, string>;

export class KilnError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class InvalidRequestError extends KilnError {
  constructor(message: string, details?: ErrorDetails) {
    super(ErrorCode.InvalidRequest, message, details);
  }

  /** "<lead>: field: problem; field: problem", with the same pairs as details. */
  static listing(lead: string, details: ErrorDetails): InvalidRequestError {
    const summary = Object.entries(details)
      .map(([field, message]) => `${field}: ${message}`)
      .join('; ');
    return new InvalidRequestError(`${lead}: ${summary}`, details);
  }
}

export class NotFoundError extends KilnError {
  constructor(message = 'Resource not found', details?: ErrorDetails) {
    super(ErrorCode.NotFound, message, details);
  }
}

/** A body larger than a route accepts (413). */
export class PayloadTooLargeError extends KilnError {
  constructor(message: string) {
    super(ErrorCode.PayloadTooLarge, message);
  }
}

export class ConflictError extends KilnError {
  constructor(message: string, details?: ErrorDetails) {
    super(ErrorCode.Conflict, message, details);
  }
}

export class UnauthorizedError extends KilnError {
  constructor(message = 'Authentication required') {
    super(ErrorCode.Unauthorized, message);
  }
}

export class ForbiddenError extends KilnError {
  constructor(message = 'Insufficient permission') {
    super(ErrorCode.Forbidden, message);
  }
}

export interface RateLimitInfo {
  readonly limit: number;
  readonly remaining: number;
  readonly resetAt: Date;
}

export class RateLimitedError extends KilnError {
  constructor(
    message: string,
    readonly rateLimit: RateLimitInfo,
  ) {
    super(ErrorCode.RateLimited, message);
  }
}

/** A dependency (the database) cannot be reached; the request may succeed when retried. */
export class UnavailableError extends KilnError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.Unavailable, message, undefined, options);
  }
}

export function assertUnreachable(value: never): never {
  throw new Error(`unreachable: ${String(value)}`);
}
