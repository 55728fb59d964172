import { randomUUID } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { AdmissionWebhooks } from './admission-webhooks.js';
import { validateRules } from './cel.js';
import {
  alreadyExists,
  badRequest,
  conflict,
  fieldErrors,
  gone,
  invalid,
  methodNotAllowed,
  MODIFIED_CONFLICT,
  notFound,
  StatusError,
  unsupportedMediaType,
  type FieldError,
} from './errors.js';
import {
  defaultBuiltIn,
  foldStringData,
  hasGeneration,
  prepareBuiltInForCreate,
  validateBuiltIn,
  validateLabels,
  validateName,
} from './builtin-rules.js';
import {
  applyMerge,
  changedFields,
  fieldPathText,
  fieldSetOf,
  fromFieldsV1,
  managedEntries,
  removeAt,
  toFieldsV1,
  valueAt,
  type ManagedFieldsEntry,
} from './managed-fields.js';
import { EventRecorder, type EventNote, type EventSource } from './events.js';
import { openApiV2, openApiV3Document, openApiV3Index } from './openapi.js';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.js';
import { podSecurityDetail, podSecurityPolicy, policyName } from './pod-security-admission.js';
import { decodeKubernetesProtobuf, PROTOBUF, ProtobufError } from './protobuf.js';
import { FakeKueue, KUEUE_CRDS, VISIBILITY_GROUP, type KueueHost } from './kueue.js';
import { admitPodToQuotas, FakeResourceQuotaController } from './quota.js';
import { builtInResources, crdsInDirectory, resourcesOfCrd } from './resources.js';
import { pruneAndDefault, unknownFields, validateSchema } from './schema.js';
import { EVENT_FIELDS, FieldSelector, LabelSelector } from './selectors.js';
import { ObjectStore, type StoredEvent, type WatchEventType } from './store.js';
import { toTable } from './tables.js';
import { generateTlsMaterial, type TlsMaterial } from './tls.js';
import {
  FakeJobController,
  FakeKubelet,
  nowNanos,
  rfc3339Nano,
  type ClusterHost,
  type FakeJobControllerOptions,
  type FakeKubeletOptions,
} from './kubelet.js';
import {
  apiVersionOf,
  clone,
  isObject,
  type Json,
  type JsonObject,
  type KubeObject,
  type ResourceType,
} from './types.js';

export interface KubeApiServerOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /**
   * Directories of CRD YAML files (apiextensions.k8s.io/v1) stored at start as if created: they
   * are served, and listed and changed like CRDs created later through the API.
   */
  crdDirectories?: string[];
  /** How many changes the watch history keeps; older resourceVersions get 410 Gone. */
  historyLimit?: number;
  /** How often a watch with allowWatchBookmarks=true gets a BOOKMARK. */
  bookmarkIntervalMs?: number;
  /** Namespaces that exist from the start. */
  namespaces?: string[];
  /**
   * When set, a request without `Authorization: Bearer <token>` (or with another token) gets a
   * 401 Status `Unauthorized`, as in-cluster clients send their service account token.
   */
  token?: string;
  /**
   * Serve HTTPS: `true` makes a self-signed CA and a server certificate for 127.0.0.1 and
   * localhost at start (with the openssl CLI); pass `TlsMaterial` to reuse ones already made.
   * `caPem` then holds the CA clients must trust, and `url` is https://.
   */
  tls?: boolean | TlsMaterial;
  /** The fake kubelet (runs pods of Jobs by per-image scripts); `false` turns it off. */
  kubelet?: FakeKubeletOptions | false;
  /** The fake Job controller (creates and counts a Job's pods); `false` turns it off. */
  jobController?: FakeJobControllerOptions | false;
  /**
   * Run the quota controller, which keeps each ResourceQuota's `status.hard` and `status.used`
   * (quota.ts). Off by default: without it quotas have no status and so, as in a cluster whose
   * controller has not synced them, limit nothing. Pod creates over a quota are refused only
   * with it on (`resourceQuotaController.enabled` switches it at run time).
   */
  resourceQuotaController?: boolean;
  /**
   * Install Kueue (kueue.x-k8s.io/v1beta1): its CRDs (Workload, LocalQueue, ClusterQueue,
   * ResourceFlavor, from test/support/kube/fixtures/kueue), the fake Kueue controller (kueue.ts:
   * the Job webhook's defaults, the Job integration, the scheduler, queue status) and the
   * visibility API's pendingworkloads. Off by default: without it the double knows no Kueue.
   */
  kueue?: boolean;
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  accept?: string;
  userAgent?: string;
}

interface Fault {
  method?: string;
  path: string | RegExp;
  status: number;
  remaining: number;
  reason: string;
  message: string;
  retryAfterSeconds?: number;
}

interface Delay {
  method?: string;
  path?: string | RegExp;
  ms: number;
  remaining: number;
}

/** Which requests a fault applies to: a path (exact) or pattern, and optionally a method. */
export interface RequestMatch {
  path?: string | RegExp;
  method?: string;
}

/** Which open log streams a log fault applies to (all when empty). */
export interface LogStreamMatch {
  namespace?: string;
  pod?: string;
  container?: string;
}

interface LogFollower {
  namespace: string;
  pod: string;
  container: string;
  res: ServerResponse;
  wake: () => void;
  stop: () => void;
  stalled: boolean;
  cut: boolean;
}

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  query: URLSearchParams;
  type: ResourceType;
  namespace?: string;
  name?: string;
  subresource?: string;
  dryRun: boolean;
  warnings: string[];
}

interface LogLine {
  ns: bigint;
  text: string;
}

const MAX_BODY = 3 * 1024 * 1024;
const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
const nowRfc3339 = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const storageKey = (type: ResourceType): string => `${type.group}/${type.plural}`;
const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];
const CRD_KEY = 'apiextensions.k8s.io/customresourcedefinitions';

/** A request URL's path as `handle` matches it (no trailing slash). */
const requestPath = (url: string | undefined): string => {
  const { pathname } = new URL(url ?? '/', 'http://double');
  return pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
};
/** An exact path or a pattern; undefined matches every path. */
const pathMatches = (pattern: string | RegExp | undefined, path: string): boolean =>
  pattern === undefined || (typeof pattern === 'string' ? pattern === path : pattern.test(path));

/**
 * A Kubernetes API server double over real HTTP: discovery, OpenAPI for kubectl, CRUD with the
 * real semantics (resourceVersion, generation, status subresource, finalizers, owner-reference
 * garbage collection, four patch types), watch with bookmarks and 410 Gone, CRD schema
 * validation. It serves the built-ins kiln and its Helm chart use (resources.ts; their defaults
 * and validation in builtin-rules.ts) and every stored CRD: creating one serves its resources,
 * deleting one stops that and deletes its objects. Tests drive it through client-node or kubectl
 * and inspect or perturb it through the control methods (`object`, `seed`, `requestCount`,
 * `failNext`, `closeWatches`, `compact`). Creates pass validating admission as on a real server:
 * PodSecurity by the namespace's labels, validating webhooks (a fault hook: `admissionWebhooks`)
 * and ResourceQuota for pods; its controllers report in core/v1 Events (events.ts).
 */
export class KubeApiServer implements ClusterHost, KueueHost {
  readonly store: ObjectStore;
  /** The fake kubelet: register scripts with `kubelet.script(image, {...})`; `enabled = false` pauses it. */
  readonly kubelet: FakeKubelet;
  /** The fake Job controller; `enabled = false` stops it from acting (per test). */
  readonly jobController: FakeJobController;
  /** The quota controller (see KubeApiServerOptions.resourceQuotaController). */
  readonly resourceQuotaController: FakeResourceQuotaController;
  /** The fake Kueue, when installed (KubeApiServerOptions.kueue); `enabled = false` pauses it. */
  readonly kueue: FakeKueue | undefined;
  /**
   * Fault hook for validating admission webhooks: `admissionWebhooks.deny({ name, message })`
   * makes matching creates (a controller's too) fail as a denying webhook makes them fail.
   */
  readonly admissionWebhooks = new AdmissionWebhooks();
  private readonly eventRecorder: EventRecorder;
  readonly requests: RecordedRequest[] = [];
  private readonly builtIns = builtInResources();
  /** The resources of each stored CRD, by CRD name, kept in step with the store. */
  private readonly crdTypes = new Map<string, ResourceType[]>();
  /** What the server serves: the built-ins, then the served versions of every stored CRD. */
  private types: ResourceType[] = this.builtIns;
  private readonly server: HttpServer | HttpsServer;
  /** The PEM of the CA that signed the server certificate (TLS servers only). */
  readonly caPem?: string;
  private readonly sockets = new Set<Socket>();
  private readonly watches = new Set<ServerResponse>();
  private readonly faults: Fault[] = [];
  private readonly delays: Delay[] = [];
  private held = 0;
  /** blackholeWatches: the faults in force, and the watches they silenced (for good). */
  private readonly blackholes = new Set<{ path?: string | RegExp; healed: Promise<void> }>();
  private readonly silencedWatches = new WeakSet<ServerResponse>();
  private goneWatches: { path?: string | RegExp; remaining: number; asEvent: boolean }[] = [];
  private readonly logs = new Map<string, LogLine[]>();
  private readonly logFollowers = new Set<LogFollower>();
  private offline = false;
  private gcScheduled = false;
  private address?: AddressInfo;

  private constructor(private readonly options: KubeApiServerOptions) {
    this.store = new ObjectStore(options.historyLimit ?? 1000);
    this.eventRecorder = new EventRecorder(this.store);
    // A CRD is an object like any other: creating, changing or deleting one (by any path: a
    // request, `seed`, the garbage collector) changes what the server serves from then on.
    this.store.subscribe((event) => {
      if (event.resource === CRD_KEY) this.crdChanged(event);
    });
    const handler = (req: IncomingMessage, res: ServerResponse): void => void this.handle(req, res);
    if (options.tls) {
      const material = options.tls === true ? generateTlsMaterial() : options.tls;
      this.caPem = material.caPem;
      this.server = createHttpsServer({ cert: material.certPem, key: material.keyPem }, handler);
      // A client that refuses the certificate just closes; that is no error of the double.
      this.server.on('tlsClientError', (_error, socket) => socket.destroy());
    } else {
      this.server = createServer(handler);
    }
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    const namespaceType = this.typeOf('', 'namespaces');
    for (const name of options.namespaces ?? SYSTEM_NAMESPACES)
      this.seed({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }, namespaceType);
    const crdDirectories = [
      ...(options.crdDirectories ?? []),
      ...(options.kueue ? [KUEUE_CRDS] : []),
    ];
    for (const crd of crdDirectories.flatMap(crdsInDirectory)) {
      prepareBuiltInForCreate(crd);
      this.seed(crd, this.typeOf('apiextensions.k8s.io', 'customresourcedefinitions'));
    }
    this.kubelet = new FakeKubelet(this, options.kubelet === false ? {} : options.kubelet);
    this.kubelet.enabled = options.kubelet !== false;
    this.jobController = new FakeJobController(
      this,
      options.jobController === false ? {} : options.jobController,
    );
    this.jobController.enabled = options.jobController !== false;
    this.resourceQuotaController = new FakeResourceQuotaController(this.store);
    this.resourceQuotaController.enabled = options.resourceQuotaController === true;
    this.kueue = options.kueue ? new FakeKueue(this) : undefined;
    // Logs live as long as their pod object.
    this.store.subscribe((event) => {
      if (event.resource !== storageKey(this.typeOf('', 'pods')) || event.type !== 'DELETED')
        return;
      const prefix = `${event.object.metadata.namespace ?? ''}/${event.object.metadata.name ?? ''}/`;
      for (const key of [...this.logs.keys()]) if (key.startsWith(prefix)) this.logs.delete(key);
    });
  }

  static async start(options: KubeApiServerOptions = {}): Promise<KubeApiServer> {
    const double = new KubeApiServer(options);
    await new Promise<void>((resolve, reject) => {
      double.server.once('error', reject);
      double.server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve);
    });
    double.address = double.server.address() as AddressInfo;
    return double;
  }

  get url(): string {
    const address = this.address;
    if (!address) throw new Error('KubeApiServer is not listening');
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `${this.caPem === undefined ? 'http' : 'https'}://${host}:${address.port}`;
  }

  get port(): number {
    return this.address?.port ?? 0;
  }

  /** The bearer token the server requires (`options.token`), if any. */
  get token(): string | undefined {
    return this.options.token;
  }

  async stop(): Promise<void> {
    this.kubelet.stop();
    this.jobController.stop();
    this.resourceQuotaController.stop();
    this.kueue?.stop();
    this.closeWatches();
    for (const follower of [...this.logFollowers]) follower.stop();
    for (const socket of this.sockets) socket.destroy();
    if (!this.offline) await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- control API for tests -------------------------------------------------------------

  /** The resource type for an apiVersion and plural (or kind), e.g. ('kiln.dev/v1alpha1', 'builds'). */
  resource(apiVersion: string, pluralOrKind: string): ResourceType {
    const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
    const found = this.types.find(
      (t) =>
        t.group === group &&
        t.version === version &&
        (t.plural === pluralOrKind || t.kind === pluralOrKind),
    );
    if (!found) throw new Error(`the double does not serve ${pluralOrKind} in ${apiVersion}`);
    return found;
  }

  /** The stored object (a copy), or undefined. */
  object(
    apiVersion: string,
    pluralOrKind: string,
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined {
    const type = this.resource(apiVersion, pluralOrKind);
    return this.store.get(storageKey(type), type.namespaced ? namespace : undefined, name);
  }

  objects(apiVersion: string, pluralOrKind: string, namespace?: string): KubeObject[] {
    return this.store.list(storageKey(this.resource(apiVersion, pluralOrKind)), namespace);
  }

  /**
   * Stores an object as it is (no validation, no defaults beyond identity metadata), as a test
   * fixture or a controller the double does not run would. Emits the watch event.
   */
  seed(object: KubeObject, type = this.resource(object.apiVersion, object.kind)): KubeObject {
    const stored = clone(object);
    const existing = this.store.get(
      storageKey(type),
      stored.metadata.namespace,
      stored.metadata.name ?? '',
    );
    stored.metadata = {
      ...(existing?.metadata ?? {}),
      uid: existing?.metadata.uid ?? randomUUID(),
      creationTimestamp: existing?.metadata.creationTimestamp ?? nowRfc3339(),
      ...(hasGeneration(type) ? { generation: existing?.metadata.generation ?? 1 } : {}),
      ...stored.metadata,
    };
    if (type.namespaced) stored.metadata.namespace ??= 'default';
    if (type.kind === 'Namespace') stored.status ??= { phase: 'Active' };
    const result = this.store.put(storageKey(type), stored);
    this.scheduleGc();
    return result;
  }

  /** How many requests reached a path (exact string) or matched a pattern, optionally by method. */
  requestCount(path: string | RegExp, method?: string): number {
    return this.requests.filter(
      (r) =>
        (method === undefined || r.method === method) &&
        (typeof path === 'string' ? r.path === path : path.test(r.path)),
    ).length;
  }

  /**
   * Answers the next `count` requests to a path (or pattern), optionally of one method, with
   * `status` and a Status body. A 429 carries `Retry-After` (`retryAfterSeconds`, default 1) and
   * `details.retryAfterSeconds`, as the real server's priority-and-fairness rejections do.
   */
  failNext(
    path: string | RegExp,
    status: number,
    options: {
      count?: number;
      method?: string;
      reason?: string;
      message?: string;
      retryAfterSeconds?: number;
    } = {},
  ): void {
    const retryAfterSeconds = options.retryAfterSeconds ?? (status === 429 ? 1 : undefined);
    this.faults.push({
      path,
      status,
      remaining: options.count ?? 1,
      reason:
        options.reason ??
        (status === 429 ? 'TooManyRequests' : status >= 500 ? 'InternalError' : 'BadRequest'),
      message:
        options.message ??
        (status === 429
          ? 'Too many requests, please try again later.'
          : `injected failure (${status})`),
      ...(options.method ? { method: options.method } : {}),
      ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}),
    });
  }

  /**
   * The next `count` watch requests (to `path`, or any) get 410 Gone: by default as the real
   * server does it, an HTTP 200 with one `ERROR` event carrying the Status; `asEvent: false`
   * answers HTTP 410 instead.
   */
  goneNextWatch(options: { path?: string | RegExp; count?: number; asEvent?: boolean } = {}): void {
    this.goneWatches.push({
      ...(options.path !== undefined ? { path: options.path } : {}),
      remaining: options.count ?? 1,
      asEvent: options.asEvent ?? true,
    });
  }

  /** Requests a `delayRequests` delay holds now: not answered yet. */
  get heldRequests(): number {
    return this.held;
  }

  /** Resolves once `delayRequests` delays hold exactly `count` requests. */
  async untilHeld(count: number): Promise<void> {
    while (this.held !== count) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /** Delays the answer to the next `count` (default: every) matching request by `ms`. */
  delayRequests(ms: number, match: RequestMatch & { count?: number } = {}): () => void {
    const delay: Delay = {
      ms,
      remaining: match.count ?? Number.POSITIVE_INFINITY,
      ...(match.path !== undefined ? { path: match.path } : {}),
      ...(match.method !== undefined ? { method: match.method } : {}),
    };
    this.delays.push(delay);
    return () => {
      delay.remaining = 0;
    };
  }

  /**
   * Open log streams that match stop sending bytes while their containers keep running (as after
   * a kubelet log rotation): the connection stays open and nothing more arrives. Returns how many.
   */
  stallLogStreams(match: LogStreamMatch = {}): number {
    const hit = this.matchingFollowers(match);
    for (const f of hit) f.stalled = true;
    return hit.length;
  }

  /**
   * Open log streams that match send half of their next line, then their socket is destroyed
   * (at once when a line is already waiting, else when the container prints the next one).
   * Returns how many streams will be cut.
   */
  cutLogStreams(match: LogStreamMatch = {}): number {
    const hit = this.matchingFollowers(match);
    for (const f of hit) {
      f.cut = true;
      f.wake();
    }
    return hit.length;
  }

  /** Open `follow=true` log streams, e.g. to wait until a client is following. */
  openLogStreams(match: LogStreamMatch = {}): number {
    return this.matchingFollowers(match).length;
  }

  private matchingFollowers(match: LogStreamMatch): LogFollower[] {
    return [...this.logFollowers].filter(
      (f) =>
        (match.namespace === undefined || f.namespace === match.namespace) &&
        (match.pod === undefined || f.pod === match.pod) &&
        (match.container === undefined || f.container === match.container),
    );
  }

  /**
   * Makes the server unreachable: it stops accepting connections (connect gets ECONNREFUSED) and
   * destroys every open socket, watches and log streams included. The cluster keeps running
   * (the kubelet and the Job controller go on). `goOnline()` listens again on the same port.
   */
  async goOffline(): Promise<void> {
    if (this.offline) return;
    this.offline = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  async goOnline(): Promise<void> {
    if (!this.offline) return;
    const port = this.port;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.options.host ?? '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.offline = false;
  }

  /** Offline for `ms`, then online again; resolves when the server is back. */
  async unreachableFor(ms: number): Promise<void> {
    await this.goOffline();
    await new Promise((resolve) => setTimeout(resolve, ms));
    await this.goOnline();
  }

  get isOffline(): boolean {
    return this.offline;
  }

  /** Ends every open watch now, as an API server restart or a load balancer would. */
  closeWatches(): void {
    for (const res of [...this.watches]) res.end();
    this.watches.clear();
  }

  get openWatches(): number {
    return this.watches.size;
  }

  /**
   * Blackholes the watches of a path (exact, or a pattern; every watch when omitted) as a network
   * path that drops packets without a reset does (a NAT or load-balancer flow lost, a partition):
   * an open watch that matches gets nothing more, no event, no BOOKMARK, not even its end at
   * `timeoutSeconds`, while its socket stays open. That is for good: after the heal the flow is
   * still dead, and only the client can notice and close it. A watch request that matches while
   * the blackhole lasts gets no answer at all (no status line), as a new connection over the same
   * path would not; it is served once the blackhole heals, if its client still waits. Other
   * requests (lists, writes, log streams) are served: the fault is the watches'. Returns how many
   * open watches went silent, and the heal.
   */
  blackholeWatches(match: { path?: string | RegExp } = {}): { silenced: number; heal: () => void } {
    let heal: () => void = () => undefined;
    const hole = {
      ...(match.path !== undefined ? { path: match.path } : {}),
      healed: new Promise<void>((resolve) => (heal = resolve)),
    };
    this.blackholes.add(hole);
    let silenced = 0;
    for (const res of this.watches)
      if (pathMatches(hole.path, requestPath(res.req.url))) {
        this.silencedWatches.add(res);
        silenced++;
      }
    return {
      silenced,
      heal: () => {
        this.blackholes.delete(hole);
        heal();
      },
    };
  }

  /** Holds a watch request while a blackhole covers its path; false when its client left. */
  private async throughBlackholes(path: string, res: ServerResponse): Promise<boolean> {
    for (;;) {
      const hole = [...this.blackholes].find((b) => pathMatches(b.path, path));
      if (hole === undefined) return !res.destroyed;
      await hole.healed;
    }
  }

  /** Forgets the change history: every earlier resourceVersion now gets 410 Gone. */
  compact(): void {
    this.store.compact();
  }

  /** Stores container output for `pods/log` (each line with its kubelet timestamp). */
  appendPodLog(
    namespace: string,
    pod: string,
    container: string,
    lines: string[],
    time = new Date(),
  ): void {
    this.appendLog(namespace, pod, container, lines, BigInt(time.getTime()) * 1_000_000n);
  }

  /**
   * ClusterHost: the kubelet's output; lines of one call share one nanosecond timestamp. A string
   * holding '\n' is stored as its lines, as a node logs one entry per line (kubelet.ts logLines).
   */
  appendLog(
    namespace: string,
    pod: string,
    container: string,
    lines: string[],
    at: bigint = nowNanos(),
  ): void {
    const key = `${namespace}/${pod}/${container}`;
    const stored = this.logs.get(key) ?? [];
    for (const text of lines)
      if (!text.includes('\n')) stored.push({ ns: at, text });
      else for (const line of text.split('\n')) stored.push({ ns: at, text: line });
    this.logs.set(key, stored);
    const woken = [...this.logFollowers].filter(
      (follower) =>
        follower.namespace === namespace &&
        follower.pod === pod &&
        follower.container === container,
    );
    for (const follower of woken) follower.wake();
  }

  /** ClusterHost: create as kube-controller-manager would, through the normal create path. */
  createAsController(apiVersion: string, kind: string, object: KubeObject): KubeObject {
    return this.createAs('kube-controller-manager', apiVersion, kind, object);
  }

  /** KueueHost: create as a component whose field manager is `manager`, as a POST would. */
  createAs(manager: string, apiVersion: string, kind: string, object: KubeObject): KubeObject {
    const type = this.resource(apiVersion, kind);
    const ctx = this.internalCtx(type, object.metadata.namespace, manager);
    return this.create(ctx, clone(object) as unknown as Json);
  }

  /**
   * KueueHost: replace as a component whose field manager is `manager`, as a PUT (of `/status`
   * when asked) would: the object's resourceVersion must be current.
   */
  updateAs(
    manager: string,
    apiVersion: string,
    kind: string,
    object: KubeObject,
    subresource?: 'status',
  ): KubeObject {
    const type = this.resource(apiVersion, kind);
    const ctx: Ctx = {
      ...this.internalCtx(type, object.metadata.namespace, manager),
      ...(subresource !== undefined ? { subresource } : {}),
    };
    return this.update(ctx, object.metadata.name ?? '', clone(object) as unknown as Json).object;
  }

  /** ClusterHost: delete as a controller would (the same rules as a DELETE request). */
  deleteAsController(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
    policy: 'Background' | 'Foreground' | 'Orphan',
  ): void {
    const type = this.resource(apiVersion, kind);
    if (!this.store.get(storageKey(type), namespace, name)) return;
    const ctx = this.internalCtx(type, namespace, 'kube-controller-manager');
    this.delete(ctx, name, { propagationPolicy: policy });
  }

  /**
   * ClusterHost: an Event about an object, as a component's event recorder writes it (events.ts:
   * the same note again bumps count and lastTimestamp of one Event).
   */
  recordEvent(involved: KubeObject, source: EventSource, note: EventNote): KubeObject {
    return this.eventRecorder.record(involved, source, note);
  }

  /** ClusterHost: the kubelet's final removal of a terminated pod. */
  removePod(namespace: string, name: string): void {
    this.store.remove(storageKey(this.typeOf('', 'pods')), namespace, name);
    this.scheduleGc();
  }

  private internalCtx(type: ResourceType, namespace: string | undefined, agent: string): Ctx {
    return {
      req: { headers: { 'user-agent': `${agent}/v1.34.0` } } as unknown as IncomingMessage,
      res: undefined as unknown as ServerResponse,
      query: new URLSearchParams(),
      type,
      ...(namespace !== undefined && type.namespaced ? { namespace } : {}),
      dryRun: false,
      warnings: [],
    };
  }

  /** Resolves when no garbage collection is pending (owner cascades, namespace cleanup). */
  async settled(): Promise<void> {
    while (this.gcScheduled) await new Promise((resolve) => setImmediate(resolve));
  }

  // ---- HTTP plumbing ------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://double');
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
    const method = req.method ?? 'GET';
    this.requests.push({
      method,
      path,
      query: Object.fromEntries(url.searchParams),
      ...(req.headers['content-type'] ? { contentType: req.headers['content-type'] } : {}),
      ...(req.headers.accept ? { accept: req.headers.accept } : {}),
      ...(req.headers['user-agent'] ? { userAgent: req.headers['user-agent'] } : {}),
    });
    const matches = (pattern: string | RegExp | undefined): boolean =>
      pattern === undefined ||
      (typeof pattern === 'string' ? pattern === path : pattern.test(path));
    try {
      const delay = this.delays.find(
        (d) =>
          d.remaining > 0 && (d.method === undefined || d.method === method) && matches(d.path),
      );
      if (delay) {
        delay.remaining--;
        this.held++;
        try {
          await new Promise((resolve) => setTimeout(resolve, delay.ms));
        } finally {
          this.held--;
        }
      }
      const fault = this.faults.find(
        (f) =>
          f.remaining > 0 && (f.method === undefined || f.method === method) && matches(f.path),
      );
      if (fault) {
        fault.remaining--;
        if (fault.retryAfterSeconds !== undefined)
          res.setHeader('retry-after', String(fault.retryAfterSeconds));
        throw new StatusError(
          fault.status,
          fault.reason,
          fault.message,
          fault.retryAfterSeconds !== undefined
            ? { retryAfterSeconds: fault.retryAfterSeconds }
            : undefined,
        );
      }
      const isWatch =
        method === 'GET' && ['true', '1'].includes(url.searchParams.get('watch') ?? '');
      if (isWatch && !(await this.throughBlackholes(path, res))) return;
      const gone = isWatch
        ? this.goneWatches.find((g) => g.remaining > 0 && matches(g.path))
        : undefined;
      if (gone) {
        gone.remaining--;
        const status = new StatusError(
          410,
          'Expired',
          `too old resource version: ${url.searchParams.get('resourceVersion') ?? ''} (${this.store.currentRv})`,
        );
        if (!gone.asEvent) throw status;
        res.writeHead(200, {
          'content-type': 'application/json',
          'cache-control': 'no-cache, private',
        });
        res.end(`${JSON.stringify({ type: 'ERROR', object: status.toStatus() })}\n`);
        return;
      }
      const token = this.options.token;
      if (token !== undefined && req.headers.authorization !== `Bearer ${token}`)
        throw new StatusError(401, 'Unauthorized', 'Unauthorized');
      await this.route(req, res, method, path, url.searchParams);
    } catch (error) {
      const status =
        error instanceof StatusError
          ? error
          : new StatusError(
              500,
              'InternalError',
              `Internal error occurred: ${(error as Error).message}`,
            );
      if (res.headersSent) {
        res.end();
        return;
      }
      this.send(res, status.code, status.toStatus());
    }
  }

  private send(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
    const text = JSON.stringify(body);
    res.writeHead(code, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'cache-control': 'no-cache, private',
      ...(warnings.length > 0
        ? { warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`).join(', ') }
        : {}),
    });
    res.end(text);
  }

  private async readBody(req: IncomingMessage): Promise<string> {
    return (await this.readBytes(req)).toString('utf8');
  }

  private async readBytes(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY)
        throw new StatusError(
          413,
          'RequestEntityTooLarge',
          'Request entity too large: limit is 3145728',
        );
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  private async readJson(req: IncomingMessage): Promise<Json> {
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
    if (contentType === PROTOBUF) return this.readProtobuf(req, contentType);
    if (contentType.includes('protobuf') || contentType.includes('cbor'))
      throw unsupportedMediaType(contentType, ['application/json', 'application/yaml']);
    const text = await this.readBody(req);
    try {
      if (contentType === 'application/apply-patch+yaml' || contentType === 'application/yaml')
        return parseYaml(text) as Json;
      return JSON.parse(text) as Json;
    } catch (error) {
      throw badRequest(`error decoding request body: ${(error as Error).message}`);
    }
  }

  private async route(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    path: string,
    query: URLSearchParams,
  ): Promise<void> {
    if (method === 'GET') {
      const fixed = this.fixedDocument(path);
      if (fixed !== undefined) {
        this.send(res, 200, fixed);
        return;
      }
    }
    const segments = path.split('/').filter((s) => s !== '');
    let group: string;
    let version: string;
    let rest: string[];
    if (segments[0] === 'api' && segments[1] === 'v1') {
      group = '';
      version = 'v1';
      rest = segments.slice(2);
    } else if (segments[0] === 'apis' && segments.length >= 3) {
      group = segments[1] ?? '';
      version = segments[2] ?? '';
      rest = segments.slice(3);
    } else throw this.pageNotFound(path);
    // Kueue's visibility API is an aggregated API of its own, not a stored resource.
    if (this.kueue !== undefined && group === VISIBILITY_GROUP && version === 'v1beta1') {
      if (method !== 'GET') throw methodNotAllowed();
      const body =
        rest.length === 0 ? this.kueue.visibilityResources() : this.kueue.visibility(rest, query);
      if (body === undefined) throw this.pageNotFound(path);
      this.send(res, 200, body);
      return;
    }
    const inVersion = this.types.filter((t) => t.group === group && t.version === version);
    if (inVersion.length === 0) throw this.pageNotFound(path);
    if (rest.length === 0) {
      if (method !== 'GET') throw methodNotAllowed();
      this.send(res, 200, this.resourceList(group, version));
      return;
    }
    let namespace: string | undefined;
    let tail = rest;
    if (
      rest[0] === 'namespaces' &&
      rest.length >= 3 &&
      inVersion.some((t) => t.namespaced && t.plural === rest[2])
    ) {
      namespace = rest[1];
      tail = rest.slice(2);
    }
    const type = inVersion.find((t) => t.plural === tail[0]);
    if (!type || (type.namespaced && namespace === undefined && tail.length > 1))
      throw this.pageNotFound(path);
    if (!type.namespaced && namespace !== undefined) throw this.pageNotFound(path);
    const ctx: Ctx = {
      req,
      res,
      query,
      type,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(tail[1] !== undefined ? { name: tail[1] } : {}),
      ...(tail[2] !== undefined ? { subresource: tail[2] } : {}),
      dryRun: query.getAll('dryRun').includes('All'),
      warnings: [],
    };
    if (tail.length > 3) throw this.pageNotFound(path);
    if (ctx.subresource !== undefined && !this.hasSubresource(type, ctx.subresource))
      throw this.pageNotFound(path);
    await this.dispatch(ctx, method);
  }

  private pageNotFound(path: string): StatusError {
    return new StatusError(404, 'NotFound', `the server could not find the requested resource`, {
      causes: [{ reason: 'UnexpectedServerResponse', message: `404 page not found: ${path}` }],
    });
  }

  private hasSubresource(type: ResourceType, subresource: string): boolean {
    return (
      (subresource === 'status' && type.statusSubresource) ||
      (subresource === 'log' && type.kind === 'Pod')
    );
  }

  private async dispatch(ctx: Ctx, method: string): Promise<void> {
    const { name, subresource } = ctx;
    if (name === undefined) {
      switch (method) {
        case 'GET':
          if (['true', '1'].includes(ctx.query.get('watch') ?? '')) this.watch(ctx);
          else this.list(ctx);
          return;
        case 'POST':
          this.respond(ctx, 201, this.create(ctx, await this.readJson(ctx.req)));
          return;
        case 'DELETE':
          this.deleteCollection(ctx, await this.readOptionalJson(ctx.req));
          return;
        default:
          throw methodNotAllowed();
      }
    }
    if (subresource === 'log') {
      if (method !== 'GET') throw methodNotAllowed();
      this.podLog(ctx, name);
      return;
    }
    switch (method) {
      case 'GET':
        this.respond(ctx, 200, this.mustGet(ctx.type, ctx.namespace, name));
        return;
      case 'PUT': {
        const { code, object } = this.update(ctx, name, await this.readJson(ctx.req));
        this.respond(ctx, code, object);
        return;
      }
      case 'PATCH': {
        const { code, object } = await this.patch(ctx, name);
        this.respond(ctx, code, object);
        return;
      }
      case 'DELETE': {
        if (subresource !== undefined) throw methodNotAllowed();
        const { code, body } = this.delete(ctx, name, await this.readOptionalJson(ctx.req));
        this.send(ctx.res, code, body, ctx.warnings);
        return;
      }
      default:
        throw methodNotAllowed();
    }
  }

  /**
   * A typed client's body (helm's release Secrets, `kubectl create namespace`): the kinds
   * decodeKubernetesProtobuf knows, 415 for others as a server without their protobuf would.
   */
  private async readProtobuf(req: IncomingMessage, contentType: string): Promise<JsonObject> {
    const body = await this.readBytes(req);
    try {
      return decodeKubernetesProtobuf(body) as JsonObject;
    } catch (error) {
      if (error instanceof ProtobufError && error.unsupportedKind)
        throw unsupportedMediaType(contentType, ['application/json', 'application/yaml']);
      throw badRequest(`error decoding request body: ${(error as Error).message}`);
    }
  }

  private async readOptionalJson(req: IncomingMessage): Promise<JsonObject> {
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
    if (contentType === PROTOBUF) return this.readProtobuf(req, contentType);
    const text = await this.readBody(req);
    if (text.trim() === '') return {};
    try {
      const parsed = JSON.parse(text) as Json;
      return isObject(parsed) ? parsed : {};
    } catch (error) {
      throw badRequest(`error decoding request body: ${(error as Error).message}`);
    }
  }

  /** Single objects, as JSON or as a Table for `kubectl get`. */
  private respond(ctx: Ctx, code: number, object: KubeObject): void {
    if (this.wantsTable(ctx.req))
      this.send(
        ctx.res,
        code,
        toTable(
          ctx.type,
          [object],
          { resourceVersion: object.metadata.resourceVersion ?? '' },
          ctx.query.get('includeObject') ?? 'Metadata',
        ),
        ctx.warnings,
      );
    else this.send(ctx.res, code, object, ctx.warnings);
  }

  private wantsTable(req: IncomingMessage): boolean {
    const accept = req.headers.accept ?? '';
    return accept
      .split(',')
      .some((part) => /;\s*as=Table/.test(part) && /g=meta\.k8s\.io/.test(part));
  }

  // ---- discovery and OpenAPI ----------------------------------------------------------------

  private fixedDocument(path: string): Json | undefined {
    switch (path) {
      case '/version':
        return {
          major: '1',
          minor: '34',
          gitVersion: 'v1.34.0-kiln-double',
          gitCommit: '0000000000000000000000000000000000000000',
          gitTreeState: 'clean',
          buildDate: '2026-01-01T00:00:00Z',
          goVersion: 'go1.24.6',
          compiler: 'gc',
          platform: 'linux/amd64',
        };
      case '/healthz':
      case '/readyz':
      case '/livez':
        return 'ok';
      case '/api':
        return {
          kind: 'APIVersions',
          versions: ['v1'],
          serverAddressByClientCIDRs: [
            { clientCIDR: '0.0.0.0/0', serverAddress: `127.0.0.1:${this.port}` },
          ],
        };
      case '/apis':
        return { kind: 'APIGroupList', apiVersion: 'v1', groups: this.groups() };
      case '/openapi/v2':
        return openApiV2(this.types);
      case '/openapi/v3':
        return openApiV3Index(this.types);
    }
    if (path.startsWith('/openapi/v3/')) {
      const gv = path.slice('/openapi/v3/'.length);
      const doc = openApiV3Document(this.types, gv);
      if (doc === undefined) throw this.pageNotFound(path);
      return doc;
    }
    const groupPath = /^\/apis\/([^/]+)$/.exec(path);
    if (groupPath) {
      const found = this.groups().find((g) => g.name === groupPath[1]);
      if (!found) throw this.pageNotFound(path);
      return { kind: 'APIGroup', apiVersion: 'v1', ...found };
    }
    return undefined;
  }

  private groups(): {
    name: string;
    versions: { groupVersion: string; version: string }[];
    preferredVersion: { groupVersion: string; version: string };
  }[] {
    const names = [...new Set(this.types.filter((t) => t.group !== '').map((t) => t.group))];
    const groups = names.map((name) => {
      const versions = [
        ...new Set(this.types.filter((t) => t.group === name).map((t) => t.version)),
      ].map((version) => ({
        groupVersion: `${name}/${version}`,
        version,
      }));
      return { name, versions, preferredVersion: versions[0] ?? { groupVersion: '', version: '' } };
    });
    if (this.kueue !== undefined) {
      const version = { groupVersion: `${VISIBILITY_GROUP}/v1beta1`, version: 'v1beta1' };
      groups.push({ name: VISIBILITY_GROUP, versions: [version], preferredVersion: version });
    }
    return groups;
  }

  private resourceList(group: string, version: string): Json {
    const verbs = [
      'create',
      'delete',
      'deletecollection',
      'get',
      'list',
      'patch',
      'update',
      'watch',
    ];
    const resources: JsonObject[] = [];
    for (const t of this.types.filter((x) => x.group === group && x.version === version)) {
      resources.push({
        name: t.plural,
        singularName: t.singular,
        namespaced: t.namespaced,
        kind: t.kind,
        verbs: t.kind === 'Namespace' ? verbs.filter((v) => v !== 'deletecollection') : verbs,
        ...(t.shortNames.length > 0 ? { shortNames: t.shortNames } : {}),
        ...(t.categories.length > 0 ? { categories: t.categories } : {}),
        storageVersionHash: Buffer.from(`${t.group}/${t.plural}`).toString('base64').slice(0, 11),
      });
      if (t.statusSubresource)
        resources.push({
          name: `${t.plural}/status`,
          singularName: '',
          namespaced: t.namespaced,
          kind: t.kind,
          verbs: ['get', 'patch', 'update'],
        });
      if (t.kind === 'Pod')
        resources.push({
          name: 'pods/log',
          singularName: '',
          namespaced: true,
          kind: 'Pod',
          verbs: ['get'],
        });
    }
    return {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: group === '' ? version : `${group}/${version}`,
      resources,
    };
  }

  // ---- reads ------------------------------------------------------------------------------

  private typeOf(group: string, plural: string): ResourceType {
    const found = this.types.find((t) => t.group === group && t.plural === plural);
    if (!found) throw new Error(`unknown resource ${plural}.${group}`);
    return found;
  }

  private mustGet(type: ResourceType, namespace: string | undefined, name: string): KubeObject {
    const found = this.store.get(storageKey(type), namespace, name);
    if (!found) throw notFound(type, name);
    return this.served(type, found);
  }

  /** A stored object as the requested version serves it. */
  private served(type: ResourceType, object: KubeObject): KubeObject {
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    return object;
  }

  private selectors(ctx: Ctx): { labels: LabelSelector; fields: FieldSelector } {
    const core = ctx.type.group === '';
    const fields =
      core && ctx.type.kind === 'Pod'
        ? ['spec.nodeName', 'status.phase', 'spec.restartPolicy']
        : core && ctx.type.kind === 'Event'
          ? Object.keys(EVENT_FIELDS)
          : [];
    return {
      labels: LabelSelector.parse(ctx.query.get('labelSelector') ?? undefined),
      fields: FieldSelector.parse(
        ctx.query.get('fieldSelector') ?? undefined,
        fields,
        core && ctx.type.kind === 'Event' ? EVENT_FIELDS : {},
      ),
    };
  }

  private list(ctx: Ctx): void {
    const { type, query } = ctx;
    const { labels, fields } = this.selectors(ctx);
    const limit = Number(query.get('limit') ?? '0');
    const token = query.get('continue');
    let rv = this.store.currentRv;
    let after = '';
    let items: KubeObject[];
    if (token) {
      let decoded: { rv?: unknown; start?: unknown };
      try {
        decoded = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as typeof decoded;
      } catch {
        throw badRequest(`continue key is not valid: ${token}`);
      }
      if (typeof decoded.rv !== 'number' || typeof decoded.start !== 'string')
        throw badRequest('continue key is not valid');
      rv = decoded.rv;
      after = decoded.start;
      const state = this.store.stateAt(storageKey(type), rv);
      if (!state)
        throw gone(
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.',
        );
      items = state;
    } else if (query.get('resourceVersionMatch') === 'Exact' && query.get('resourceVersion')) {
      rv = Number(query.get('resourceVersion'));
      const state = this.store.stateAt(storageKey(type), rv);
      if (!state) throw gone(`too old resource version: ${rv} (${this.store.compactedRv})`);
      items = state;
    } else items = this.store.list(storageKey(type));
    const keyOf = (o: KubeObject): string =>
      `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;
    const matching = items.filter(
      (o) =>
        (ctx.namespace === undefined || o.metadata.namespace === ctx.namespace) &&
        labels.matches(o.metadata.labels) &&
        fields.matches(o) &&
        keyOf(o) > after,
    );
    const page = limit > 0 ? matching.slice(0, limit) : matching;
    const metadata: Record<string, string> & { remainingItemCount?: string } = {
      resourceVersion: String(rv),
    };
    const last = page.at(-1);
    if (limit > 0 && matching.length > limit && last) {
      metadata.continue = Buffer.from(JSON.stringify({ rv, start: keyOf(last) })).toString(
        'base64',
      );
      if (!query.get('labelSelector') && !query.get('fieldSelector'))
        (metadata as JsonObject).remainingItemCount = matching.length - limit;
    }
    const served = page.map((o) => this.served(type, o));
    if (this.wantsTable(ctx.req)) {
      this.send(
        ctx.res,
        200,
        toTable(type, served, metadata, query.get('includeObject') ?? 'Metadata'),
      );
      return;
    }
    this.send(ctx.res, 200, {
      kind: type.listKind,
      apiVersion: apiVersionOf(type),
      metadata,
      // Typed built-in lists omit each item's kind and apiVersion on the wire; custom ones keep them.
      items: type.custom ? served : served.map(({ apiVersion: _a, kind: _k, ...rest }) => rest),
    });
  }

  private watch(ctx: Ctx): void {
    const { type, query, res } = ctx;
    const { labels, fields } = this.selectors(ctx);
    const rvParam = query.get('resourceVersion') ?? '';
    const bookmarks = query.get('allowWatchBookmarks') === 'true';
    const timeoutSeconds = Number(query.get('timeoutSeconds') ?? '0');
    const key = storageKey(type);
    const visible = (o: KubeObject | undefined): o is KubeObject =>
      o !== undefined &&
      (ctx.namespace === undefined || o.metadata.namespace === ctx.namespace) &&
      labels.matches(o.metadata.labels) &&
      fields.matches(o);

    res.writeHead(200, {
      'content-type': 'application/json',
      'cache-control': 'no-cache, private',
      'transfer-encoding': 'chunked',
    });
    res.flushHeaders();
    const write = (eventType: WatchEventType | 'BOOKMARK' | 'ERROR', object: unknown): void => {
      if (!res.writableEnded && !this.silencedWatches.has(res))
        res.write(`${JSON.stringify({ type: eventType, object })}\n`);
    };
    const emit = (event: StoredEvent): void => {
      if (event.resource !== key) return;
      const now = visible(event.type === 'DELETED' ? undefined : event.object)
        ? event.object
        : undefined;
      const before = visible(event.prev) ? event.prev : undefined;
      const object = this.served(type, clone(event.object));
      if (now && before) write('MODIFIED', object);
      else if (now) write('ADDED', object);
      else if (before) write('DELETED', object);
    };

    if (query.get('sendInitialEvents') === 'true') {
      // A streaming list (client-go's WatchList, as helm's waits use): the current state as
      // ADDED events, then a BOOKMARK annotated as the end of the initial events, then changes.
      if (query.get('resourceVersionMatch') !== 'NotOlderThan' || !bookmarks) {
        write(
          'ERROR',
          new StatusError(
            422,
            'Invalid',
            'sendInitialEvents requires resourceVersionMatch=NotOlderThan and allowWatchBookmarks=true',
          ).toStatus(),
        );
        res.end();
        return;
      }
      for (const o of this.store.list(key)) if (visible(o)) write('ADDED', this.served(type, o));
      write('BOOKMARK', {
        kind: type.kind,
        apiVersion: apiVersionOf(type),
        metadata: {
          resourceVersion: String(this.store.currentRv),
          annotations: { 'k8s.io/initial-events-end': 'true' },
        },
      });
    } else if (rvParam === '' || rvParam === '0') {
      for (const o of this.store.list(key)) if (visible(o)) write('ADDED', this.served(type, o));
    } else {
      const rv = Number(rvParam);
      const events = Number.isFinite(rv) ? this.store.eventsAfter(rv) : undefined;
      if (!events) {
        write(
          'ERROR',
          new StatusError(
            410,
            'Expired',
            `too old resource version: ${rvParam} (${this.store.compactedRv})`,
          ).toStatus(),
        );
        res.end();
        return;
      }
      for (const event of events) emit(event);
    }
    const unsubscribe = this.store.subscribe(emit);
    const timers: NodeJS.Timeout[] = [];
    if (bookmarks)
      timers.push(
        setInterval(
          () =>
            write('BOOKMARK', {
              kind: type.kind,
              apiVersion: apiVersionOf(type),
              metadata: { resourceVersion: String(this.store.currentRv) },
            }),
          this.options.bookmarkIntervalMs ?? 10_000,
        ),
      );
    if (timeoutSeconds > 0)
      timers.push(
        setTimeout(() => {
          if (!this.silencedWatches.has(res)) res.end();
        }, timeoutSeconds * 1000),
      );
    this.watches.add(res);
    const cleanup = (): void => {
      unsubscribe();
      for (const t of timers) clearTimeout(t);
      this.watches.delete(res);
    };
    res.on('close', cleanup);
    res.on('finish', cleanup);
  }

  // ---- writes -----------------------------------------------------------------------------

  private checkNamespace(type: ResourceType, namespace: string | undefined): void {
    if (!type.namespaced || namespace === undefined) return;
    const ns = this.store.get('/namespaces', undefined, namespace);
    if (!ns) throw notFound(this.typeOf('', 'namespaces'), namespace);
    if (ns.metadata.deletionTimestamp)
      throw new StatusError(
        403,
        'Forbidden',
        `${type.plural}${type.group ? `.${type.group}` : ''} "${''}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
        {
          ...(type.group ? { group: type.group } : {}),
          kind: type.plural,
          causes: [
            {
              reason: 'NamespaceTerminating',
              message: `namespace ${namespace} is being terminated`,
              field: 'metadata.namespace',
            },
          ],
        },
      );
  }

  private checkKind(ctx: Ctx, body: Json): KubeObject {
    if (!isObject(body)) throw badRequest('the body of the request was not a JSON object');
    const { type } = ctx;
    const object = body as unknown as KubeObject;
    if (!isObject(object.metadata)) object.metadata = {};
    if (type.custom && (!object.kind || !object.apiVersion))
      throw badRequest(
        `Object '${object.kind ? 'apiVersion' : 'Kind'}' is missing in '${JSON.stringify(body)}'`,
      );
    if (object.apiVersion !== undefined && object.apiVersion !== apiVersionOf(type))
      throw badRequest(
        `the API version in the data (${object.apiVersion}) does not match the expected API version (${apiVersionOf(type)})`,
      );
    if (object.kind !== undefined && object.kind !== type.kind)
      throw badRequest(
        `the kind in the data (${object.kind}) does not match the expected kind (${type.kind})`,
      );
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    if (type.namespaced) {
      if (
        object.metadata.namespace !== undefined &&
        object.metadata.namespace !== '' &&
        object.metadata.namespace !== ctx.namespace
      )
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      if (ctx.namespace !== undefined) object.metadata.namespace = ctx.namespace;
    } else delete object.metadata.namespace;
    return object;
  }

  private manager(ctx: Ctx, fallback: string): string {
    const fromQuery = ctx.query.get('fieldManager');
    if (fromQuery) return fromQuery;
    const agent = ctx.req.headers['user-agent'];
    return agent ? (agent.split('/')[0] ?? fallback) : fallback;
  }

  /** CRDs: prune unknown fields (or reject them with fieldValidation=Strict), default, validate. */
  private schemaPipeline(ctx: Ctx, object: KubeObject): KubeObject {
    const schema = ctx.type.schema;
    if (!ctx.type.custom || !schema) return object;
    const unknown = unknownFields(object as unknown as Json, schema);
    const validation = ctx.query.get('fieldValidation') ?? 'Warn';
    if (unknown.length > 0 && validation === 'Strict')
      throw badRequest(
        `${ctx.type.kind} in version "${ctx.type.version}" cannot be handled as a ${ctx.type.kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(', ')}`,
      );
    if (validation === 'Warn') ctx.warnings.push(...unknown.map((f) => `unknown field "${f}"`));
    return pruneAndDefault(object as unknown as Json, schema) as unknown as KubeObject;
  }

  private validate(ctx: Ctx, object: KubeObject, old: KubeObject | undefined): void {
    const name = object.metadata.name ?? '';
    const errors: FieldError[] = [
      ...validateName(ctx.type, name),
      ...validateLabels(object.metadata.labels),
    ];
    if (ctx.type.custom && ctx.type.schema) {
      errors.push(...validateSchema(object as unknown as Json, ctx.type.schema));
      const rules = validateRules(
        ctx.type.schema,
        object as unknown as Json,
        old as unknown as Json | undefined,
        errors,
      );
      errors.push(...rules.errors);
      ctx.warnings.push(...rules.warnings);
    } else errors.push(...validateBuiltIn(object, old));
    if (old?.metadata.deletionTimestamp) {
      const added = (object.metadata.finalizers ?? []).filter(
        (f) => !(old.metadata.finalizers ?? []).includes(f),
      );
      if (added.length > 0)
        errors.push(
          fieldErrors.forbidden(
            'metadata.finalizers',
            `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(', ')}}`,
          ),
        );
    }
    if (errors.length > 0) throw invalid(ctx.type, name, errors);
  }

  private create(ctx: Ctx, body: Json, operation: 'Update' | 'Apply' = 'Update'): KubeObject {
    const { type } = ctx;
    let object = this.checkKind(ctx, body);
    if (
      ctx.name !== undefined &&
      object.metadata.name !== undefined &&
      object.metadata.name !== ctx.name
    )
      throw badRequest(
        `the name of the object (${object.metadata.name}) does not match the name on the URL (${ctx.name})`,
      );
    if (ctx.name !== undefined) object.metadata.name = ctx.name;
    this.checkNamespace(type, ctx.namespace);
    const meta = object.metadata;
    if (!meta.name) {
      if (!meta.generateName)
        throw invalid(type, '', [
          fieldErrors.required('metadata.name', 'name or generateName is required'),
        ]);
      do {
        meta.name =
          meta.generateName +
          Array.from(
            { length: 5 },
            () => GENERATE_ALPHABET[Math.floor(Math.random() * GENERATE_ALPHABET.length)],
          ).join('');
      } while (this.store.get(storageKey(type), ctx.namespace, meta.name));
    }
    if (this.store.get(storageKey(type), ctx.namespace, meta.name))
      throw alreadyExists(type, meta.name);
    for (const field of [
      'uid',
      'resourceVersion',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'selfLink',
    ] as const)
      delete meta[field];
    meta.uid = randomUUID();
    meta.creationTimestamp = nowRfc3339();
    if (hasGeneration(type)) meta.generation = 1;
    else delete meta.generation;
    if (type.custom && type.statusSubresource) delete object.status;
    foldStringData(object);
    if (!type.custom) prepareBuiltInForCreate(object);
    // Kueue's mutating webhook for Jobs runs after defaulting, as admission does.
    if (this.kueue !== undefined && type.group === 'batch' && type.kind === 'Job')
      this.kueue.defaultJob(object);
    object = this.schemaPipeline(ctx, object);
    this.validate(ctx, object, undefined);
    this.admit(ctx, object);
    const manager = this.manager(ctx, 'unknown');
    const fields = fieldSetOf(object as unknown as JsonObject);
    object.metadata.managedFields = [
      this.entry(ctx, manager, operation, fields),
    ] as unknown as JsonObject[];
    return this.persist(ctx, object);
  }

  /**
   * Validating admission of a create, in kube-apiserver's plugin order: PodSecurity, then the
   * validating webhooks (admissionWebhooks), then ResourceQuota. A controller's creates come
   * through here too, so what refuses a pod refuses a Job's pod alike.
   */
  private admit(ctx: Ctx, object: KubeObject): void {
    const { type } = ctx;
    const isPod = type.group === '' && type.kind === 'Pod';
    this.podSecurity(ctx, object, isPod);
    const denial = this.admissionWebhooks.check(type.plural, ctx.namespace, ctx.dryRun);
    if (denial) throw denial;
    if (isPod) admitPodToQuotas(this.store, object, { dryRun: ctx.dryRun });
  }

  /**
   * PodSecurity admission: a pod the namespace's enforce level forbids is refused; one its warn
   * level forbids gets a warning. For workloads (their pod template) only the warning: enforcing
   * is left to the pods, so a Job is created and its pods are refused (FailedCreate).
   */
  private podSecurity(ctx: Ctx, object: KubeObject, isPod: boolean): void {
    const templated = ['batch/Job', 'apps/Deployment', 'apps/StatefulSet'].includes(
      `${ctx.type.group}/${ctx.type.kind}`,
    );
    if ((!isPod && !templated) || ctx.namespace === undefined) return;
    const namespace = this.store.get('/namespaces', undefined, ctx.namespace);
    const policy = podSecurityPolicy(namespace?.metadata.labels);
    const pod = isPod
      ? { spec: object.spec, metadata: object.metadata }
      : (() => {
          const spec = isObject(object.spec ?? null) ? (object.spec as JsonObject) : {};
          const template = isObject(spec.template ?? null) ? (spec.template as JsonObject) : {};
          return { spec: template.spec, metadata: template.metadata };
        })();
    const spec = isObject(pod.spec ?? null) ? (pod.spec as JsonObject) : {};
    const meta = isObject(pod.metadata ?? null) ? (pod.metadata as JsonObject) : {};
    const annotations = isObject(meta.annotations ?? null)
      ? (meta.annotations as Record<string, string>)
      : {};
    if (isPod) {
      const refused = podSecurityDetail(policy.enforce, spec, { annotations });
      if (refused !== undefined) {
        const name = object.metadata.name ?? '';
        throw new StatusError(
          403,
          'Forbidden',
          `pods "${name}" is forbidden: violates PodSecurity "${policyName(policy.enforce)}": ${refused}`,
          { name, kind: 'pods' },
        );
      }
    }
    const warned = podSecurityDetail(policy.warn, spec, { annotations });
    if (warned !== undefined)
      ctx.warnings.push(`would violate PodSecurity "${policyName(policy.warn)}": ${warned}`);
  }

  private entry(
    ctx: Ctx,
    manager: string,
    operation: 'Update' | 'Apply',
    fields: Set<string>,
  ): ManagedFieldsEntry {
    return {
      manager,
      operation,
      apiVersion: apiVersionOf(ctx.type),
      time: nowRfc3339(),
      fieldsType: 'FieldsV1',
      fieldsV1: toFieldsV1(fields),
      ...(ctx.subresource === 'status' ? { subresource: 'status' } : {}),
    };
  }

  private persist(ctx: Ctx, object: KubeObject): KubeObject {
    if (ctx.dryRun) return this.served(ctx.type, clone(object));
    const stored = this.store.put(storageKey(ctx.type), object);
    this.scheduleGc();
    return this.served(ctx.type, stored);
  }

  private update(ctx: Ctx, name: string, body: Json): { code: number; object: KubeObject } {
    const { type } = ctx;
    const old = this.store.get(storageKey(type), ctx.namespace, name);
    const proposed = this.checkKind(ctx, body);
    if (proposed.metadata.name !== undefined && proposed.metadata.name !== name)
      throw badRequest(
        `the name of the object (${proposed.metadata.name}) does not match the name on the URL (${name})`,
      );
    if (!old) {
      if (!type.allowCreateOnUpdate || ctx.subresource !== undefined) throw notFound(type, name);
      return { code: 201, object: this.create({ ...ctx, name }, proposed as unknown as Json) };
    }
    const rv = proposed.metadata.resourceVersion;
    if (rv === undefined || rv === '') {
      if (!type.allowUnconditionalUpdate)
        throw invalid(type, name, [
          fieldErrors.invalidRendered(
            'metadata.resourceVersion',
            '0x0',
            'must be specified for an update',
          ),
        ]);
    } else if (rv !== old.metadata.resourceVersion) throw conflict(type, name, MODIFIED_CONFLICT);
    return { code: 200, object: this.commitUpdate(ctx, old, proposed, 'Update') };
  }

  /** The shared tail of PUT and PATCH: status rules, generation, managed fields, finalization. */
  private commitUpdate(
    ctx: Ctx,
    old: KubeObject,
    proposed: KubeObject,
    operation: 'Update' | 'Apply',
    applyFields?: Set<string>,
  ): KubeObject {
    const { type } = ctx;
    let next: KubeObject;
    if (ctx.subresource === 'status') {
      next = clone(old);
      if (proposed.status === undefined) delete next.status;
      else next.status = proposed.status;
    } else {
      next = clone(proposed);
      if (type.statusSubresource) {
        if (old.status === undefined) delete next.status;
        else next.status = clone(old.status);
      }
      foldStringData(next);
      if (!type.custom) defaultBuiltIn(next);
    }
    const immutable = [
      'name',
      'namespace',
      'uid',
      'creationTimestamp',
      'deletionTimestamp',
      'deletionGracePeriodSeconds',
      'generation',
      'generateName',
    ] as const;
    for (const field of immutable) {
      if (old.metadata[field] === undefined) delete next.metadata[field];
      else (next.metadata as Record<string, unknown>)[field] = old.metadata[field];
    }
    next.metadata.resourceVersion = old.metadata.resourceVersion;
    next = this.schemaPipeline(ctx, next);
    this.validate(ctx, next, old);

    const strip = (o: KubeObject): string => {
      const copy = clone(o) as unknown as JsonObject;
      const meta = copy.metadata as JsonObject;
      delete meta.managedFields;
      delete meta.resourceVersion;
      return JSON.stringify(copy);
    };
    if (strip(next) === strip(old) && operation === 'Update') return this.served(type, old);

    if (hasGeneration(type) && ctx.subresource !== 'status') {
      const body = (o: KubeObject): string => {
        const rest: Record<string, unknown> = { ...o };
        delete rest.metadata;
        delete rest.status;
        return JSON.stringify(rest);
      };
      if (body(next) !== body(old)) next.metadata.generation = (old.metadata.generation ?? 0) + 1;
    }

    const manager = this.manager(ctx, 'unknown');
    const scope =
      ctx.subresource === 'status' ? 'status' : type.statusSubresource ? 'no-status' : undefined;
    const changed =
      applyFields ??
      changedFields(old as unknown as JsonObject, next as unknown as JsonObject, scope);
    const subresource = ctx.subresource === 'status' ? 'status' : undefined;
    const entries = managedEntries(old)
      .map((e) => {
        if (e.manager === manager && e.operation === operation && e.subresource === subresource)
          return undefined;
        const owned = fromFieldsV1(e.fieldsV1);
        for (const path of changed)
          if (
            JSON.stringify(valueAt(old as unknown as Json, path)) !==
            JSON.stringify(valueAt(next as unknown as Json, path))
          )
            owned.delete(path);
        return owned.size > 0 ? { ...e, fieldsV1: toFieldsV1(owned) } : undefined;
      })
      .filter((e): e is ManagedFieldsEntry => e !== undefined);
    const previous = managedEntries(old).find(
      (e) => e.manager === manager && e.operation === operation && e.subresource === subresource,
    );
    const mine =
      operation === 'Apply' ? changed : new Set([...fromFieldsV1(previous?.fieldsV1), ...changed]);
    if (mine.size > 0) entries.push(this.entry(ctx, manager, operation, mine));
    next.metadata.managedFields = entries as unknown as JsonObject[];

    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
      if (ctx.dryRun) return this.served(type, next);
      const removed = this.store.remove(
        storageKey(type),
        next.metadata.namespace,
        next.metadata.name ?? '',
      );
      this.scheduleGc();
      return this.served(type, removed ?? next);
    }
    return this.persist(ctx, next);
  }

  private async patch(ctx: Ctx, name: string): Promise<{ code: number; object: KubeObject }> {
    const { type } = ctx;
    const contentType = (ctx.req.headers['content-type'] ?? '').split(';')[0]?.trim() ?? '';
    const accepted = [
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/apply-patch+yaml',
    ];
    if (!type.custom) accepted.splice(2, 0, 'application/strategic-merge-patch+json');
    if (!accepted.includes(contentType)) throw unsupportedMediaType(contentType, accepted);
    const body = await this.readJson(ctx.req);
    const old = this.store.get(storageKey(type), ctx.namespace, name);
    if (contentType === 'application/apply-patch+yaml') return this.apply(ctx, name, old, body);
    if (!old) throw notFound(type, name);
    const current = this.served(type, clone(old)) as unknown as Json;
    let patched: Json;
    switch (contentType) {
      case 'application/json-patch+json':
        patched = jsonPatch(current, body);
        break;
      case 'application/merge-patch+json':
        if (!isObject(body)) throw badRequest('the body of the patch is not a JSON object');
        patched = mergePatch(current, body);
        break;
      default:
        if (!isObject(body)) throw badRequest('the body of the patch is not a JSON object');
        patched = strategicMergePatch(current, body);
    }
    const proposed = this.checkKind(ctx, patched);
    if (proposed.metadata.name !== name)
      throw badRequest(
        `the name of the object (${String(proposed.metadata.name)}) does not match the name on the URL (${name})`,
      );
    const rv = proposed.metadata.resourceVersion;
    if (rv !== undefined && rv !== '' && rv !== old.metadata.resourceVersion)
      throw conflict(type, name, MODIFIED_CONFLICT);
    return { code: 200, object: this.commitUpdate(ctx, old, proposed, 'Update') };
  }

  /** Simplified server-side apply: create if missing, else merge the applied fields (see managed-fields.ts). */
  private apply(
    ctx: Ctx,
    name: string,
    old: KubeObject | undefined,
    body: Json,
  ): { code: number; object: KubeObject } {
    const { type } = ctx;
    const manager = ctx.query.get('fieldManager');
    if (!manager)
      throw invalid({ ...type, kind: 'PatchOptions', group: 'meta.k8s.io' }, '', [
        fieldErrors.required('fieldManager', 'is required for apply patch'),
      ]);
    if (!isObject(body)) throw badRequest('the body of an apply patch must be an object');
    if (!body.apiVersion || !body.kind)
      throw badRequest('apiVersion and kind must be set in an apply configuration');
    const applied = this.checkKind({ ...ctx }, clone(body));
    if (applied.metadata.name !== undefined && applied.metadata.name !== name)
      throw badRequest(
        `the name of the object (${applied.metadata.name}) does not match the name on the URL (${name})`,
      );
    applied.metadata.name = name;
    const scope =
      ctx.subresource === 'status' ? 'status' : type.statusSubresource ? 'no-status' : undefined;
    const appliedFields = fieldSetOf(applied as unknown as JsonObject, scope);
    if (!old) {
      if (ctx.subresource !== undefined) throw notFound(type, name);
      return {
        code: 201,
        object: this.create({ ...ctx, name }, applied as unknown as Json, 'Apply'),
      };
    }
    const force = ctx.query.get('force') === 'true';
    const conflicts: string[] = [];
    for (const e of managedEntries(old)) {
      if (e.manager === manager) continue;
      for (const path of fromFieldsV1(e.fieldsV1))
        if (
          appliedFields.has(path) &&
          JSON.stringify(valueAt(old as unknown as Json, path)) !==
            JSON.stringify(valueAt(applied as unknown as Json, path))
        )
          conflicts.push(
            `conflict with "${e.manager}"${e.operation === 'Update' ? ` using ${e.apiVersion}` : ''}: ${fieldPathText(path)}`,
          );
    }
    if (conflicts.length > 0 && !force)
      throw new StatusError(
        409,
        'Conflict',
        `Apply failed with ${conflicts.length} conflict${conflicts.length > 1 ? 's' : ''}: ${conflicts.join('\n')}`,
        {
          causes: conflicts.map((c) => ({ reason: 'FieldManagerConflict', message: c })),
        },
      );
    const merged = applyMerge(
      this.served(type, clone(old)) as unknown as Json,
      applied as unknown as Json,
    ) as JsonObject;
    const previous = managedEntries(old).find(
      (e) => e.manager === manager && e.operation === 'Apply',
    );
    const ownedByOthers = new Set(
      managedEntries(old)
        .filter((e) => e.manager !== manager)
        .flatMap((e) => [...fromFieldsV1(e.fieldsV1)]),
    );
    for (const path of fromFieldsV1(previous?.fieldsV1))
      if (!appliedFields.has(path) && !ownedByOthers.has(path)) removeAt(merged, path);
    const proposed = merged as unknown as KubeObject;
    return { code: 200, object: this.commitUpdate(ctx, old, proposed, 'Apply', appliedFields) };
  }

  private delete(ctx: Ctx, name: string, body: JsonObject): { code: number; body: unknown } {
    const { type } = ctx;
    const old = this.store.get(storageKey(type), ctx.namespace, name);
    if (!old) throw notFound(type, name);
    const preconditions = isObject(body.preconditions ?? null)
      ? (body.preconditions as JsonObject)
      : {};
    if (typeof preconditions.uid === 'string' && preconditions.uid !== old.metadata.uid)
      throw conflict(
        type,
        name,
        `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${old.metadata.uid ?? ''}`,
      );
    if (
      typeof preconditions.resourceVersion === 'string' &&
      preconditions.resourceVersion !== old.metadata.resourceVersion
    )
      throw conflict(
        type,
        name,
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion ?? ''}`,
      );
    let policy = (body.propagationPolicy ?? ctx.query.get('propagationPolicy') ?? undefined) as
      string | undefined;
    if (policy === undefined && body.orphanDependents !== undefined)
      policy = body.orphanDependents ? 'Orphan' : 'Background';
    if (policy === undefined) {
      policy = type.defaultPropagation;
      if (type.kind === 'Job')
        ctx.warnings.push(
          'child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning',
        );
    }
    if (!['Background', 'Foreground', 'Orphan'].includes(policy))
      throw invalid({ ...type, kind: 'DeleteOptions', group: '' }, '', [
        fieldErrors.notSupported('propagationPolicy', policy, [
          'Foreground',
          'Background',
          'Orphan',
          'nil',
        ]),
      ]);

    // A pod the kubelet is running is deleted gracefully: it gets a deletionTimestamp, the
    // kubelet stops its containers and then removes it (gracePeriodSeconds=0 forces it out now).
    const grace = body.gracePeriodSeconds ?? ctx.query.get('gracePeriodSeconds') ?? undefined;
    if (
      type.kind === 'Pod' &&
      Number(grace ?? 1) !== 0 &&
      this.kubelet.isRunning(ctx.namespace ?? '', name, old.metadata.uid ?? '') &&
      (old.metadata.finalizers ?? []).length === 0 &&
      policy !== 'Foreground'
    ) {
      if (old.metadata.deletionTimestamp) return { code: 200, body: this.served(type, old) };
      const spec = isObject(old.spec ?? null) ? (old.spec as JsonObject) : {};
      const seconds = Number(grace ?? spec.terminationGracePeriodSeconds ?? 30);
      const next = clone(old);
      next.metadata.deletionTimestamp = new Date(Date.now() + seconds * 1000)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z');
      next.metadata.deletionGracePeriodSeconds = seconds;
      return { code: 200, body: this.persist(ctx, next) };
    }
    if (
      type.kind === 'Namespace' ||
      (old.metadata.finalizers ?? []).length > 0 ||
      policy === 'Foreground'
    ) {
      if (old.metadata.deletionTimestamp) return { code: 200, body: this.served(type, old) };
      const next = clone(old);
      next.metadata.deletionTimestamp = nowRfc3339();
      next.metadata.deletionGracePeriodSeconds = 0;
      if (hasGeneration(type)) next.metadata.generation = (next.metadata.generation ?? 0) + 1;
      if (policy === 'Foreground')
        next.metadata.finalizers = [...(next.metadata.finalizers ?? []), 'foregroundDeletion'];
      const status = next.status;
      if (type.kind === 'Namespace')
        next.status = { ...(isObject(status) ? status : {}), phase: 'Terminating' };
      if (policy === 'Orphan' && !ctx.dryRun) this.orphanDependents(old);
      return { code: 200, body: this.persist(ctx, next) };
    }
    if (ctx.dryRun) return { code: 200, body: this.deletedBody(type, old) };
    if (policy === 'Orphan') this.orphanDependents(old);
    const removed = this.store.remove(storageKey(type), old.metadata.namespace, name) ?? old;
    this.scheduleGc();
    return { code: 200, body: this.deletedBody(type, removed) };
  }

  private deletedBody(type: ResourceType, object: KubeObject): unknown {
    if (type.returnDeletedObject) return this.served(type, object);
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Success',
      details: {
        name: object.metadata.name,
        ...(type.group ? { group: type.group } : {}),
        kind: type.plural,
        uid: object.metadata.uid,
      },
    };
  }

  private deleteCollection(ctx: Ctx, body: JsonObject): void {
    const { labels, fields } = this.selectors(ctx);
    const victims = this.store
      .list(storageKey(ctx.type), ctx.namespace)
      .filter((o) => labels.matches(o.metadata.labels) && fields.matches(o));
    const items = victims.map((o) => {
      const result = this.delete(ctx, o.metadata.name ?? '', body).body as KubeObject;
      return result.kind === 'Status' ? o : result;
    });
    this.send(
      ctx.res,
      200,
      {
        kind: ctx.type.listKind,
        apiVersion: apiVersionOf(ctx.type),
        metadata: { resourceVersion: String(this.store.currentRv) },
        items,
      },
      ctx.warnings,
    );
  }

  private orphanDependents(owner: KubeObject): void {
    for (const { type, object } of this.allObjects()) {
      const refs = object.metadata.ownerReferences ?? [];
      if (!refs.some((r) => r.uid === owner.metadata.uid)) continue;
      const next = clone(object);
      next.metadata.ownerReferences = refs.filter((r) => r.uid !== owner.metadata.uid);
      if (next.metadata.ownerReferences.length === 0) delete next.metadata.ownerReferences;
      this.store.put(storageKey(type), next);
    }
  }

  /** Serves what a stored CRD defines; a deleted CRD's objects go with it (see collectGarbage). */
  private crdChanged(event: StoredEvent): void {
    const name = event.object.metadata.name ?? '';
    if (event.type === 'DELETED') this.crdTypes.delete(name);
    else this.crdTypes.set(name, resourcesOfCrd(event.object));
    this.types = [...this.builtIns, ...[...this.crdTypes.values()].flat()];
    if (event.type === 'DELETED') this.scheduleGc();
  }

  // ---- garbage collector and namespace controller ----------------------------------------------

  private *allObjects(): Generator<{ type: ResourceType; object: KubeObject }> {
    const seen = new Set<string>();
    for (const type of this.types) {
      const key = storageKey(type);
      if (seen.has(key)) continue;
      seen.add(key);
      for (const object of this.store.list(key)) yield { type, object };
    }
  }

  private scheduleGc(): void {
    if (this.gcScheduled) return;
    this.gcScheduled = true;
    setImmediate(() => {
      try {
        while (this.collectGarbage());
      } finally {
        this.gcScheduled = false;
      }
    });
  }

  /** One pass of the garbage collector and namespace controller; true when it changed something. */
  private collectGarbage(): boolean {
    // The apiextensions finalizer's part: objects of a resource no longer served (its CRD was
    // deleted) are deleted. The real server deletes them before the CRD; here they follow it.
    const served = new Set(this.types.map(storageKey));
    for (const key of this.store.resources()) {
      const orphans = served.has(key) ? [] : this.store.list(key);
      for (const o of orphans) this.store.remove(key, o.metadata.namespace, o.metadata.name ?? '');
      if (orphans.length > 0) return true;
    }
    const all = [...this.allObjects()];
    const byUid = new Map(all.map((x) => [x.object.metadata.uid ?? '', x]));
    const ctxFor = (type: ResourceType, object: KubeObject): Ctx =>
      ({
        type,
        query: new URLSearchParams(),
        dryRun: false,
        warnings: [],
        ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
      }) as unknown as Ctx;
    for (const { type, object } of all) {
      const meta = object.metadata;
      // Namespace controller: delete the content, then the namespace once it is empty.
      if (type.kind === 'Namespace' && meta.deletionTimestamp) {
        const content = all.filter(
          (x) => x.type.namespaced && x.object.metadata.namespace === meta.name,
        );
        const pending = content.filter((x) => !x.object.metadata.deletionTimestamp);
        for (const x of pending)
          this.delete(
            {
              ...ctxFor(x.type, x.object),
              query: new URLSearchParams({ propagationPolicy: 'Background' }),
            },
            x.object.metadata.name ?? '',
            {},
          );
        if (content.length === 0) this.store.remove(storageKey(type), undefined, meta.name ?? '');
        if (pending.length > 0 || content.length === 0) return true;
        continue;
      }
      // Foreground deletion: the owner goes once no dependent blocks it.
      if (meta.deletionTimestamp && (meta.finalizers ?? []).includes('foregroundDeletion')) {
        const dependents = all.filter((x) =>
          (x.object.metadata.ownerReferences ?? []).some((r) => r.uid === meta.uid),
        );
        const pending = dependents.filter((x) => !x.object.metadata.deletionTimestamp);
        for (const x of pending)
          this.delete(
            {
              ...ctxFor(x.type, x.object),
              query: new URLSearchParams({ propagationPolicy: 'Foreground' }),
            },
            x.object.metadata.name ?? '',
            {},
          );
        if (dependents.length === 0) {
          const next = clone(object);
          next.metadata.finalizers = (meta.finalizers ?? []).filter(
            (f) => f !== 'foregroundDeletion',
          );
          if (next.metadata.finalizers.length === 0)
            this.store.remove(storageKey(type), meta.namespace, meta.name ?? '');
          else this.store.put(storageKey(type), next);
        }
        if (pending.length > 0 || dependents.length === 0) return true;
        continue;
      }
      // Background deletion: dependents whose owners are all gone are deleted; dangling refs dropped.
      const refs = meta.ownerReferences ?? [];
      if (refs.length === 0 || meta.deletionTimestamp) continue;
      const live = refs.filter((r) => byUid.has(r.uid));
      if (live.length === refs.length) continue;
      if (live.length === 0)
        this.delete(
          {
            ...ctxFor(type, object),
            query: new URLSearchParams({ propagationPolicy: 'Background' }),
          },
          meta.name ?? '',
          {},
        );
      else {
        const next = clone(object);
        next.metadata.ownerReferences = live;
        this.store.put(storageKey(type), next);
      }
      return true;
    }
    return false;
  }

  // ---- pods/log ------------------------------------------------------------------------------

  /**
   * `GET pods/{name}/log` as the kubelet answers it: `container` (required when the pod has more
   * than one), `timestamps` (RFC3339 with nine fractional digits), `sinceTime` (truncated to the
   * second: lines of that second are sent again), `sinceSeconds`, `tailLines`, `limitBytes`
   * (may cut the last line), `previous` (never available: pods run with restartPolicy Never)
   * and `follow` (streams as the container prints; ends when the container has terminated).
   */
  private podLog(ctx: Ctx, name: string): void {
    const pod = this.mustGet(ctx.type, ctx.namespace, name);
    const spec = isObject(pod.spec ?? null) ? (pod.spec as JsonObject) : {};
    const namesOf = (key: string): string[] => {
      const list = spec[key];
      return Array.isArray(list)
        ? list.map((c) => (isObject(c) && typeof c.name === 'string' ? c.name : ''))
        : [];
    };
    const initNames = namesOf('initContainers');
    const mainNames = namesOf('containers');
    let container = ctx.query.get('container') ?? '';
    if (container === '') {
      if (mainNames.length !== 1)
        throw badRequest(
          `a container name must be specified for pod ${name}, choose one of: [${mainNames.join(' ')}]${initNames.length > 0 ? ` or one of the init containers: [${initNames.join(' ')}]` : ''}`,
        );
      container = mainNames[0] ?? '';
    }
    if (![...initNames, ...mainNames].includes(container))
      throw badRequest(`container ${container} is not valid for pod ${name}`);
    if (ctx.query.get('previous') === 'true')
      throw badRequest(`previous terminated container "${container}" in pod "${name}" not found`);
    const sinceTime = ctx.query.get('sinceTime');
    const sinceSeconds = ctx.query.get('sinceSeconds');
    if (sinceTime && sinceSeconds)
      throw invalid({ ...ctx.type, kind: 'PodLogOptions', group: '' }, '', [
        fieldErrors.forbidden(
          'sinceTime',
          'at most one of `sinceTime` or `sinceSeconds` may be specified',
        ),
      ]);
    const stateOf = (p: KubeObject | undefined): JsonObject | undefined => {
      const status = isObject(p?.status ?? null) ? (p?.status as JsonObject) : {};
      const statuses = [
        ...(Array.isArray(status.initContainerStatuses) ? status.initContainerStatuses : []),
        ...(Array.isArray(status.containerStatuses) ? status.containerStatuses : []),
      ];
      const own = statuses.find((s) => isObject(s) && s.name === container);
      const state = isObject(own ?? null) ? (own as JsonObject).state : undefined;
      return isObject(state ?? null) ? (state as JsonObject) : undefined;
    };
    const waiting = stateOf(pod)?.waiting;
    if (isObject(waiting ?? null))
      throw badRequest(
        `container "${container}" in pod "${name}" is waiting to start: ${(() => {
          const reason = (waiting as JsonObject).reason;
          return typeof reason === 'string' ? reason : 'ContainerCreating';
        })()}`,
      );

    const namespace = ctx.namespace ?? '';
    const key = `${namespace}/${name}/${container}`;
    const timestamps = ctx.query.get('timestamps') === 'true';
    let sinceNs: bigint | undefined;
    if (sinceTime) {
      const ms = Date.parse(sinceTime);
      if (Number.isNaN(ms)) throw badRequest(`parsing time "${sinceTime}" as RFC3339: invalid`);
      sinceNs = BigInt(Math.floor(ms / 1000) * 1000) * 1_000_000n;
    } else if (sinceSeconds) {
      const seconds = Number(sinceSeconds);
      if (!Number.isInteger(seconds) || seconds < 1)
        throw invalid({ ...ctx.type, kind: 'PodLogOptions', group: '' }, '', [
          fieldErrors.invalidRendered('sinceSeconds', sinceSeconds, 'must be greater than 0'),
        ]);
      sinceNs = BigInt(Date.now() - seconds * 1000) * 1_000_000n;
    }
    const lines = this.logs.get(key) ?? [];
    let next = 0;
    if (sinceNs !== undefined)
      while (next < lines.length && (lines[next]?.ns ?? 0n) < sinceNs) next++;
    const tail = ctx.query.get('tailLines');
    if (tail !== null) next = Math.max(next, lines.length - Math.max(0, Number(tail)));
    const limitParam = ctx.query.get('limitBytes');
    let budget = limitParam !== null ? Number(limitParam) : Number.POSITIVE_INFINITY;
    // The lines of one write share a timestamp: it is formatted once for them.
    let stampNs: bigint | undefined;
    let stamp = '';
    const render = (line: LogLine): string => {
      if (!timestamps) return `${line.text}\n`;
      if (line.ns !== stampNs) [stampNs, stamp] = [line.ns, `${rfc3339Nano(line.ns)} `];
      return `${stamp}${line.text}\n`;
    };
    const { res } = ctx;
    res.writeHead(200, { 'content-type': 'text/plain', 'transfer-encoding': 'chunked' });

    const follower: LogFollower = {
      namespace,
      pod: name,
      container,
      res,
      stalled: false,
      cut: false,
      wake: () => undefined,
      stop: () => undefined,
    };
    /** Writes what is due; true when the response is over (limit reached or cut). */
    const flush = (): boolean => {
      if (follower.stalled) return false;
      const all = this.logs.get(key) ?? lines;
      let chunk = '';
      while (next < all.length) {
        const line = all[next];
        if (!line) break;
        const text = render(line);
        if (follower.cut) {
          const socket = res.socket;
          res.write(chunk + text.slice(0, Math.max(1, Math.floor(text.length / 2))), () =>
            socket?.destroy(),
          );
          return true;
        }
        const bytes = Buffer.byteLength(text);
        if (bytes > budget) {
          chunk += Buffer.from(text).subarray(0, budget).toString();
          res.end(chunk);
          return true;
        }
        budget -= bytes;
        chunk += text;
        next++;
      }
      if (chunk !== '') res.write(chunk);
      return false;
    };
    if (flush()) return;
    const podKey = storageKey(ctx.type);
    const over = (): boolean => {
      const now = this.store.peek(podKey, ctx.namespace, name);
      if (!now || now.metadata.uid !== pod.metadata.uid) return true;
      const phase = isObject(now.status ?? null) ? (now.status as JsonObject).phase : undefined;
      return (
        phase === 'Succeeded' || phase === 'Failed' || isObject(stateOf(now)?.terminated ?? null)
      );
    };
    if (ctx.query.get('follow') !== 'true' || over()) {
      res.end();
      return;
    }
    const stop = (): void => {
      this.logFollowers.delete(follower);
      unsubscribe();
      if (!res.writableEnded) res.end();
    };
    follower.stop = stop;
    follower.wake = () => {
      if (res.writableEnded || res.destroyed) return;
      if (flush()) {
        this.logFollowers.delete(follower);
        unsubscribe();
        return;
      }
      // A stalled stream, like the kubelet's after a rotation, still ends when the container does.
      if (over()) stop();
    };
    const unsubscribe = this.store.subscribe((event) => {
      if (
        event.resource === podKey &&
        event.object.metadata.name === name &&
        event.object.metadata.namespace === ctx.namespace
      )
        follower.wake();
    });
    this.logFollowers.add(follower);
    res.on('close', () => {
      this.logFollowers.delete(follower);
      unsubscribe();
    });
  }
}
