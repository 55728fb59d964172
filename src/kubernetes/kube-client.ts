import * as k8s from '@kubernetes/client-node';
import { type Dispatcher, getGlobalDispatcher, request } from 'undici';
import type { Metrics } from '../metrics/metrics.js';
import { toKubeError } from './errors.js';
import { countingInterceptor } from './request-metrics.js';

/** Where to find the cluster: an explicit server (tests, the API server double) or kubeconfig. */
export type KubeTarget =
  | { kind: 'default' }
  | { kind: 'file'; path: string }
  /** In a pod: the service account's token and the in-cluster API server address. */
  | { kind: 'cluster' }
  | { kind: 'server'; server: string; token: string; namespace: string; skipTlsVerify?: boolean };

export interface KubeServerVersion {
  readonly major: string;
  readonly minor: string;
  readonly gitVersion: string;
}

/**
 * client-node 2.0.1 makes a new undici Agent in every `applySecurityAuthentication` for a cluster
 * with TLS settings (a CA, a client certificate, or skipTLSVerify): each API call then opened its
 * own connection (a TLS handshake on a real API server), whose socket and pool lingered for the
 * keep-alive timeout. As client-node's own http.Agent cache (createAgent) does, this keeps the
 * first dispatcher made for a cluster and user and hands it to every later request, so requests
 * and watches share keep-alive connections. Credentials sent as headers (tokens) are still set
 * per request; TLS material is read once per cluster and user, as that cache reads it.
 *
 * Every request to the API server passes here (the generated clients, watches, raw lists, log
 * streams and `KubeClient.json`), and each is sent through the dispatcher set here: with
 * `metrics`, that dispatcher counts each request by verb and status (request-metrics.ts).
 */
class PooledKubeConfig extends k8s.KubeConfig {
  private readonly dispatchers = new Map<string, Dispatcher>();
  /** The global dispatcher, counting: for clusters client-node makes no dispatcher for. */
  private countedGlobal: Dispatcher | undefined;

  constructor(
    private readonly userAgent: string,
    private readonly metrics: Metrics | undefined,
  ) {
    super();
  }

  /**
   * As client-node's own, with kiln's User-Agent instead of `kubernetes-client-javascript/…`: the
   * generated clients set it in a middleware that runs after authentication.
   */
  override makeApiClient<T extends k8s.ApiType>(api: k8s.ApiConstructor<T>): T {
    const cluster = this.getCurrentCluster();
    if (!cluster) throw new Error('No active cluster!');
    return new api(
      k8s.createConfiguration({
        baseServer: new k8s.ServerConfiguration(cluster.server, {}),
        authMethods: { default: this },
        middleware: [k8s.setHeaderMiddleware('User-Agent', this.userAgent)],
      }),
    );
  }

  override async applySecurityAuthentication(context: k8s.RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    // Every request says which part of kiln sent it (watches, lists and log streams come through
    // here only): API server audit logs, and the chart's RBAC test, tell them apart.
    context.setHeaderParam('User-Agent', this.userAgent);
    const made = context.getDispatcher();
    if (made === undefined) {
      // client-node's global dispatcher: pooled already; counted through a wrapper of it.
      if (this.metrics === undefined) return;
      this.countedGlobal ??= getGlobalDispatcher().compose(countingInterceptor(this.metrics));
      context.setDispatcher(this.countedGlobal);
      return;
    }
    const key = JSON.stringify([this.getCurrentCluster()?.name, this.getCurrentUser()?.name]);
    let kept = this.dispatchers.get(key);
    if (kept === undefined) {
      kept = this.metrics === undefined ? made : made.compose(countingInterceptor(this.metrics));
      this.dispatchers.set(key, kept);
    }
    context.setDispatcher(kept);
  }
}

/** A name as one segment of an API path. */
export function segment(name: string): string {
  return encodeURIComponent(name);
}

/**
 * kiln's one door to @kubernetes/client-node: nothing outside src/kubernetes/ imports it.
 * Later issues add the typed clients (Builds, Jobs, Pods, Leases) here.
 */
export class KubeClient {
  private constructor(private readonly config: k8s.KubeConfig) {}

  /**
   * `userAgent` names the sender in the API server's logs: `kiln-api`, `kiln-operator`, `kiln`.
   * With `metrics`, every request is counted in kiln_kube_api_requests_total.
   */
  static connect(target: KubeTarget, userAgent = 'kiln', metrics?: Metrics): KubeClient {
    const config = new PooledKubeConfig(userAgent, metrics);
    switch (target.kind) {
      case 'default':
        config.loadFromDefault();
        break;
      case 'file':
        config.loadFromFile(target.path);
        break;
      case 'cluster':
        config.loadFromCluster();
        break;
      case 'server':
        config.loadFromOptions({
          clusters: [
            {
              name: 'kiln',
              server: target.server,
              // client-node refuses http:// servers unless TLS verification is off.
              skipTLSVerify: target.skipTlsVerify ?? target.server.startsWith('http://'),
            },
          ],
          users: [{ name: 'kiln', token: target.token }],
          contexts: [{ name: 'kiln', cluster: 'kiln', user: 'kiln', namespace: target.namespace }],
          currentContext: 'kiln',
        });
        break;
    }
    return new KubeClient(config);
  }

  get server(): string | undefined {
    return this.config.getCurrentCluster()?.server;
  }

  get namespace(): string {
    return this.config.getContextObject(this.config.getCurrentContext())?.namespace ?? 'default';
  }

  /** A generated API client for sibling adapters in src/kubernetes/ (never exported further). */
  apiClient<T extends k8s.ApiType>(api: k8s.ApiConstructor<T>): T {
    return this.config.makeApiClient(api);
  }

  /** The loaded config, for sibling adapters that need more than an API client (Watch, raw lists). */
  get kubeConfig(): k8s.KubeConfig {
    return this.config;
  }

  /**
   * The URL, headers and dispatcher of a raw request to the API server, authenticated as the
   * generated clients are (for streams client-node does not expose: pod logs).
   */
  async rawRequest(
    path: string,
  ): Promise<{ url: URL; headers: Record<string, string>; dispatcher: unknown }> {
    const server = this.server;
    if (server === undefined) throw new Error('no current cluster in the kubeconfig');
    const url = new URL(server.replace(/\/+$/, '') + path);
    const context = new k8s.RequestContext(url.toString(), k8s.HttpMethod.GET);
    await this.config.applySecurityAuthentication(context);
    return { url, headers: context.getHeaders(), dispatcher: context.getDispatcher() };
  }

  /**
   * One JSON request to the API server, authenticated as the generated clients are, its answer
   * the parsed JSON as sent (timestamps stay strings). For the writes of every build (its Build,
   * Job, Event and status): client-node's generated clients spend most of an operator's CPU on
   * them (model serialization both ways, WHATWG fetch); undici's `request` does not.
   * Errors as kubeCall's: KubeApiError, or KubeUnavailableError when no server answered.
   */
  async json<T>(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    let text: string;
    let status: number;
    try {
      const { url, headers, dispatcher } = await this.rawRequest(path);
      const response = await request(url, {
        method,
        headers: {
          ...headers,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': contentType }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(dispatcher === undefined ? {} : { dispatcher: dispatcher as Dispatcher }),
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      throw toKubeError(error);
    }
    // Status bodies read as client-node's errors are: KubeApiError, or unavailable on 5xx.
    if (status >= 400) throw toKubeError({ code: status, body: text });
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** GET /version: proves the cluster answers and the credentials are accepted. */
  async serverVersion(): Promise<KubeServerVersion> {
    const info = await this.config.makeApiClient(k8s.VersionApi).getCode();
    return { major: info.major, minor: info.minor, gitVersion: info.gitVersion };
  }
}
