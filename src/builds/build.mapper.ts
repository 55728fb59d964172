import type { QueueView } from '../admission/admission.js';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import type {
  BuildDto,
  BuildQueueDto,
  BuildStatusDto,
  BuildSummaryDto,
} from './dto/build-response.dto.js';

const iso = (date: Date | null): string | null => (date === null ? null : date.toISOString());

export function toBuildSummary(build: BuildEntity): BuildSummaryDto {
  return {
    id: build.id,
    project_id: build.projectId,
    build_number: build.buildNumber,
    git_branch: build.gitBranch,
    status: build.status,
    created_at: build.createdAt.toISOString(),
    updated_at: build.updatedAt.toISOString(),
  };
}

export function toBuildResponse(build: BuildEntity, queue?: QueueView): BuildDto {
  return {
    id: build.id,
    project_id: build.projectId,
    build_number: build.buildNumber,
    git_branch: build.gitBranch,
    git_commit: build.gitCommit,
    git_author_name: build.gitAuthorName,
    git_author_email: build.gitAuthorEmail,
    status: build.status,
    error_message: build.errorMessage,
    started_at: iso(build.startedAt),
    completed_at: iso(build.completedAt),
    created_at: build.createdAt.toISOString(),
    updated_at: build.updatedAt.toISOString(),
    image_digest: build.imageDigest,
    images: [...build.images],
    failure_reason: build.failureReason,
    keep: build.keep,
    trigger:
      build.triggerId === null
        ? null
        : { id: build.triggerId, event: build.triggerEvent, pusher: build.triggeredBy },
    provenance: build.provenance,
    ...(queue === undefined ? {} : { queue: toQueue(queue) }),
  };
}

function toQueue(queue: QueueView): BuildQueueDto {
  return {
    position: queue.position,
    reason: queue.reason,
    message: queue.message,
    estimated_start: iso(queue.estimatedStart),
  };
}

/**
 * A build's status. Progress comes from the runner's step counts (null until it reports them); the
 * estimate is start + the median run time of the project's recent successful builds, and for a
 * build that waits to run, its estimated start + that median.
 */
export function toBuildStatus(
  build: BuildEntity,
  medianDurationMs: number | undefined,
  queue?: QueueView,
): BuildStatusDto {
  const total = build.progressTotal;
  const current = build.progressCurrent ?? 0;
  const progress =
    total === null
      ? null
      : {
          current_step: current,
          total_steps: total,
          percentage: total === 0 ? 0 : Math.min(100, Math.round((current / total) * 1000) / 10),
        };
  let estimated: string | null = null;
  if (queue !== undefined) {
    const start = queue.estimatedStart;
    estimated =
      start === null || medianDurationMs === undefined
        ? null
        : new Date(start.getTime() + medianDurationMs).toISOString();
  } else if (
    build.status === 'in_progress' &&
    build.startedAt !== null &&
    medianDurationMs !== undefined
  ) {
    estimated = new Date(build.startedAt.getTime() + medianDurationMs).toISOString();
  } else if (build.completedAt !== null) {
    estimated = build.completedAt.toISOString();
  }
  return {
    build_id: build.id,
    status: build.status,
    progress,
    started_at: iso(build.startedAt),
    estimated_completion: estimated,
    error: build.errorMessage,
    ...(queue === undefined ? {} : { queue: toQueue(queue) }),
  };
}

/** The wizard client reads the created build from `data`; the reference form gets it unwrapped. */
export function toCreateResponse(
  form: 'reference' | 'wizard',
  build: BuildEntity,
): BuildSummaryDto | { data: BuildSummaryDto } {
  return form === 'wizard' ? { data: toBuildSummary(build) } : toBuildSummary(build);
}
