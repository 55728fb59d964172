/**
 * Errors from the Kubernetes API server, without client-node's types: callers outside
 * src/kubernetes/ tell "the server said no" (a status and reason) from "no server answered".
 */

/** The API server answered with an error Status. */
export class KubeApiError extends Error {
  constructor(
    /** The HTTP status (404, 409, 422, …). */
    readonly status: number,
    /** The Status reason (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, …), when given. */
    readonly reason: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'KubeApiError';
  }
}

/** No answer from the API server (connection refused, reset, timed out, DNS, TLS). */
export class KubeUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeUnavailableError';
  }
}

/** Runs one request to the API server, its failure turned into KubeApiError / KubeUnavailableError. */
export async function kubeCall<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw toKubeError(error);
  }
}

interface StatusBody {
  reason?: unknown;
  message?: unknown;
}

/** Turns whatever client-node threw into one of the two errors above (or rethrows it as is). */
export function toKubeError(error: unknown): Error {
  if (error instanceof KubeApiError || error instanceof KubeUnavailableError) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'number' && code >= 400) {
    // 5xx from the server itself (or a proxy in front of it) means: try again later.
    const body = parseBody((error as { body?: unknown }).body);
    const message = typeof body?.message === 'string' ? body.message : `HTTP ${code}`;
    if (code >= 500 && code !== 501)
      return new KubeUnavailableError(`the Kubernetes API server answered ${code}: ${message}`, {
        cause: error,
      });
    return new KubeApiError(
      code,
      typeof body?.reason === 'string' ? body.reason : undefined,
      message,
    );
  }
  if (isNetworkError(error)) {
    return new KubeUnavailableError('the Kubernetes API server did not answer', { cause: error });
  }
  return error instanceof Error ? error : new Error(String(error));
}

function parseBody(body: unknown): StatusBody | undefined {
  if (typeof body === 'object' && body !== null) return body;
  if (typeof body !== 'string') return undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

function isNetworkError(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
    if (current instanceof Error && /fetch failed|socket hang up|network/i.test(current.message))
      return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
