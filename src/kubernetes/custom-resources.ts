import { KubeApiError } from './errors.js';
import { type KubeClient, segment } from './kube-client.js';

/** A namespaced custom resource as JSON: callers bring their own typed shape. */
export interface CustomObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    uid?: string;
    generation?: number;
    finalizers?: string[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/**
 * Create, read, merge-patch and delete one kind of namespaced custom resource, as JSON (no
 * generated client: a Build is written for every build, see KubeClient.json). Errors are
 * KubeApiError (the server said no) or KubeUnavailableError (no server answered).
 */
export class CustomResources<T extends CustomObject> {
  constructor(
    private readonly client: KubeClient,
    private readonly group: string,
    private readonly version: string,
    private readonly plural: string,
  ) {}

  async create(namespace: string, body: T): Promise<T> {
    return this.client.json('POST', this.path(namespace), body);
  }

  /** The object, or undefined when there is none. */
  async get(namespace: string, name: string): Promise<T | undefined> {
    try {
      return await this.client.json<T>('GET', this.path(namespace, name));
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  /** An RFC 7386 merge patch (client-node's default would be a JSON patch). */
  async mergePatch(namespace: string, name: string, patch: object): Promise<T> {
    return this.client.json('PATCH', this.path(namespace, name), patch, MERGE_PATCH);
  }

  /**
   * A merge patch of the status subresource. With `metadata.resourceVersion` in the patch, the
   * server refuses it (409) when the object changed since: optimistic concurrency.
   */
  async mergePatchStatus(namespace: string, name: string, patch: object): Promise<T> {
    return this.client.json('PATCH', `${this.path(namespace, name)}/status`, patch, MERGE_PATCH);
  }

  /** Deletes with background propagation; true when it existed. */
  async delete(namespace: string, name: string): Promise<boolean> {
    try {
      await this.client.json(
        'DELETE',
        `${this.path(namespace, name)}?propagationPolicy=Background`,
      );
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return false;
      throw error;
    }
  }

  private path(namespace: string, name?: string): string {
    const collection = `/apis/${this.group}/${this.version}/namespaces/${segment(namespace)}/${this.plural}`;
    return name === undefined ? collection : `${collection}/${segment(name)}`;
  }
}

const MERGE_PATCH = 'application/merge-patch+json';
