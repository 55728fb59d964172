import type { BuildEntity } from '../lifecycle/build.entity.js';

/**
 * What a runner is given about a build: who it is, and its spec (everything about what to run,
 * captured at create). Runners read nothing else of the record.
 */
export type RunnableBuild = Readonly<
  Pick<BuildEntity, 'id' | 'tenantId' | 'projectId' | 'buildNumber' | 'spec'>
>;

/**
 * The port between the API and whatever runs builds (local child processes, or Kubernetes Jobs
 * through Build resources). Used as the DI token; nothing outside src/runners/ knows which runner
 * is active.
 *
 * Promises: `start` is called once a build has moved to in_progress and returns as soon as the
 * run is under way (it does not wait for the build). From then on the runner reports progress and
 * the final outcome (success, or failed with a FailureReason) to BuildLifecycle, and log lines to
 * the log sink. `cancel` stops a run the API has already marked cancelled; `remove` deletes what
 * the runner keeps for a deleted build. All three are idempotent and safe to repeat.
 */
export abstract class BuildRunner {
  abstract start(build: RunnableBuild): Promise<void>;
  abstract cancel(build: RunnableBuild): Promise<void>;
  abstract remove(build: RunnableBuild): Promise<void>;
}
