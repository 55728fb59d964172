import { ConflictError, ErrorCode, type KilnError, UnavailableError } from './errors.js';

// SQLSTATE classes and node-postgres / socket messages that mean "the database is not there right
// now" rather than "the query is wrong": connection exceptions (08), operator intervention (57P0x:
// admin shutdown, crash shutdown, cannot connect now) and the client-side failures node-postgres
// raises when a server goes away.
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[1-4]|53300)$/;
const UNAVAILABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
]);
const UNAVAILABLE_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is not established|Cannot use a pool after calling end/i;

interface PgLikeError {
  code?: unknown;
  message?: unknown;
  driverError?: unknown;
  constraint?: unknown;
  cause?: unknown;
}

/**
 * Recognises database failures by their shape (no driver import), so the error filter can answer
 * 503 for an unreachable database and 409 for a unique violation (SQLSTATE 23505).
 */
export function translateDatabaseError(error: unknown): KilnError | undefined {
  for (let e: unknown = error, depth = 0; isObject(e) && depth < 4; depth++) {
    const candidate = e as PgLikeError;
    const code = typeof candidate.code === 'string' ? candidate.code : '';
    const message = typeof candidate.message === 'string' ? candidate.message : '';
    if (code === '23505')
      return new ConflictError('A resource with the same identity already exists');
    if (
      UNAVAILABLE_SQLSTATE.test(code) ||
      UNAVAILABLE_ERRNO.has(code) ||
      UNAVAILABLE_MESSAGE.test(message)
    ) {
      return new UnavailableError('The database is unavailable; retry shortly', { cause: error });
    }
    e = candidate.driverError ?? candidate.cause;
  }
  if (error instanceof AggregateError) {
    return error.errors.map(translateDatabaseError).find((e) => e !== undefined);
  }
  return undefined;
}

/**
 * True when `error` (or an error it wraps) says the database cannot be reached right now (refused
 * or dropped connection, server shutting down or starting up, pool timeout), as opposed to a query
 * the database rejected. Such a failure is worth retrying once the database is back.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  return translateDatabaseError(error)?.code === ErrorCode.Unavailable;
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}
