// In-memory stand-ins for the operator runtime's ports (src/cluster/ports.ts), for the unit tests
// of src/operator/runtime/. They keep the API server's rules that the runtime relies on
// (resourceVersions, 410 Gone past the history, 409 on stale writes) and hand out copies, as a
// server would. They live under test/ so that they are not compiled into dist/.
import type {
  KubeObjectLike,
  LeaseRecord,
  LeaseStore,
  ListResult,
  ListWatchSource,
  WatchEvent,
  WatchHandle,
  WatchOptions,
} from '../../src/cluster/ports.js';

/** An error as an adapter throws it: a message and the HTTP status. */
export class StatusError extends Error {
  constructor(
    readonly status: number,
    message = `HTTP ${status}`,
  ) {
    super(message);
    this.name = 'StatusError';
  }
}

const keyOf = (object: KubeObjectLike): string =>
  `${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`;

interface OpenWatch<T> {
  onEvent: (event: WatchEvent<T>) => void;
  onDone: (error?: unknown) => void;
  options?: WatchOptions;
}

/**
 * One collection of an in-memory API server: `upsert`/`remove` change it (and notify open
 * watches), `compact` forgets the history, `endWatches` ends them, `failNext`/`goDown` make
 * calls fail. Callbacks run asynchronously (a microtask later), as they would over a network.
 */
export class MemoryListWatch<T extends KubeObjectLike> implements ListWatchSource<T> {
  readonly description = 'memory';
  /** Calls made, for assertions. */
  lists = 0;
  watches = 0;
  /** The last watch call's resourceVersion and options. */
  lastWatch?: { resourceVersion: string; options?: WatchOptions };
  private rv = 0;
  private compactedRv = 0;
  private readonly objects = new Map<string, T>();
  private readonly history: Array<{ rv: number; event: WatchEvent<T> }> = [];
  private readonly open = new Set<OpenWatch<T>>();
  private readonly failures: Array<{ call: 'list' | 'watch'; error: Error }> = [];
  private down?: Error;

  get resourceVersion(): string {
    return String(this.rv);
  }

  get openWatches(): number {
    return this.open.size;
  }

  /** Creates or replaces an object; returns the stored copy (with its new resourceVersion). */
  upsert(object: T): T {
    const stored = structuredClone(object);
    stored.metadata = { ...stored.metadata, resourceVersion: String(++this.rv) };
    const key = keyOf(stored);
    const type = this.objects.has(key) ? 'MODIFIED' : 'ADDED';
    this.objects.set(key, stored);
    this.record({ type, object: stored });
    return structuredClone(stored);
  }

  remove(namespace: string | undefined, name: string): void {
    const key = `${namespace ?? ''}/${name}`;
    const found = this.objects.get(key);
    if (!found) return;
    this.objects.delete(key);
    const gone = structuredClone(found);
    gone.metadata = { ...gone.metadata, resourceVersion: String(++this.rv) };
    this.record({ type: 'DELETED', object: gone });
  }

  /** Sends a BOOKMARK with the current resourceVersion to every open watch. */
  bookmark(): void {
    for (const watch of this.open)
      queueMicrotask(() => watch.onEvent({ type: 'BOOKMARK', resourceVersion: String(this.rv) }));
  }

  /** Forgets the history: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.history.length = 0;
    this.compactedRv = this.rv;
  }

  /** Ends every open watch, cleanly or with `error`. */
  endWatches(error?: Error): void {
    for (const watch of [...this.open]) {
      this.open.delete(watch);
      queueMicrotask(() => watch.onDone(error));
    }
  }

  /** The next call of that kind fails with `error`. */
  failNext(call: 'list' | 'watch', error: Error): void {
    this.failures.push({ call, error });
  }

  /** Every call fails with `error` (and open watches end with it) until `goUp()`. */
  goDown(error: Error = new Error('connect ECONNREFUSED')): void {
    this.down = error;
    this.endWatches(error);
  }

  goUp(): void {
    this.down = undefined;
  }

  list(): Promise<ListResult<T>> {
    this.lists++;
    const failure = this.takeFailure('list');
    if (failure !== undefined) return Promise.reject(failure);
    return Promise.resolve({
      items: [...this.objects.values()].map((o) => structuredClone(o)),
      resourceVersion: String(this.rv),
    });
  }

  watch(
    resourceVersion: string,
    onEvent: (event: WatchEvent<T>) => void,
    onDone: (error?: unknown) => void,
    options?: WatchOptions,
  ): WatchHandle {
    this.watches++;
    this.lastWatch = { resourceVersion, ...(options ? { options } : {}) };
    const watch: OpenWatch<T> = { onEvent, onDone, ...(options ? { options } : {}) };
    const failure = this.takeFailure('watch');
    const from = Number(resourceVersion);
    if (failure !== undefined) {
      queueMicrotask(() => onDone(failure));
    } else if (from < this.compactedRv) {
      queueMicrotask(() => onDone(new StatusError(410, `too old resource version: ${from}`)));
    } else {
      this.open.add(watch);
      const replay = this.history.filter((h) => h.rv > from).map((h) => structuredClone(h.event));
      queueMicrotask(() => {
        if (this.open.has(watch)) for (const event of replay) onEvent(event);
      });
    }
    return { abort: () => void this.open.delete(watch) };
  }

  private takeFailure(call: 'list' | 'watch'): Error | undefined {
    if (this.down !== undefined) return this.down;
    const index = this.failures.findIndex((f) => f.call === call);
    if (index < 0) return undefined;
    return this.failures.splice(index, 1)[0]?.error;
  }

  private record(event: WatchEvent<T>): void {
    this.history.push({ rv: this.rv, event });
    for (const watch of this.open) {
      const copy = structuredClone(event);
      queueMicrotask(() => {
        if (this.open.has(watch)) watch.onEvent(copy);
      });
    }
  }
}

/** How one client of a MemoryLeaseStore reaches it. */
type Link = 'up' | 'hanging' | 'failing';

/**
 * Leases in memory, shared by several clients (`client()`), each with its own link that a test
 * can make hang (requests never answer, as behind a black hole) or fail (connection refused).
 */
export class MemoryLeaseStore {
  private rv = 0;
  private readonly leases = new Map<string, LeaseRecord>();

  client(): MemoryLeaseClient {
    return new MemoryLeaseClient(this);
  }

  /** The stored Lease (a copy). */
  lease(namespace: string, name: string): LeaseRecord | undefined {
    const found = this.leases.get(`${namespace}/${name}`);
    return found ? { ...found } : undefined;
  }

  /** Stores a Lease as given, as another writer would. */
  put(lease: LeaseRecord): LeaseRecord {
    const stored = { ...lease, resourceVersion: String(++this.rv) };
    this.leases.set(`${lease.namespace}/${lease.name}`, stored);
    return { ...stored };
  }

  /** @internal */
  apply(op: 'get' | 'create' | 'update', lease: LeaseRecord): LeaseRecord | undefined {
    const key = `${lease.namespace}/${lease.name}`;
    const current = this.leases.get(key);
    switch (op) {
      case 'get':
        return current ? { ...current } : undefined;
      case 'create':
        if (current) throw new StatusError(409, `leases "${lease.name}" already exists`);
        return this.put(lease);
      case 'update':
        if (!current) throw new StatusError(404, `leases "${lease.name}" not found`);
        if (lease.resourceVersion !== current.resourceVersion)
          throw new StatusError(409, 'the object has been modified');
        return this.put(lease);
    }
  }
}

export class MemoryLeaseClient implements LeaseStore {
  /** Requests made through this client. */
  calls = 0;
  private link: Link = 'up';

  constructor(private readonly store: MemoryLeaseStore) {}

  /** Requests from now on never answer (until `heal`; ones already hanging stay hung). */
  hang(): void {
    this.link = 'hanging';
  }

  /** Requests from now on fail at once, as with a refused connection. */
  fail(): void {
    this.link = 'failing';
  }

  heal(): void {
    this.link = 'up';
  }

  get(namespace: string, name: string): Promise<LeaseRecord | undefined> {
    return this.call('get', { namespace, name });
  }

  create(lease: LeaseRecord): Promise<LeaseRecord> {
    return this.call('create', lease) as Promise<LeaseRecord>;
  }

  update(lease: LeaseRecord): Promise<LeaseRecord> {
    return this.call('update', lease) as Promise<LeaseRecord>;
  }

  private call(
    op: 'get' | 'create' | 'update',
    lease: LeaseRecord,
  ): Promise<LeaseRecord | undefined> {
    this.calls++;
    if (this.link === 'hanging') return new Promise(() => undefined);
    if (this.link === 'failing') return Promise.reject(new Error('connect ECONNREFUSED'));
    try {
      return Promise.resolve(this.store.apply(op, { ...lease }));
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
