import * as k8s from '@kubernetes/client-node';
import { KubeApiError, toKubeError } from './errors.js';
import type { KubeClient } from './kube-client.js';

/**
 * The built-in objects the operator writes for a build: its Job, the ConfigMap with its
 * Dockerfile, and Events. Errors are KubeApiError or KubeUnavailableError.
 */
export class KubeWorkloads {
  private readonly batch: k8s.BatchV1Api;
  private readonly core: k8s.CoreV1Api;

  constructor(client: KubeClient) {
    this.batch = client.apiClient(k8s.BatchV1Api);
    this.core = client.apiClient(k8s.CoreV1Api);
  }

  createJob(namespace: string, body: k8s.V1Job): Promise<k8s.V1Job> {
    return call(() => this.batch.createNamespacedJob({ namespace, body }));
  }

  /** A merge patch of a Job (e.g. its ttlSecondsAfterFinished once the logs are stored). */
  patchJob(namespace: string, name: string, patch: object): Promise<k8s.V1Job> {
    return call(() =>
      this.batch.patchNamespacedJob(
        { namespace, name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /** Deletes a Job and (background propagation) its pods; false when there was none. */
  async deleteJob(namespace: string, name: string): Promise<boolean> {
    try {
      await call(() =>
        this.batch.deleteNamespacedJob({ namespace, name, propagationPolicy: 'Background' }),
      );
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return false;
      throw error;
    }
  }

  createConfigMap(namespace: string, body: k8s.V1ConfigMap): Promise<k8s.V1ConfigMap> {
    return call(() => this.core.createNamespacedConfigMap({ namespace, body }));
  }

  patchConfigMap(namespace: string, name: string, patch: object): Promise<k8s.V1ConfigMap> {
    return call(() =>
      this.core.patchNamespacedConfigMap(
        { namespace, name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  createEvent(namespace: string, body: k8s.CoreV1Event): Promise<k8s.CoreV1Event> {
    return call(() => this.core.createNamespacedEvent({ namespace, body }));
  }
}

async function call<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw toKubeError(error);
  }
}
