import * as k8s from '@kubernetes/client-node';
import { kubeCall } from './errors.js';
import type { KubeClient } from './kube-client.js';

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
 * Create, read, merge-patch and delete one kind of namespaced custom resource. Errors are
 * KubeApiError (the server said no) or KubeUnavailableError (no server answered).
 */
export class CustomResources<T extends CustomObject> {
  private readonly api: k8s.CustomObjectsApi;

  constructor(
    client: KubeClient,
    private readonly group: string,
    private readonly version: string,
    private readonly plural: string,
  ) {
    this.api = client.apiClient(k8s.CustomObjectsApi);
  }

  async create(namespace: string, body: T): Promise<T> {
    return this.call(() => this.api.createNamespacedCustomObject({ ...this.at(namespace), body }));
  }

  /** The object, or undefined when there is none. */
  async get(namespace: string, name: string): Promise<T | undefined> {
    try {
      return await this.call(() =>
        this.api.getNamespacedCustomObject({ ...this.at(namespace), name }),
      );
    } catch (error) {
      if ((error as { status?: unknown }).status === 404) return undefined;
      throw error;
    }
  }

  /** An RFC 7386 merge patch (client-node's default would be a JSON patch). */
  async mergePatch(namespace: string, name: string, patch: object): Promise<T> {
    return this.call(() =>
      this.api.patchNamespacedCustomObject(
        { ...this.at(namespace), name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /**
   * A merge patch of the status subresource. With `metadata.resourceVersion` in the patch, the
   * server refuses it (409) when the object changed since: optimistic concurrency.
   */
  async mergePatchStatus(namespace: string, name: string, patch: object): Promise<T> {
    return this.call(() =>
      this.api.patchNamespacedCustomObjectStatus(
        { ...this.at(namespace), name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /** Deletes with background propagation; true when it existed. */
  async delete(namespace: string, name: string): Promise<boolean> {
    try {
      await this.call(() =>
        this.api.deleteNamespacedCustomObject({
          ...this.at(namespace),
          name,
          propagationPolicy: 'Background',
        }),
      );
      return true;
    } catch (error) {
      if ((error as { status?: unknown }).status === 404) return false;
      throw error;
    }
  }

  private at(namespace: string) {
    return { group: this.group, version: this.version, namespace, plural: this.plural };
  }

  private async call(request: () => Promise<unknown>): Promise<T> {
    return (await kubeCall(request)) as T;
  }
}
