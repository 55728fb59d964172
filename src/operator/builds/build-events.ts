import type { CoreV1Event } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { BUILD_API_VERSION, BUILD_KIND, type BuildResource } from '../api/build-resource.js';
import { namespaceOf, type WorkloadWriter } from './reconciler-ports.js';

const FIELD_MANAGER = 'kiln-operator';

/**
 * Kubernetes Events about a Build (`kubectl describe kb`): Registered, JobCreated, a refusal's
 * reason. An Event is a courtesy: one that cannot be written is logged, never a reconcile's
 * failure.
 */
export class BuildEvents {
  constructor(
    private readonly workloads: Pick<WorkloadWriter, 'createEvent'>,
    private readonly logger: Logger,
    private readonly now: () => number,
  ) {}

  async emit(
    resource: BuildResource,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const namespace = namespaceOf(resource);
    const now = new Date(this.now());
    const event: CoreV1Event = {
      metadata: { generateName: `${resource.metadata.name}.`, namespace },
      involvedObject: {
        apiVersion: BUILD_API_VERSION,
        kind: BUILD_KIND,
        name: resource.metadata.name,
        namespace,
        ...(resource.metadata.uid === undefined ? {} : { uid: resource.metadata.uid }),
      },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: FIELD_MANAGER },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await this.workloads
      .createEvent(namespace, event)
      .catch((error: unknown) =>
        this.logger.warn({ err: error, build: resource.metadata.name }, 'could not write an Event'),
      );
  }
}
