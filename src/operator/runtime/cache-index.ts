import { type Informer, objectKey } from './informer.js';
import type { KubeObjectLike } from '../../cluster/ports.js';

/**
 * A secondary index over an informer's cache (client-go's Indexer): the cached objects that
 * carry a value, found without a scan of the whole cache. It follows the informer's adds,
 * updates and deletes (a relist's too), so it holds what the cache holds.
 */
export class CacheIndex<T extends KubeObjectLike> {
  private readonly byValue = new Map<string, Map<string, T>>();
  private readonly valueOfKey = new Map<string, string>();

  /** `indexOf` gives the value an object is found by (undefined: not indexed). */
  constructor(
    informer: Informer<T>,
    private readonly indexOf: (object: T) => string | undefined,
  ) {
    informer.addHandler({
      onAdd: (object) => this.put(object),
      onUpdate: (_, object) => this.put(object),
      onDelete: (object) => this.remove(objectKey(object)),
    });
  }

  /** The cached objects indexed under `value`. */
  get(value: string): T[] {
    return [...(this.byValue.get(value)?.values() ?? [])];
  }

  private put(object: T): void {
    const key = objectKey(object);
    this.remove(key);
    const value = this.indexOf(object);
    if (value === undefined) return;
    let objects = this.byValue.get(value);
    if (objects === undefined) {
      objects = new Map<string, T>();
      this.byValue.set(value, objects);
    }
    objects.set(key, object);
    this.valueOfKey.set(key, value);
  }

  private remove(key: string): void {
    const value = this.valueOfKey.get(key);
    if (value === undefined) return;
    this.valueOfKey.delete(key);
    const objects = this.byValue.get(value);
    objects?.delete(key);
    if (objects?.size === 0) this.byValue.delete(value);
  }
}
