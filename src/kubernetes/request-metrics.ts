import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { Metrics } from '../metrics/metrics.js';

/** The verbs of kiln_kube_api_requests_total, as the API server's audit log names them. */
export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete';

/**
 * The verb of a request to the API server, from its method and path (with the query), as the
 * server's request-info resolver reads it: a GET with `watch=true` watches; a GET of a collection
 * (`…/namespaces/<ns>/<resource>`, `…/<cluster-scoped resource>`) lists; any other GET (one
 * object, a subresource such as a pod's log, `/version`) gets. POST creates, PUT updates, PATCH
 * patches, DELETE deletes (one object or a collection). Any other method counts as get.
 */
export function kubeVerb(method: string, path: string): KubeVerb {
  switch (method.toUpperCase()) {
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
  }
  const query = path.indexOf('?');
  const params = new URLSearchParams(query === -1 ? '' : path.slice(query + 1));
  if (params.get('watch') === 'true' || params.get('watch') === '1') return 'watch';
  return isCollection(query === -1 ? path : path.slice(0, query)) ? 'list' : 'get';
}

/** `/api/v1/pods`, `/api/v1/namespaces/kiln/pods`, `/apis/batch/v1/namespaces/kiln/jobs`: yes. */
function isCollection(path: string): boolean {
  const parts = path.split('/').filter((part) => part !== '');
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 3) rest = parts.slice(3);
  else return false;
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  return rest.length === 1;
}

/**
 * An undici interceptor counting every request that passes it in kiln_kube_api_requests_total:
 * once, when the response starts (its status code), or as `error` when the request failed or
 * was aborted before any response came. A watch or a log stream counts when it opens, not when
 * it ends.
 */
export function countingInterceptor(metrics: Metrics): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => {
    const verb = kubeVerb(options.method, options.path);
    const count = (code: string): void =>
      metrics.inc('kiln_kube_api_requests_total', { verb, code });
    return dispatch(options, new CountingHandler(handler, count));
  };
}

/** Passes every callback on; the first response (or failure before one) is counted. */
class CountingHandler implements Dispatcher.DispatchHandler {
  private counted = false;

  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly count: (code: string) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.inner.onRequestStart?.(controller, context);
  }

  onRequestUpgrade(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    socket: Duplex,
  ): void {
    this.once(String(statusCode));
    this.inner.onRequestUpgrade?.(controller, statusCode, headers, socket);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    statusMessage?: string,
  ): void {
    this.once(String(statusCode));
    this.inner.onResponseStart?.(controller, statusCode, headers, statusMessage);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.inner.onResponseData?.(controller, chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.inner.onResponseEnd?.(controller, trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.once('error');
    this.inner.onResponseError?.(controller, error);
  }

  private once(code: string): void {
    if (this.counted) return;
    this.counted = true;
    this.count(code);
  }
}
