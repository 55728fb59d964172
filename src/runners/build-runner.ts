import type { BuildEntity } from '../lifecycle/build.entity.js';

/**
 * What a runner is given about a build: who it is, and its spec (everything about what to run,
 * captured at create). Runners read nothing else of the record.
 */
export type RunnableBuild = Readonly<
  Pick<BuildEntity, 'id' | 'tenantId' | 'projectId' | 'buildNumber' | 'spec' | 'cancelReason'>
>;

/**
 * The port between the API and whatever runs builds (local child processes, or Kubernetes Jobs
 * through Build resources). Used as the DI token; nothing outside src/runners/ knows which runner
 * is active.
 *
 * Promises: `create` is called once a build record exists (queued), to prepare what the runner
 * keeps for it; it may throw, and then the record is deleted again. `start` is called once a
 * build has moved to in_progress and returns as soon as the
 * run is under way (it does not wait for the build). From then on the runner reports progress and
 * the final outcome (success, or failed with a FailureReason) to BuildLifecycle, and log lines to
 * the log sink. `cancel` stops a run the API has already marked cancelled; `remove` deletes what
 * the runner keeps for a deleted build. All are idempotent and safe to repeat. A runner whose
 * backend cannot be reached throws UnavailableError from `create` or `start` before anything
 * changed there: the API answers 503 and takes its own change back.
 */
export abstract class BuildRunner {
  /**
   * Whether `start` records the build with admission in this process before it returns (the
   * local runner): then the start's answer can say where the build waits. The operator records a
   * Kubernetes build when it reconciles it, after the answer: no read could find it yet.
   */
  readonly admitsOnStart: boolean = false;

  /** Nothing to prepare by default: the local runner needs only the record. */
  create(_build: RunnableBuild): Promise<void> {
    return Promise.resolve();
  }

  abstract start(build: RunnableBuild): Promise<void>;
  abstract cancel(build: RunnableBuild): Promise<void>;
  abstract remove(build: RunnableBuild): Promise<void>;
}
