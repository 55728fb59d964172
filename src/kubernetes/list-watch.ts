import * as k8s from '@kubernetes/client-node';
import type {
  KubeObjectLike,
  ListResult,
  ListWatchSource,
  WatchEvent,
  WatchHandle,
  WatchOptions,
} from '../cluster/ports.js';
import { KubeApiError, toKubeError } from './errors.js';
import type { KubeClient } from './kube-client.js';

/** One collection: a resource type, in one namespace or all, maybe narrowed by selectors. */
export interface CollectionRef {
  /** '' for the core group (pods, configmaps, …). */
  group: string;
  version: string;
  plural: string;
  /** Omit for every namespace (or a cluster-scoped resource). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

interface ListBody<T> {
  kind?: string;
  apiVersion?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

interface RawStatus {
  code?: number;
  reason?: string;
  message?: string;
}

/**
 * ListWatchSource for any collection over client-node 2.0.1: the list is a raw GET (the JSON as
 * the server sent it, paged with `limit`/`continue`; typed built-in lists omit each item's
 * kind and apiVersion, which are filled in from the list), the watch is client-node's `Watch`
 * with `allowWatchBookmarks=true`. A watch ERROR event (410 Gone after compaction) and an HTTP
 * error both end the watch with a KubeApiError carrying the status. client-node's own 30 s idle
 * timeout ends a quiet watch cleanly (no error): the informer restarts it from the last
 * resourceVersion.
 */
export class KubeListWatch<T extends KubeObjectLike> implements ListWatchSource<T> {
  readonly description: string;
  private readonly path: string;
  private readonly pageSize: number;

  constructor(
    private readonly config: k8s.KubeConfig,
    private readonly ref: CollectionRef,
    options: { pageSize?: number } = {},
  ) {
    const root = ref.group === '' ? `/api/${ref.version}` : `/apis/${ref.group}/${ref.version}`;
    const scope = ref.namespace ? `/namespaces/${encodeURIComponent(ref.namespace)}` : '';
    this.path = `${root}${scope}/${ref.plural}`;
    this.pageSize = options.pageSize ?? 500;
    const selectors = [
      ref.labelSelector ? `labelSelector=${ref.labelSelector}` : '',
      ref.fieldSelector ? `fieldSelector=${ref.fieldSelector}` : '',
    ].filter((s) => s !== '');
    this.description = selectors.length > 0 ? `${this.path}?${selectors.join('&')}` : this.path;
  }

  static forClient<T extends KubeObjectLike>(
    client: KubeClient,
    ref: CollectionRef,
    options: { pageSize?: number } = {},
  ): KubeListWatch<T> {
    return new KubeListWatch<T>(client.kubeConfig, ref, options);
  }

  async list(signal?: AbortSignal): Promise<ListResult<T>> {
    const items: T[] = [];
    let resourceVersion: string;
    let next: string | undefined;
    do {
      const page = await this.get<ListBody<T>>(
        {
          ...this.selectors(),
          limit: String(this.pageSize),
          ...(next ? { continue: next } : {}),
        },
        signal,
      );
      const kind = page.kind?.replace(/List$/, '');
      for (const item of page.items ?? []) {
        const typed = item as T & { kind?: string; apiVersion?: string };
        if (kind && typed.kind === undefined) typed.kind = kind;
        if (page.apiVersion && typed.apiVersion === undefined) typed.apiVersion = page.apiVersion;
        items.push(typed);
      }
      resourceVersion = page.metadata?.resourceVersion ?? '';
      next = page.metadata?.continue || undefined;
    } while (next);
    return { items, resourceVersion };
  }

  watch(
    resourceVersion: string,
    onEvent: (event: WatchEvent<T>) => void,
    onDone: (error?: unknown) => void,
    options: WatchOptions = {},
  ): WatchHandle {
    let finished = false;
    let controller: AbortController | undefined;
    const end = (error?: unknown): void => {
      if (finished) return;
      finished = true;
      controller?.abort();
      onDone(error);
    };
    const query: Record<string, string | number | boolean> = {
      allowWatchBookmarks: true,
      ...this.selectors(),
      ...(resourceVersion ? { resourceVersion } : {}),
      ...(options.timeoutSeconds ? { timeoutSeconds: options.timeoutSeconds } : {}),
    };
    const deliver = (type: string, object: unknown): void => {
      if (finished) return;
      // client-node swallows what a callback throws; end the watch instead of losing an event.
      try {
        if (type === 'ERROR') end(statusError(object as RawStatus));
        else if (type === 'BOOKMARK') {
          const rv = (object as KubeObjectLike).metadata?.resourceVersion;
          if (rv) onEvent({ type, resourceVersion: rv });
        } else if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')
          onEvent({ type, object: object as T });
      } catch (error) {
        end(error);
      }
    };
    new k8s.Watch(this.config)
      .watch(this.path, query, deliver, (error: unknown) => end(watchEndError(error)))
      .then(
        (started) => {
          controller = started;
          if (finished) started.abort();
        },
        (error: unknown) => end(toKubeError(error)),
      );
    return {
      abort: () => {
        finished = true;
        controller?.abort();
      },
    };
  }

  private selectors(): Record<string, string> {
    return {
      ...(this.ref.labelSelector ? { labelSelector: this.ref.labelSelector } : {}),
      ...(this.ref.fieldSelector ? { fieldSelector: this.ref.fieldSelector } : {}),
    };
  }

  private async get<B>(query: Record<string, string>, signal?: AbortSignal): Promise<B> {
    const server = this.config.getCurrentCluster()?.server;
    if (!server) throw new Error('the kubeconfig names no current cluster');
    const request = new k8s.RequestContext(`${server}${this.path}`, k8s.HttpMethod.GET);
    for (const [name, value] of Object.entries(query)) request.setQueryParam(name, value);
    request.setHeaderParam('Accept', 'application/json');
    if (signal) request.setSignal(signal);
    try {
      await this.config.applySecurityAuthentication(request);
      const response = await new k8s.IsomorphicFetchHttpLibrary().send(request).toPromise();
      const text = await response.body.text();
      if (response.httpStatusCode >= 200 && response.httpStatusCode < 300)
        return JSON.parse(text) as B;
      throw new k8s.ApiException(response.httpStatusCode, 'list failed', text, response.headers);
    } catch (error) {
      if (signal?.aborted) throw error; // ours: not a failure of the server
      throw toKubeError(error);
    }
  }
}

function statusError(status: RawStatus): KubeApiError {
  return new KubeApiError(
    typeof status.code === 'number' ? status.code : 500,
    status.reason,
    status.message ?? 'watch ERROR event',
  );
}

/** How client-node's `done` callback describes the end, as the port's onDone argument. */
function watchEndError(error: unknown): unknown {
  if (error === null || error === undefined) return undefined;
  // The 30 s inactivity timeout of client-node's Watch: a quiet stream, not a failure.
  if ((error as { name?: unknown }).name === 'TimeoutError') return undefined;
  const status = (error as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number')
    return new KubeApiError(status, undefined, `watch answered HTTP ${status}`);
  return toKubeError(error);
}
