import { Injectable, Optional } from '@nestjs/common';
import { ConflictError, NotFoundError } from '../common/errors.js';
import { withoutCredentials } from '../common/url-credentials.js';
import type { PushedImages } from '../manifest/formats.js';
import type { BuildEntity } from './build.entity.js';
import { type BuildEvent, type BuildStatus, canRetry, TRANSITIONS } from './build-state.js';
import { failureClass, type FailureReason } from '../manifest/failure-reasons.js';
import { Metrics } from '../metrics/metrics.js';
import {
  type BuildListQuery,
  type BuildPage,
  BuildsRepository,
  type NewBuild,
  type TransitionChanges,
  type Transitioned,
} from './builds.repository.js';

const BUILD_NOT_FOUND = 'Build not found';
const ERROR_MESSAGE_LIMIT = 4096;

export interface CreatedBuild {
  readonly build: BuildEntity;
  /** True when an Idempotency-Key matched an earlier identical request: nothing was created. */
  readonly replayed: boolean;
}

/**
 * The one writer of build records and states. The API, the runners and the operator all change
 * builds through here; each change is a conditional update, so of two racing writers exactly one
 * wins and the other gets CONFLICT naming the current status. Terminal states never change.
 */
@Injectable()
export class BuildLifecycle {
  /** Without Metrics (medium tests build the lifecycle by hand) nothing is counted. */
  constructor(
    private readonly builds: BuildsRepository,
    @Optional() private readonly metrics?: Metrics,
  ) {}

  /** Creates a queued build with the project's next number. */
  async create(build: NewBuild): Promise<CreatedBuild> {
    if (build.idempotencyKey !== undefined && build.idempotencyKey !== null) {
      const earlier = await this.replay(
        build.tenantId,
        build.idempotencyKey,
        build.requestHash ?? null,
      );
      if (earlier !== undefined) return { build: earlier, replayed: true };
    }
    const outcome = await this.builds.insert(build);
    switch (outcome.kind) {
      case 'created':
        return { build: outcome.build, replayed: false };
      case 'project-missing':
        throw new NotFoundError('Project not found', {
          project_id: 'no such project in this tenant',
        });
      case 'duplicate': {
        const existing = await this.builds.findActiveDuplicate(build.projectId, build.specDigest!);
        throw new ConflictError(
          'A queued or running build of this project already has the same configuration (method, its config, source, output, environment and build args)',
          {
            ...(existing === undefined ? {} : { build_id: existing.id }),
          },
        );
      }
      case 'active-retry': {
        const active = await this.builds.findActiveRetry(build.retryOf!);
        throw new ConflictError('This build already has a queued or running retry', {
          ...(active === undefined ? {} : { build_id: active.id }),
        });
      }
      case 'idempotency-clash': {
        const earlier = await this.replay(
          build.tenantId,
          build.idempotencyKey!,
          build.requestHash ?? null,
        );
        if (earlier !== undefined) return { build: earlier, replayed: true };
        throw new ConflictError('Idempotency-Key was already used');
      }
    }
  }

  private async replay(
    tenantId: string,
    key: string,
    requestHash: string | null,
  ): Promise<BuildEntity | undefined> {
    const earlier = await this.builds.findByIdempotencyKey(tenantId, key);
    if (earlier === undefined) return undefined;
    if (earlier.requestHash !== requestHash) {
      throw new ConflictError('Idempotency-Key was already used with a different request', {
        'Idempotency-Key': 'reused with a different body',
        build_id: earlier.id,
      });
    }
    return earlier;
  }

  async get(tenantId: string, id: string): Promise<BuildEntity> {
    const build = await this.builds.findInTenant(tenantId, id);
    if (build === undefined) throw new NotFoundError(BUILD_NOT_FOUND);
    return build;
  }

  /** A build by id alone, for runners, the operator and log streams (no request tenant). */
  find(id: string): Promise<BuildEntity | undefined> {
    return this.builds.findById(id);
  }

  /** Active builds of a Build resource that was deleted and re-created under its name. */
  activeOfReplacedResource(namespace: string, name: string, uid: string): Promise<BuildEntity[]> {
    return this.builds.findActiveOfReplacedResource(namespace, name, uid);
  }

  list(query: BuildListQuery): Promise<BuildPage> {
    return this.builds.list(query);
  }

  /** queued → in_progress (the API). */
  start(tenantId: string, id: string): Promise<BuildEntity> {
    return this.apply(id, tenantId, 'start', { startedAt: 'now' });
  }

  /**
   * in_progress → queued, for a start the runner refused before anything ran (the API, when the
   * runner's backend is unreachable). The runner reference and start time are cleared.
   */
  unstart(id: string): Promise<BuildEntity> {
    return this.apply(id, undefined, 'unstart', { startedAt: null, runnerRef: null });
  }

  /** in_progress → cancelled (the API); `at` as for succeed. */
  cancel(tenantId: string, id: string, reason: string | null, at?: Date): Promise<BuildEntity> {
    return this.apply(id, tenantId, 'cancel', { completedAt: at ?? 'now', cancelReason: reason });
  }

  /**
   * in_progress → success (a runner). completed_at is `at` when given: the build ended before
   * this write (the operator passes when its Job ended in the cluster, which may be long before
   * it came to write it); the write's time otherwise. `at` is read from another clock: one
   * before started_at is recorded as started_at, so a duration is never negative. `pushed`,
   * when the runner learned what the build pushed, is recorded with the success, in the same
   * write, and so is `provenance`, the outcome of its signed provenance (ProvenanceService).
   */
  succeed(id: string, at?: Date, pushed?: PushedImages, provenance?: string): Promise<BuildEntity> {
    return this.apply(id, undefined, 'succeed', {
      completedAt: at ?? 'now',
      ...(pushed === undefined ? {} : { pushed }),
      ...(provenance === undefined ? {} : { provenance }),
    });
  }

  /**
   * in_progress → failed with a bounded reason (a runner); `at` as for succeed. The message is
   * shown to every reader of the build: a URL in it is kept without credentials. `pushed`: what a
   * build that failed after its push (PolicyViolation) left in the registry, so users can find and
   * remove it.
   */
  fail(
    id: string,
    reason: FailureReason,
    message: string,
    at?: Date,
    pushed?: PushedImages,
  ): Promise<BuildEntity> {
    return this.apply(id, undefined, 'fail', {
      completedAt: at ?? 'now',
      failureReason: reason,
      errorMessage: withoutCredentials(message).slice(0, ERROR_MESSAGE_LIMIT),
      ...(pushed === undefined ? {} : { pushed }),
    });
  }

  /**
   * A new queued build with the failed one's configuration; the original stays failed. A failed
   * build has at most one queued or running retry (a unique index decides concurrent retries).
   */
  async retry(tenantId: string, id: string, createdBy: string | null): Promise<BuildEntity> {
    const original = await this.get(tenantId, id);
    if (!canRetry(original.status)) {
      throw conflict(original.status, 'retry', 'failed');
    }
    const { build } = await this.create({
      tenantId,
      projectId: original.projectId,
      gitBranch: original.gitBranch,
      gitCommit: original.gitCommit,
      gitAuthorName: original.gitAuthorName,
      gitAuthorEmail: original.gitAuthorEmail,
      method: original.method,
      config: original.config,
      spec: original.spec,
      specDigest: original.specDigest,
      retryOf: original.id,
      createdBy,
      trigger:
        original.triggerId === null
          ? null
          : {
              id: original.triggerId,
              event: original.triggerEvent ?? 'push',
              pusher: original.triggeredBy,
            },
    });
    return build;
  }

  /** Deletes a build that is not running; returns what was deleted. */
  async remove(tenantId: string, id: string): Promise<BuildEntity> {
    const build = await this.get(tenantId, id);
    if (build.status === 'in_progress' || !(await this.builds.deleteUnlessRunning(tenantId, id))) {
      const now = await this.builds.findInTenant(tenantId, id);
      if (now === undefined) throw new NotFoundError(BUILD_NOT_FOUND);
      throw new ConflictError('A running build cannot be deleted; cancel it first', {
        status: now.status,
      });
    }
    return build;
  }

  /**
   * Pins a build (`keep`: retention never deletes it) or unpins it, in any status. A pin does not
   * stop DELETE /builds/{id}: it speaks for the policy, not for the people who may delete.
   */
  async setKeep(tenantId: string, id: string, keep: boolean): Promise<BuildEntity> {
    const build = await this.builds.setKeep(tenantId, id, keep);
    if (build === undefined) throw new NotFoundError(BUILD_NOT_FOUND);
    return build;
  }

  /** The runner's step count; ignored once the build is no longer running. */
  reportProgress(id: string, current: number, total: number): Promise<boolean> {
    return this.builds.setProgress(id, Math.max(0, current), Math.max(0, total));
  }

  /** Builds a runner of this kind left running, e.g. when the process that ran them died. */
  runningWithRunner(prefix: string): Promise<string[]> {
    return this.builds.runningWithRunner(prefix);
  }

  setRunnerRef(id: string, runnerRef: string): Promise<void> {
    return this.builds.setRunnerRef(id, runnerRef);
  }

  medianSuccessDurationMs(projectId: string): Promise<number | undefined> {
    return this.builds.medianSuccessDurationMs(projectId);
  }

  private async apply(
    id: string,
    tenantId: string | undefined,
    event: BuildEvent,
    changes: TransitionChanges,
  ): Promise<BuildEntity> {
    const { from, to } = TRANSITIONS[event];
    const updated = await this.builds.transition(id, tenantId, from, to, changes);
    if (updated !== undefined) {
      this.count(event, updated);
      return updated.build;
    }
    const current =
      tenantId === undefined
        ? await this.builds.findById(id)
        : await this.builds.findInTenant(tenantId, id);
    if (current === undefined) throw new NotFoundError(BUILD_NOT_FOUND);
    throw conflict(current.status, event, from);
  }

  /**
   * Counts a transition once it is written (its statement committed). A transition that lost its
   * race, or an outcome reported again, wrote nothing and is not counted.
   */
  private count(event: BuildEvent, { build, runSeconds }: Transitioned): void {
    if (this.metrics === undefined) return;
    const method = build.spec.method;
    const tenant = build.tenantId;
    switch (event) {
      case 'start':
        this.metrics.inc('kiln_builds_started_total', { method, tenant });
        return;
      case 'unstart':
        return;
      case 'succeed':
      case 'fail':
      case 'cancel': {
        const result = build.status;
        const reason = build.status === 'failed' ? build.failureReason : null;
        this.metrics.inc('kiln_builds_finished_total', {
          method,
          result,
          reason: reason ?? 'none',
          class: reason === null ? 'none' : failureClass(reason),
          tenant,
        });
        if (runSeconds !== null) {
          this.metrics.observe(
            'kiln_build_duration_seconds',
            { method, result, tenant },
            Math.max(0, runSeconds),
          );
        }
        return;
      }
    }
  }
}

function conflict(status: BuildStatus, action: string, needs: BuildStatus): ConflictError {
  return new ConflictError(`Build is ${status}; ${action} needs a ${needs} build`, { status });
}
