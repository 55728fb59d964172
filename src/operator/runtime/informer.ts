import { jitteredDelay } from './backoff.js';
import { systemClock, type Clock, type TimerHandle } from './clock.js';
import {
  describeError,
  httpStatusOf,
  silentLogger,
  type KubeObjectLike,
  type ListWatchSource,
  type RuntimeLogger,
  type WatchEvent,
  type WatchHandle,
} from '../../cluster/ports.js';
import type { Metrics } from '../../metrics/metrics.js';

/** `namespace/name`, or `name` for a cluster-scoped object: the key of caches and queues. */
export function objectKey(object: KubeObjectLike): string {
  const name = object.metadata?.name ?? '';
  const namespace = object.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * What an informer tells its handlers. A periodic resync calls `onUpdate(object, object)` for
 * every cached object. After a relist, objects that vanished get `onDelete` with the last state
 * the cache had. Handlers see changes after they were added; `list()` has the state before.
 */
export interface InformerHandler<T> {
  onAdd?(object: T): void;
  onUpdate?(oldObject: T, newObject: T): void;
  onDelete?(object: T): void;
}

/**
 * Applied to every listed or watched object before it is cached and handed to handlers, e.g.
 * `trimForCache`: what it drops costs no memory in the cache (client-go's TransformFunc). It gets
 * the decoded object, which nothing else holds yet, and may change it in place. Handlers and
 * `get`/`list` see only what it returns, so it must keep every field a reader uses.
 */
export type InformerTransform<T> = (object: T) => T;

export interface InformerOptions {
  /** For logs, and the `resource` label of kiln_operator_watch_restarts_total. */
  name?: string;
  /** Where watch restarts are counted. */
  metrics?: Metrics;
  clock?: Clock;
  /** [0, 1): the jitter source (tests pin it). */
  random?: () => number;
  logger?: RuntimeLogger;
  /** First retry delay after a failed list or watch (default 500 ms), doubling per failure… */
  backoffBaseMs?: number;
  /** …up to this (default 30 s). With equal jitter: at most 4 attempts a minute at the cap. */
  backoffCapMs?: number;
  /**
   * A watch that stayed open this long (default 10 s, or its whole lifetime when shorter) was
   * healthy: the failure count resets and the next watch starts at once.
   */
  healthyWatchMs?: number;
  /** Each watch ends after this long (default 5 min) ± `watchLifetimeJitter` and restarts. */
  watchLifetimeMs?: number;
  /** Fraction of the lifetime added or taken at random (default 0.1). */
  watchLifetimeJitter?: number;
  /** Every this long (default 10 min) each cached object is notified again; 0 turns it off. */
  resyncPeriodMs?: number;
}

/** Counters for tests and metrics. */
export interface InformerStats {
  /** List calls made (the first one, relists, and retries). */
  lists: number;
  /** Watch calls made. */
  watches: number;
  /** Relists caused by 410 Gone. */
  relists: number;
  /** Failed lists and unhealthy watch ends. */
  failures: number;
  /** Watches ended at their lifetime cap (by the server's timeout or our own timer). */
  lifetimeEnds: number;
  /**
   * Watches restarted for a reason other than the server ending them at their requested
   * timeout: an error, a 410, a stream closed early or quiet past client-node's idle timeout, or
   * our own timer finding the server silent past the timeout (a half-open connection).
   */
  restarts: number;
  resyncs: number;
}

interface WatchOutcome {
  error?: unknown;
  healthy: boolean;
  /** The server ended it cleanly at the timeout asked for: the routine end, no restart. */
  scheduled: boolean;
}

/** Grace after the requested server timeout before the informer ends a watch itself. */
const LIFETIME_GRACE_MS = 1000;

/**
 * List + watch + cache for one collection, supervised: a watch that ends or fails is restarted
 * from the last resourceVersion (after a jittered exponential backoff unless it was healthy), a
 * 410 Gone relists, each watch's lifetime is capped, and every cached object is re-notified
 * periodically. It never gives up: only `stop()` ends it.
 *
 * Cached objects are stored as received (after the `transform` option, if any) and deep-frozen:
 * `get` and `list` return the cached objects themselves, and writing to one throws. Clone
 * (`structuredClone`) before changing.
 */
export class Informer<T extends KubeObjectLike> {
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    relists: 0,
    failures: 0,
    lifetimeEnds: 0,
    restarts: 0,
    resyncs: 0,
  };
  private cache = new Map<string, T>();
  private readonly handlers = new Set<InformerHandler<T>>();
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly logger: RuntimeLogger;
  private readonly name: string;
  private readonly metrics: Metrics | undefined;
  private readonly backoffBaseMs: number;
  private readonly backoffCapMs: number;
  private readonly healthyWatchMs: number;
  private readonly lifetimeMs: number;
  private readonly lifetimeJitter: number;
  private readonly resyncPeriodMs: number;
  private readonly transform: InformerTransform<T>;
  private resourceVersion = '';
  private synced = false;
  private readonly syncWaiters = new Set<() => void>();
  private stopper = new AbortController();
  private loop?: Promise<void>;
  private resyncTimer?: TimerHandle;

  constructor(
    private readonly source: ListWatchSource<T>,
    options: InformerOptions & { transform?: InformerTransform<T> } = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.logger = options.logger ?? silentLogger;
    this.name = options.name ?? source.description;
    this.metrics = options.metrics;
    this.backoffBaseMs = options.backoffBaseMs ?? 500;
    this.backoffCapMs = options.backoffCapMs ?? 30_000;
    this.healthyWatchMs = options.healthyWatchMs ?? 10_000;
    this.lifetimeMs = options.watchLifetimeMs ?? 5 * 60_000;
    this.lifetimeJitter = options.watchLifetimeJitter ?? 0.1;
    this.resyncPeriodMs = options.resyncPeriodMs ?? 10 * 60_000;
    this.transform = options.transform ?? ((object) => object);
  }

  /** True once the first list has filled the cache (and forever after). */
  get hasSynced(): boolean {
    return this.synced;
  }

  /** The resourceVersion the next watch would start from. */
  get lastResourceVersion(): string {
    return this.resourceVersion;
  }

  get running(): boolean {
    return this.loop !== undefined;
  }

  start(): void {
    if (this.loop) return;
    this.stopper = new AbortController();
    this.loop = this.run().finally(() => (this.loop = undefined));
  }

  /** Ends the watch and the loop; the cache stays readable. */
  async stop(): Promise<void> {
    this.stopper.abort();
    this.clock.clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
    for (const wake of this.syncWaiters) wake();
    await this.loop;
  }

  /** Resolves true once synced, or false if `signal` aborts or the informer stops first. */
  waitForSync(signal?: AbortSignal): Promise<boolean> {
    if (this.synced) return Promise.resolve(true);
    if (signal?.aborted || this.stopper.signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = (): void => {
        this.syncWaiters.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve(this.synced);
      };
      this.syncWaiters.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }

  /** The cached (frozen) object, or undefined. */
  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  /** Every cached (frozen) object. */
  list(): T[] {
    return [...this.cache.values()];
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  /** Adds a handler; returns a function that removes it. */
  addHandler(handler: InformerHandler<T>): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  // ---- the supervisor -------------------------------------------------------------------------

  private async run(): Promise<void> {
    const signal = this.stopper.signal;
    let failures = 0;
    let needList = true;
    while (!signal.aborted) {
      if (needList) {
        this.stats.lists++;
        try {
          if (!(await this.listOnce(signal))) break;
          needList = false;
          this.markSynced();
        } catch (error) {
          if (signal.aborted) break;
          failures++;
          this.stats.failures++;
          const delay = this.backoff(failures);
          this.logger.warn(
            {
              informer: this.name,
              ...describeError(error),
              failures,
              retryInMs: Math.round(delay),
            },
            'list failed; retrying',
          );
          await this.clock.sleep(delay, signal);
          continue;
        }
      }
      const outcome = await this.watchOnce(signal);
      if (signal.aborted) break;
      if (!outcome.scheduled) {
        this.stats.restarts++;
        this.metrics?.inc('kiln_operator_watch_restarts_total', { resource: this.name });
      }
      if (httpStatusOf(outcome.error) === 410) {
        needList = true;
        this.stats.relists++;
        this.logger.info({ informer: this.name }, 'watch expired (410 Gone); relisting');
      } else if (outcome.error !== undefined) {
        this.logger.warn({ informer: this.name, ...describeError(outcome.error) }, 'watch failed');
      }
      if (outcome.healthy) {
        failures = 0;
        continue;
      }
      failures++;
      this.stats.failures++;
      await this.clock.sleep(this.backoff(failures), signal);
    }
  }

  /**
   * Lists and swaps the result into the cache; false when stopped meanwhile. A frame of its own:
   * in `run`'s, the listed items (the objects as received, before `transform`) would stay
   * reachable while it awaits the watch, i.e. as long as the cache.
   */
  private async listOnce(signal: AbortSignal): Promise<boolean> {
    const result = await this.source.list(signal);
    if (signal.aborted) return false;
    this.replace(result.items);
    this.resourceVersion = result.resourceVersion;
    return true;
  }

  private watchOnce(signal: AbortSignal): Promise<WatchOutcome> {
    const lifetime = this.lifetimeMs * (1 + this.lifetimeJitter * (2 * this.random() - 1));
    const timeoutSeconds = Math.max(1, Math.ceil(lifetime / 1000));
    const healthyAfter = Math.min(this.healthyWatchMs, lifetime);
    const started = this.clock.now();
    this.stats.watches++;
    return new Promise((resolve) => {
      let over = false;
      let handle: WatchHandle | undefined;
      const finish = (error: unknown, atLifetime = false): void => {
        if (over) return;
        over = true;
        this.clock.clearTimeout(timer);
        signal.removeEventListener('abort', onStop);
        handle?.abort();
        const lasted = this.clock.now() - started;
        if (error === undefined && (atLifetime || lasted >= timeoutSeconds * 1000))
          this.stats.lifetimeEnds++;
        const scheduled = error === undefined && !atLifetime && lasted >= timeoutSeconds * 1000;
        resolve({ error, healthy: lasted >= healthyAfter, scheduled });
      };
      const onStop = (): void => finish(undefined);
      const timer = this.clock.setTimeout(
        () => finish(undefined, true),
        timeoutSeconds * 1000 + LIFETIME_GRACE_MS,
      );
      signal.addEventListener('abort', onStop, { once: true });
      try {
        handle = this.source.watch(
          this.resourceVersion,
          (event) => {
            if (!over) this.apply(event);
          },
          (error) => finish(error),
          { timeoutSeconds },
        );
        if (over) handle.abort();
      } catch (error) {
        finish(error);
      }
    });
  }

  private backoff(failures: number): number {
    return jitteredDelay(failures, this.backoffBaseMs, this.backoffCapMs, this.random);
  }

  private markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    for (const wake of this.syncWaiters) wake();
    this.scheduleResync();
  }

  private scheduleResync(): void {
    if (this.resyncPeriodMs <= 0 || this.stopper.signal.aborted) return;
    this.resyncTimer = this.clock.setTimeout(() => {
      this.stats.resyncs++;
      for (const object of this.cache.values()) this.notify('update', object, object);
      this.scheduleResync();
    }, this.resyncPeriodMs);
  }

  // ---- the cache ------------------------------------------------------------------------------

  private apply(event: WatchEvent<T>): void {
    if (event.type === 'BOOKMARK') {
      if (event.resourceVersion) this.resourceVersion = event.resourceVersion;
      return;
    }
    const object = deepFreeze(this.transform(event.object));
    const key = objectKey(object);
    const previous = this.cache.get(key);
    if (event.type === 'DELETED') {
      this.cache.delete(key);
      this.notify('delete', object);
    } else {
      this.cache.set(key, object);
      if (previous) this.notify('update', previous, object);
      else this.notify('add', object);
    }
    const rv = object.metadata?.resourceVersion;
    if (rv) this.resourceVersion = rv;
  }

  /** Swaps in a fresh list and tells handlers what changed since the cache last saw it. */
  private replace(items: T[]): void {
    const next = new Map<string, T>();
    for (const item of items) {
      const object = deepFreeze(this.transform(item));
      next.set(objectKey(object), object);
    }
    const previous = this.cache;
    this.cache = next;
    for (const [key, object] of next) {
      const before = previous.get(key);
      if (before === undefined) this.notify('add', object);
      else if (before.metadata?.resourceVersion !== object.metadata?.resourceVersion)
        this.notify('update', before, object);
    }
    for (const [key, before] of previous) if (!next.has(key)) this.notify('delete', before);
  }

  private notify(kind: 'add' | 'delete', object: T): void;
  private notify(kind: 'update', oldObject: T, newObject: T): void;
  private notify(kind: 'add' | 'update' | 'delete', first: T, second?: T): void {
    for (const handler of [...this.handlers]) {
      try {
        if (kind === 'add') handler.onAdd?.(first);
        else if (kind === 'delete') handler.onDelete?.(first);
        else handler.onUpdate?.(first, second ?? first);
      } catch (error) {
        this.logger.error(
          { informer: this.name, key: objectKey(first), ...describeError(error) },
          'informer handler threw',
        );
      }
    }
  }
}

/** kubectl's client-side apply keeps the whole applied object in this annotation. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * A `transform` for informers whose readers look at neither `metadata.managedFields` (the
 * server's field ownership, rewritten on every write: about half of a small object's JSON) nor
 * kubectl's last-applied-configuration annotation (a second copy of the object): drops both, as
 * controller-runtime's cache TransformStripManagedFields does for the first. Writes go by
 * resourceVersion and merge patches, never by these fields, so nothing is lost for them.
 *
 * The trimmed objects are rebuilt, not `delete`d from: V8 turns an object that loses a property
 * into a hash table about four times the size, which would cost more than the fields did.
 */
export function trimForCache<T extends KubeObjectLike>(object: T): T {
  const metadata: Record<string, unknown> | undefined = object.metadata;
  if (metadata === undefined) return object;
  const annotations = metadata.annotations as Record<string, string> | undefined;
  const lastApplied = annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations;
  if (metadata.managedFields === undefined && !lastApplied) return object;
  const trimmed: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(metadata)) {
    if (field === 'managedFields') continue;
    if (field === 'annotations' && lastApplied) {
      const others = without(annotations, LAST_APPLIED_ANNOTATION);
      if (Object.keys(others).length > 0) trimmed[field] = others;
    } else trimmed[field] = value;
  }
  return { ...object, metadata: trimmed };
}

/** A copy of `record` without `field`, built property by property (see trimForCache). */
function without<V>(record: Record<string, V>, field: string): Record<string, V> {
  const copy: Record<string, V> = {};
  for (const [key, value] of Object.entries(record)) if (key !== field) copy[key] = value;
  return copy;
}

/** Freezes an object graph in place (JSON-shaped data: objects and arrays). */
export function deepFreeze<V>(value: V): V {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const child of Object.values(value as object)) deepFreeze(child);
  return Object.freeze(value);
}
