import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { KubeApiError } from '../../kubernetes/errors.js';
import {
  type BuildCondition,
  type BuildResource,
  type BuildResourceStatus,
  LOGS_FINALIZER,
} from '../api/build-resource.js';
import { type BuildWriter, namespaceOf } from './reconciler-ports.js';

export { LOGS_FINALIZER };

/** What the mirror adds to the record's own fields. */
export interface MirrorExtra {
  readonly jobName?: string;
  readonly podName?: string | undefined;
  /** Instead of the record's error message or cancel reason. */
  readonly message?: string;
}

/**
 * The Build's metadata and status as kiln writes them. The status mirrors the build's record
 * (state, ids, times, message, failureReason, progress and a `Succeeded` condition with the
 * Build's observedGeneration), written through `/status` against the read resourceVersion and
 * only when it differs from what the Build holds. The finalizer holds the Build while its log is
 * read. Every write moves the given resource on to the version the server answered with, so a
 * later write of the same reconcile does not meet a 409 of its own making.
 */
export class StatusMirror {
  constructor(
    private readonly builds: BuildWriter,
    private readonly now: () => number,
  ) {}

  /** Writes the status the record says, through /status, only when it changed. */
  async mirror(
    resource: BuildResource,
    record: BuildEntity,
    extra: MirrorExtra = {},
  ): Promise<void> {
    const [status, reason] = conditionOf(record);
    const message = extra.message ?? record.errorMessage ?? record.cancelReason ?? '';
    const desired: BuildResourceStatus = {
      state: record.status,
      buildId: record.id,
      buildNumber: record.buildNumber,
      ...(extra.jobName === undefined ? {} : { jobName: extra.jobName }),
      ...(extra.podName === undefined ? {} : { podName: extra.podName }),
      ...(record.startedAt === null ? {} : { startedAt: record.startedAt.toISOString() }),
      ...(record.completedAt === null ? {} : { completedAt: record.completedAt.toISOString() }),
      ...(message === '' ? {} : { message }),
      ...(record.failureReason === null ? {} : { failureReason: record.failureReason }),
      ...(record.progressTotal === null
        ? {}
        : { progress: { current: record.progressCurrent ?? 0, total: record.progressTotal } }),
      conditions: [this.condition(resource, status, reason, message)],
    };
    await this.write(resource, desired);
  }

  /** A Build kiln will not register: failed with InvalidSpec, for good (it is not retried). */
  async refuse(resource: BuildResource, message: string): Promise<void> {
    await this.write(resource, {
      state: 'failed',
      failureReason: 'InvalidSpec',
      message,
      conditions: [this.condition(resource, 'False', 'InvalidSpec', message)],
    });
  }

  /** The resource with kiln's finalizer: as it is, or as the server answered the write adding it. */
  async withFinalizer(resource: BuildResource): Promise<BuildResource> {
    const finalizers = resource.metadata.finalizers ?? [];
    if (finalizers.includes(LOGS_FINALIZER)) return resource;
    return this.builds.mergePatch(namespaceOf(resource), resource.metadata.name, {
      metadata: {
        resourceVersion: resource.metadata.resourceVersion,
        finalizers: [...finalizers, LOGS_FINALIZER],
      },
    });
  }

  /** Lets go of the Build: its log is stored, or there is none to read. */
  async release(resource: BuildResource): Promise<void> {
    const finalizers = resource.metadata.finalizers ?? [];
    if (!finalizers.includes(LOGS_FINALIZER)) return;
    try {
      await this.builds.mergePatch(namespaceOf(resource), resource.metadata.name, {
        metadata: {
          resourceVersion: resource.metadata.resourceVersion,
          finalizers: finalizers.filter((f) => f !== LOGS_FINALIZER),
        },
      });
    } catch (error) {
      if (!(error instanceof KubeApiError && error.status === 404)) throw error;
    }
  }

  private async write(resource: BuildResource, desired: BuildResourceStatus): Promise<void> {
    const current = resource.status ?? {};
    const next: BuildResourceStatus = {
      ...current,
      ...desired,
      observedGeneration: resource.metadata.generation ?? 0,
    };
    if (sameStatus(current, next)) return;
    const written = await this.builds.mergePatchStatus(
      namespaceOf(resource),
      resource.metadata.name,
      { metadata: { resourceVersion: resource.metadata.resourceVersion }, status: next },
    );
    // A later write of this reconcile (the finalizer's release after the final status) goes
    // against the version just written: with the read one it would always get a 409.
    resource.metadata.resourceVersion = written.metadata.resourceVersion;
    resource.status = written.status;
  }

  private condition(
    resource: BuildResource,
    status: BuildCondition['status'],
    reason: string,
    message: string,
  ): BuildCondition {
    const previous = resource.status?.conditions?.find((c) => c.type === 'Succeeded');
    const unchanged = previous?.status === status && previous.reason === reason;
    return {
      type: 'Succeeded',
      status,
      reason,
      message,
      lastTransitionTime:
        unchanged && previous !== undefined
          ? previous.lastTransitionTime
          : new Date(this.now()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      observedGeneration: resource.metadata.generation ?? 0,
    };
  }
}

function conditionOf(record: BuildEntity): [BuildCondition['status'], string] {
  switch (record.status) {
    case 'queued':
      return ['Unknown', 'Queued'];
    case 'in_progress':
      return ['Unknown', 'Running'];
    case 'success':
      return ['True', 'Succeeded'];
    case 'failed':
      return ['False', record.failureReason ?? 'BuildFailed'];
    case 'cancelled':
      return ['False', 'Cancelled'];
  }
}

/** Equal, ignoring a lastTransitionTime that differs only because nothing transitioned. */
function sameStatus(a: BuildResourceStatus, b: BuildResourceStatus): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([, v]) => v !== undefined)
        .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
        .map(([k, v]) => [k, sorted(v)]),
    );
  }
  return value;
}
