import createClient, { type Client } from 'openapi-fetch';
import type { ApiPaths } from './paths.js';

export type Api = Client<ApiPaths>;

/** The Error body every refusal carries (its message is `error`, not `message`). */
export interface ErrorBody {
  readonly error: string;
  readonly code: string;
  readonly timestamp?: string;
  readonly trace_id?: string | null;
  readonly details?: Record<string, string> | null;
}

/** A refusal from kiln (any 4xx or 5xx answer), or status 0 when no answer came at all. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(body.error);
    this.name = 'ApiError';
  }
}

/** kiln's REST API at `baseUrl`, typed from its own OpenAPI document, as `token`'s bearer. */
export function createApi(baseUrl: string, token: string | undefined): Api {
  const api = createClient<ApiPaths>({ baseUrl });
  if (token !== undefined) {
    api.use({
      onRequest({ request }) {
        request.headers.set('Authorization', `Bearer ${token}`);
        return request;
      },
    });
  }
  return api;
}

/** The answer's data, or an ApiError: the Error body, or one made up for another answer. */
export async function unwrap<T>(
  call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await call;
  } catch (failure) {
    throw unreachable(failure);
  }
  const { data, error, response } = answer;
  if (response.ok) return data as T;
  throw new ApiError(response.status, asErrorBody(error, response.status, response.statusText));
}

/** No answer at all (kiln down, a wrong URL, the network): status 0. */
export function unreachable(failure: unknown): ApiError {
  const cause =
    failure instanceof Error && failure.cause instanceof Error ? failure.cause : failure;
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new ApiError(0, { error: `kiln could not be reached (${reason})`, code: 'UNREACHABLE' });
}

/** `error` when it is an Error body; otherwise a body that names the status. */
export function asErrorBody(error: unknown, status: number, statusText: string): ErrorBody {
  if (typeof error === 'object' && error !== null && 'error' in error && 'code' in error) {
    return error as ErrorBody;
  }
  return { error: `kiln answered ${status} ${statusText}`.trim(), code: 'UNKNOWN' };
}
