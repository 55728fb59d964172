// The edges of the operator runtime towards a cluster, in plain TypeScript: src/kubernetes/
// implements them with @kubernetes/client-node, src/operator/runtime/ uses them, and unit tests
// give it the in-memory fakes of test/support/operator-runtime-fakes.ts. Below both, importing
// nothing.

/** The identity every Kubernetes object has; the runtime reads nothing else of an object. */
export interface KubeObjectLike {
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    uid?: string;
  };
}

export interface ListResult<T> {
  items: T[];
  /** The collection's resourceVersion: a watch started from it misses nothing. */
  resourceVersion: string;
}

/** A change seen by a watch. BOOKMARK only moves the resourceVersion on. */
export type WatchEvent<T> =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T }
  | { type: 'BOOKMARK'; resourceVersion: string };

export interface WatchOptions {
  /** Asks the server to end the watch after this long (a clean end, not an error). */
  timeoutSeconds?: number;
}

export interface WatchHandle {
  /** Ends the watch. After it, neither `onEvent` nor `onDone` is called again. */
  abort(): void;
}

/**
 * List and watch one collection (a resource type, maybe one namespace, maybe a label selector).
 *
 * Errors (a rejected list, or `onDone(error)`) carry the HTTP status the API server answered as a
 * numeric `status` property (see `httpStatusOf`), so 410 Gone is recognisable; a watch ERROR
 * event arrives the same way, as `onDone` with an error whose status is the Status `code`.
 */
export interface ListWatchSource<T extends KubeObjectLike> {
  /** For logs: what is listed, e.g. `/api/v1/namespaces/kiln/configmaps?labelSelector=a=b`. */
  readonly description: string;
  list(signal?: AbortSignal): Promise<ListResult<T>>;
  /**
   * Streams the changes after `resourceVersion` to `onEvent`, in order. `onDone` is called once
   * when the stream ends: without an argument when it simply ended (server timeout, closed
   * connection, idle timeout), with the error otherwise.
   */
  watch(
    resourceVersion: string,
    onEvent: (event: WatchEvent<T>) => void,
    onDone: (error?: unknown) => void,
    options?: WatchOptions,
  ): WatchHandle;
}

/** A coordination.k8s.io/v1 Lease as the leader elector sees it. Times are epoch milliseconds. */
export interface LeaseRecord {
  namespace: string;
  name: string;
  /** Set by the server; `update` sends it back, so a stale write fails with 409. */
  resourceVersion?: string;
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: number;
  renewTime?: number;
  leaseTransitions?: number;
}

/**
 * Reads and writes Leases with optimistic concurrency. `create` fails with status 409 when the
 * Lease exists; `update` fails with 409 when `resourceVersion` is no longer current.
 */
export interface LeaseStore {
  /** The Lease, or undefined when there is none (404). */
  get(namespace: string, name: string, signal?: AbortSignal): Promise<LeaseRecord | undefined>;
  create(lease: LeaseRecord, signal?: AbortSignal): Promise<LeaseRecord>;
  update(lease: LeaseRecord, signal?: AbortSignal): Promise<LeaseRecord>;
}

/**
 * The HTTP status an error carries (`status`, or `statusCode` / a numeric `code` as client-node
 * and Node set them), or undefined for errors that never got an answer.
 */
export function httpStatusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, statusCode, code } = error as {
    status?: unknown;
    statusCode?: unknown;
    code?: unknown;
  };
  for (const value of [status, statusCode, code])
    if (typeof value === 'number' && Number.isInteger(value)) return value;
  return undefined;
}

/** What the runtime logs through (pino's `(fields, message)` shape). */
export interface RuntimeLogger {
  debug(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

const ignore = (): void => undefined;
export const silentLogger: RuntimeLogger = {
  debug: ignore,
  info: ignore,
  warn: ignore,
  error: ignore,
};

/** A short, log-safe description of an error. */
export function describeError(error: unknown): Record<string, unknown> {
  const status = httpStatusOf(error);
  const message = error instanceof Error ? error.message : String(error);
  return status === undefined ? { error: message } : { error: message, status };
}
