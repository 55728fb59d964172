import * as k8s from '@kubernetes/client-node';
import { KubeApiError, kubeCall } from './errors.js';
import { type KubeClient, segment } from './kube-client.js';

/**
 * The built-in objects the operator writes for a build: its Job, the ConfigMap with its
 * Dockerfile, and Events. Errors are KubeApiError or KubeUnavailableError.
 */
export class KubeWorkloads {
  private readonly batch: k8s.BatchV1Api;
  private readonly core: k8s.CoreV1Api;

  constructor(private readonly client: KubeClient) {
    this.batch = client.apiClient(k8s.BatchV1Api);
    this.core = client.apiClient(k8s.CoreV1Api);
  }

  /** Every build's: sent as JSON without the generated client (KubeClient.json). */
  createJob(namespace: string, body: k8s.V1Job): Promise<k8s.V1Job> {
    return this.client.json('POST', `/apis/batch/v1/namespaces/${segment(namespace)}/jobs`, body);
  }

  /** A merge patch of a Job (e.g. its ttlSecondsAfterFinished once the logs are stored). */
  patchJob(namespace: string, name: string, patch: object): Promise<k8s.V1Job> {
    return kubeCall(() =>
      this.batch.patchNamespacedJob(
        { namespace, name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /** Deletes a Job and (background propagation) its pods; false when there was none. */
  async deleteJob(namespace: string, name: string): Promise<boolean> {
    try {
      await kubeCall(() =>
        this.batch.deleteNamespacedJob({ namespace, name, propagationPolicy: 'Background' }),
      );
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return false;
      throw error;
    }
  }

  createConfigMap(namespace: string, body: k8s.V1ConfigMap): Promise<k8s.V1ConfigMap> {
    return kubeCall(() => this.core.createNamespacedConfigMap({ namespace, body }));
  }

  patchConfigMap(namespace: string, name: string, patch: object): Promise<k8s.V1ConfigMap> {
    return kubeCall(() =>
      this.core.patchNamespacedConfigMap(
        { namespace, name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /** A build's own Secret (upload tokens, buildx secrets); owned by its Job once that exists. */
  createSecret(namespace: string, body: k8s.V1Secret): Promise<k8s.V1Secret> {
    return kubeCall(() => this.core.createNamespacedSecret({ namespace, body }));
  }

  /**
   * A build's own Secret, read back by an operator that adopts a running build to mask what its
   * pod was given; undefined when it does not exist.
   */
  async readSecret(namespace: string, name: string): Promise<k8s.V1Secret | undefined> {
    try {
      return await kubeCall(() => this.core.readNamespacedSecret({ namespace, name }));
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  patchSecret(namespace: string, name: string, patch: object): Promise<k8s.V1Secret> {
    return kubeCall(() =>
      this.core.patchNamespacedSecret(
        { namespace, name, body: patch },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      ),
    );
  }

  /** Every build's (JobCreated, …): sent as JSON without the generated client. */
  createEvent(namespace: string, body: k8s.CoreV1Event): Promise<k8s.CoreV1Event> {
    return this.client.json('POST', `/api/v1/namespaces/${segment(namespace)}/events`, body);
  }
}
