import * as k8s from '@kubernetes/client-node';
import type { LeaseRecord, LeaseStore } from '../cluster/ports.js';
import { toKubeError } from './errors.js';
import type { KubeClient } from './kube-client.js';

/**
 * LeaseStore over CoordinationV1Api. Times cross as epoch milliseconds and go on the wire as
 * MicroTime; errors are KubeApiError (409 on a stale resourceVersion or an existing Lease) or
 * KubeUnavailableError. A request whose signal aborts is cancelled.
 */
export class KubeLeaseStore implements LeaseStore {
  private readonly api: k8s.CoordinationV1Api;

  constructor(client: KubeClient) {
    this.api = client.apiClient(k8s.CoordinationV1Api);
  }

  async get(
    namespace: string,
    name: string,
    signal?: AbortSignal,
  ): Promise<LeaseRecord | undefined> {
    try {
      return fromLease(
        await this.api.readNamespacedLease({ namespace, name }, withSignal(signal)),
        namespace,
        name,
      );
    } catch (error) {
      if (signal?.aborted) throw error;
      const converted = toKubeError(error);
      if ((converted as { status?: unknown }).status === 404) return undefined;
      throw converted;
    }
  }

  async create(lease: LeaseRecord, signal?: AbortSignal): Promise<LeaseRecord> {
    try {
      const body = toLease(lease);
      const created = await this.api.createNamespacedLease(
        { namespace: lease.namespace, body },
        withSignal(signal),
      );
      return fromLease(created, lease.namespace, lease.name);
    } catch (error) {
      if (signal?.aborted) throw error;
      throw toKubeError(error);
    }
  }

  async update(lease: LeaseRecord, signal?: AbortSignal): Promise<LeaseRecord> {
    try {
      const replaced = await this.api.replaceNamespacedLease(
        { namespace: lease.namespace, name: lease.name, body: toLease(lease) },
        withSignal(signal),
      );
      return fromLease(replaced, lease.namespace, lease.name);
    } catch (error) {
      if (signal?.aborted) throw error;
      throw toKubeError(error);
    }
  }
}

/** Per-request options that hand the signal to the fetch. */
function withSignal(signal: AbortSignal | undefined): k8s.ConfigurationOptions | undefined {
  if (!signal) return undefined;
  return {
    middleware: [
      {
        pre: (context) => {
          context.setSignal(signal);
          return new k8s.Observable(Promise.resolve(context));
        },
        post: (response) => new k8s.Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

function toLease(lease: LeaseRecord): k8s.V1Lease {
  const micro = (ms: number | undefined): k8s.V1MicroTime | undefined =>
    ms === undefined ? undefined : new k8s.V1MicroTime(ms);
  const acquireTime = micro(lease.acquireTime);
  const renewTime = micro(lease.renewTime);
  return {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: {
      name: lease.name,
      namespace: lease.namespace,
      ...(lease.resourceVersion ? { resourceVersion: lease.resourceVersion } : {}),
    },
    spec: {
      holderIdentity: lease.holderIdentity ?? '',
      ...(lease.leaseDurationSeconds !== undefined
        ? { leaseDurationSeconds: lease.leaseDurationSeconds }
        : {}),
      ...(acquireTime ? { acquireTime } : {}),
      ...(renewTime ? { renewTime } : {}),
      ...(lease.leaseTransitions !== undefined ? { leaseTransitions: lease.leaseTransitions } : {}),
    },
  };
}

function fromLease(lease: k8s.V1Lease, namespace: string, name: string): LeaseRecord {
  const spec = lease.spec ?? {};
  // client-node does not parse MicroTime: it arrives as the RFC 3339 string the server sent.
  const ms = (value: unknown): number | undefined => {
    if (value instanceof Date) return value.getTime();
    if (typeof value !== 'string' || value === '') return undefined;
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) ? undefined : parsed;
  };
  const acquireTime = ms(spec.acquireTime);
  const renewTime = ms(spec.renewTime);
  return {
    namespace,
    name,
    ...(lease.metadata?.resourceVersion ? { resourceVersion: lease.metadata.resourceVersion } : {}),
    ...(spec.holderIdentity ? { holderIdentity: spec.holderIdentity } : {}),
    ...(spec.leaseDurationSeconds !== undefined
      ? { leaseDurationSeconds: spec.leaseDurationSeconds }
      : {}),
    ...(acquireTime !== undefined ? { acquireTime } : {}),
    ...(renewTime !== undefined ? { renewTime } : {}),
    ...(spec.leaseTransitions !== undefined ? { leaseTransitions: spec.leaseTransitions } : {}),
  };
}
