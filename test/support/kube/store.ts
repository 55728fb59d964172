import { clone, type KubeObject } from './types.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** One change, as stored in the history window: `prev` lets a list be rebuilt at an older RV. */
export interface StoredEvent {
  rv: number;
  resource: string;
  type: WatchEventType;
  object: KubeObject;
  prev?: KubeObject;
}

type Listener = (event: StoredEvent) => void;

const keyOf = (namespace: string | undefined, name: string): string => `${namespace ?? ''}/${name}`;

/**
 * The double's etcd: objects per resource (`group/plural`), one global resourceVersion counter
 * and a bounded history of changes. Versions older than the window are "compacted": a watch or a
 * continue token from before it gets 410 Gone, as from the real server.
 */
export class ObjectStore {
  private revision = 0;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private history: StoredEvent[] = [];
  private compacted = 0;
  private readonly listeners = new Set<Listener>();

  constructor(private readonly historyLimit: number) {}

  get currentRv(): number {
    return this.revision;
  }

  /** Events at or below this RV are gone. */
  get compactedRv(): number {
    return this.compacted;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const found = this.objects.get(resource)?.get(keyOf(namespace, name));
    return found ? clone(found) : undefined;
  }

  /**
   * The stored object itself, not a copy: for a read that changes nothing and keeps nothing (a
   * log stream asking whether its container ended on every write). Never modify it.
   */
  peek(
    resource: string,
    namespace: string | undefined,
    name: string,
  ): Readonly<KubeObject> | undefined {
    return this.objects.get(resource)?.get(keyOf(namespace, name));
  }

  /**
   * Copies of the objects of a resource (in a namespace), sorted; `where` picks among the stored
   * objects before any is copied (it must only read them), so a controller looking for a Job's
   * few pods among thousands copies only those.
   */
  list(
    resource: string,
    namespace?: string,
    where?: (object: KubeObject) => boolean,
  ): KubeObject[] {
    const all = [...(this.objects.get(resource)?.values() ?? [])];
    return sortObjects(
      all.filter(
        (o) =>
          (namespace === undefined || o.metadata.namespace === namespace) &&
          (where === undefined || where(o)),
      ),
    ).map(clone);
  }

  resources(): string[] {
    return [...this.objects.keys()];
  }

  /** Stores the object at a new RV and returns the stored copy. */
  put(resource: string, object: KubeObject): KubeObject {
    const map = this.objects.get(resource) ?? new Map<string, KubeObject>();
    this.objects.set(resource, map);
    const key = keyOf(object.metadata.namespace, object.metadata.name ?? '');
    const prev = map.get(key);
    const stored = clone(object);
    stored.metadata.resourceVersion = String(++this.revision);
    map.set(key, stored);
    this.record({
      rv: this.revision,
      resource,
      type: prev ? 'MODIFIED' : 'ADDED',
      object: stored,
      ...(prev ? { prev } : {}),
    });
    return clone(stored);
  }

  /** Removes the object; the DELETED event carries the deletion's RV, as in the real server. */
  remove(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const map = this.objects.get(resource);
    const prev = map?.get(keyOf(namespace, name));
    if (!map || !prev) return undefined;
    map.delete(keyOf(namespace, name));
    const gone = clone(prev);
    gone.metadata.resourceVersion = String(++this.revision);
    this.record({ rv: this.revision, resource, type: 'DELETED', object: gone, prev });
    return clone(gone);
  }

  /** The resource's objects as they were at `rv`, or undefined when `rv` left the window. */
  stateAt(resource: string, rv: number): KubeObject[] | undefined {
    if (rv < this.compacted) return undefined;
    const state = new Map<string, KubeObject>(this.objects.get(resource) ?? []);
    for (const event of [...this.history].reverse()) {
      if (event.rv <= rv) break;
      if (event.resource !== resource) continue;
      const key = keyOf(event.object.metadata.namespace, event.object.metadata.name ?? '');
      if (event.prev) state.set(key, event.prev);
      else state.delete(key);
    }
    return sortObjects([...state.values()]).map(clone);
  }

  /** Changes after `rv`, or undefined when some of them left the window. */
  eventsAfter(rv: number): StoredEvent[] | undefined {
    if (rv < this.compacted) return undefined;
    return this.history.filter((e) => e.rv > rv);
  }

  /** Drops the whole history: every RV before now becomes too old. */
  compact(): void {
    this.history = [];
    this.compacted = this.revision;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(event: StoredEvent): void {
    this.history.push(event);
    while (this.history.length > this.historyLimit) {
      const dropped = this.history.shift();
      if (dropped) this.compacted = dropped.rv;
    }
    for (const listener of [...this.listeners]) listener(event);
  }
}

export function sortObjects(objects: KubeObject[]): KubeObject[] {
  return objects.sort((a, b) =>
    keyOf(a.metadata.namespace, a.metadata.name ?? '').localeCompare(
      keyOf(b.metadata.namespace, b.metadata.name ?? ''),
    ),
  );
}
