import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.gen.js';
import { session } from './session.js';

/** The Error body every refusal carries: a message, a code, and where known the time, trace id and details. */
export interface ErrorBody {
  readonly error: string;
  readonly code: string;
  readonly timestamp?: string;
  readonly trace_id?: string | null;
  readonly details?: Record<string, string> | null;
}

/** A refusal from the API, with its status and Error body. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.error);
    this.name = 'ApiError';
  }

  /** Field → message, for mapping a 400 back onto a form. */
  get details(): Record<string, string> {
    return this.body.details ?? {};
  }
}

/** Called when the API says the token is no longer good (401): the app returns to sign-in. */
let onExpired: () => void = () => undefined;
export function whenSessionExpires(handler: () => void): void {
  onExpired = handler;
}

const authenticate: Middleware = {
  onRequest({ request }) {
    const current = session();
    if (current !== undefined) {
      request.headers.set('Authorization', `Bearer ${current.token}`);
    }
    return request;
  },
  onResponse({ response, request }) {
    if (response.status === 401 && request.headers.has('Authorization')) onExpired();
    return response;
  },
};

/**
 * The X-Tenant-ID header the document requires on every tenant-scoped operation: the tenant the
 * console is scoped to (the app sends the user to the picker before any page that needs one).
 */
export function tenantHeader(): { 'X-Tenant-ID': string } {
  const tenantId = session()?.tenantId;
  if (tenantId === undefined) throw new Error('no tenant chosen');
  return { 'X-Tenant-ID': tenantId };
}

/** kiln's REST API, typed from its own OpenAPI document (generated at build). */
export const api = createClient<paths>({ baseUrl: '' });
api.use(authenticate);

/**
 * The answer's data, or an ApiError: the Error body, one made up for a non-JSON refusal, or
 * status 0 when no answer came.
 */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await call;
  } catch (failure) {
    // No answer at all (network down, server gone): status 0, so callers treat it as any refusal.
    throw new ApiError(0, {
      error: `kiln could not be reached (${failure instanceof Error ? failure.message : String(failure)}); check the connection and try again`,
      code: 'NETWORK_ERROR',
    });
  }
  const { data, error, response } = answer;
  if (response.ok) return data as T;
  throw new ApiError(response.status, asErrorBody(error, response));
}

function asErrorBody(error: unknown, response: Response): ErrorBody {
  if (typeof error === 'object' && error !== null && 'error' in error && 'code' in error) {
    return error as ErrorBody;
  }
  return { error: `${response.status} ${response.statusText}`, code: 'Unknown' };
}
