import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { LocalPlan } from '../../build-methods/method.js';
import { localPlanOf } from '../../build-methods/methods.js';
import { isDatabaseUnavailable } from '../../common/database-errors.js';
import { LOGGER } from '../../common/logger.js';
import { Admission } from '../../admission/admission.js';
import { KilnConfig } from '../../config/config.js';
import {
  BuildAccess,
  type BuildAccessGrant,
  type BuildAccessRefusal,
} from '../../integrations/build-access.js';
import { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import { LogSink } from '../../logs/log-sink.js';
import { pushTargets } from '../../manifest/build-spec.js';
import { BuildRunner, type RunnableBuild } from '../build-runner.js';
import { BuildFailure, timedOut } from './build-failure.js';
import { toolOf } from './build-plan.js';
import { BuildRun, type BuildRunParts, OUTPUT_LIMIT_FACTOR } from './build-run.js';
import { checkOut } from './checkout.js';
import {
  buildImageName,
  DockerfileExecutor,
  HOST_PLATFORM,
} from './executors/dockerfile.executor.js';
import { CANCELLED, type Pushed } from './executors/executor.js';
import { PackExecutor } from './executors/pack.executor.js';
import { PackerExecutor } from './executors/packer.executor.js';
import { StepsExecutor } from './executors/steps.executor.js';
import { buildahStorageArgs, LayerCaches } from './layer-caches.js';
import { Processes } from './processes.js';
import { type ProvenanceOutcome, ProvenanceService } from '../../provenance/provenance.service.js';

const RUNNER_PREFIX = 'local:';
/** How long the outcome of a build is retried while the database is unreachable. */
const OUTCOME_RETRY_MS = 60_000;
const OUTCOME_RETRY_MAX_WAIT_MS = 5_000;
const DATABASE_LOST = 'kiln lost its database while this build ran; retry it';
const RESTARTED = 'kiln restarted while this build ran; retry it';

/** How a build's wait for admission ended. */
type WaitEnd = 'admitted' | 'ended' | 'cancelled';

/** The executor of each kind of local plan. */
export interface PlanExecutors {
  readonly dockerfile: DockerfileExecutor;
  readonly pack: PackExecutor;
  readonly packer: PackerExecutor;
}

/**
 * Runs builds on this machine as child processes (docs/adr/0008-local-runner.md): buildah for
 * Dockerfile methods, `pack` and `packer` when installed, then the SBOM and scan CLIs
 * (docs/adr/0019-build-steps-and-artifacts.md). This class coordinates: admission (a build runs once
 * admitted: docs/adr/0042-admission-in-postgres.md), cancel
 * and the timeout, the outcome (retried while the database is away) and the recovery of builds a
 * previous kiln process left. Each kind of plan has its executor, the steps theirs, and every
 * child starts through the Processes port. Each build gets its own directory under
 * KILN_DATA_DIR/builds; output goes through LogSink.
 */
@Injectable()
export class LocalRunner
  extends BuildRunner
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  /** `start` enqueues the build before it returns. */
  override readonly admitsOnStart = true;
  private readonly runs = new Map<string, BuildRun>();
  /** Builds of this process waiting to be admitted, and what ends each wait. */
  private readonly waits = new Map<string, (end: WaitEnd) => void>();
  private looking = false;
  private lookAgain = false;
  private unwatch: (() => void) | undefined;
  private readonly parts: BuildRunParts;
  private readonly executors: PlanExecutors;

  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly config: KilnConfig,
    private readonly buildAccess: BuildAccess,
    private readonly processes: Processes,
    private readonly steps: StepsExecutor,
    private readonly admission: Admission,
    private readonly provenance: ProvenanceService,
    private readonly caches: LayerCaches,
    dockerfile: DockerfileExecutor,
    pack: PackExecutor,
    packer: PackerExecutor,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.executors = { dockerfile, pack, packer };
    this.parts = {
      processes,
      sink,
      logger,
      maxOutputBytes: OUTPUT_LIMIT_FACTOR * config.logMaxBytesPerBuild,
    };
  }

  /**
   * Builds a previous kiln process left running cannot finish: their processes, which outlive a
   * kiln that was killed, are stopped as a cancel stops them, their working containers removed,
   * and the builds failed rather than left to hang.
   */
  async onApplicationBootstrap(): Promise<void> {
    // Another process may admit this one's builds (a slot it freed): each pass, look.
    this.unwatch = this.admission.watch(() => this.lookAtWaits());
    await this.stopLeftovers();
    for (const id of await this.lifecycle.runningWithRunner(RUNNER_PREFIX)) {
      if (this.runs.has(id)) continue;
      if (await exists(this.buildDir(id))) await this.cleanUp(id);
      await this.sweepCacheOf(id);
      await this.lifecycle.fail(id, 'InternalError', RESTARTED).catch(() => undefined);
      this.logger.warn({ build_id: id }, 'failed a build left running by a previous kiln process');
    }
    // The bound may have shrunk since the last run (0: no cache at all).
    this.caches.evictLater();
  }

  async start(build: RunnableBuild): Promise<void> {
    await this.lifecycle.setRunnerRef(build.id, `${RUNNER_PREFIX}${process.pid}`);
    // In the queue before the start answers, so that its answer says where the build stands.
    await this.admission.enqueue(build.id);
    const run = new BuildRun(build, this.buildDir(build.id), this.parts);
    this.runs.set(build.id, run);
    run.finished = this.execute(run)
      .catch((error: unknown) =>
        this.logger.error({ err: error, build_id: build.id }, 'local build crashed'),
      )
      .finally(() => this.runs.delete(build.id));
  }

  async cancel(build: RunnableBuild): Promise<void> {
    const run = this.runs.get(build.id);
    if (run === undefined) return;
    run.cancelled = true;
    this.waits.get(build.id)?.('cancelled');
    await run.stop(this.config.cancelGraceMs);
    await run.finished; // clean-up done: no process or working container left
  }

  /**
   * The build's image leaves its project's layer cache (buildah also removes the untagged parent
   * images no other image needs), and its directory goes (a store of its own, for builds that used
   * none).
   */
  async remove(build: RunnableBuild): Promise<void> {
    await this.cancel(build);
    const cache = await this.caches.existing(build.tenantId, build.projectId);
    if (cache !== undefined) {
      try {
        await this.processes.run('buildah', [...cache.storage, 'rmi', buildImageName(build.id)], {
          tool: 'buildah',
        });
      } finally {
        await this.caches.release(cache);
      }
    }
    await rm(this.buildDir(build.id), { recursive: true, force: true });
  }

  async onApplicationShutdown(): Promise<void> {
    this.unwatch?.();
    for (const run of this.runs.values()) {
      run.cancelled = true;
      this.waits.get(run.build.id)?.('cancelled');
      await run.stop(this.config.cancelGraceMs);
    }
    await this.caches.settled();
  }

  /**
   * The process groups of any build (running or ended) that a kiln process no longer running
   * recorded, stopped with the cancel grace (docs/adr/0033-local-child-processes.md).
   */
  private async stopLeftovers(): Promise<void> {
    const root = join(this.config.dataDir, 'builds');
    const ids = await readdir(root).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    const dirs = ids.map((id) => join(root, id));
    const stopped = await this.processes.stopOrphans(dirs, this.config.cancelGraceMs);
    for (const [dir, groups] of stopped) {
      this.logger.warn(
        { build_id: basename(dir), groups },
        'stopped the processes of a build that a previous kiln process left running',
      );
    }
  }

  private async execute(run: BuildRun): Promise<void> {
    const { build } = run;
    let failure: BuildFailure | undefined;
    let wait: WaitEnd = 'cancelled';
    // Every child exited on its own and the build succeeded: it left no working container.
    let clean = false;
    try {
      wait = await this.admitted(run);
      if (wait === 'admitted' && !run.cancelled) {
        await this.runBuild(run);
        clean = !run.stopped && !run.cancelled && !run.timedOut;
      }
    } catch (error) {
      failure = run.timedOut
        ? timedOut(build.spec.timeoutSeconds)
        : this.failureOf(build.id, error);
    } finally {
      await this.cleanUp(build.id, run, clean);
      // The slot goes to the next build once nothing of this one runs any more.
      await this.admission
        .release(build.id)
        .catch((error: unknown) =>
          this.logger.warn({ err: error, build_id: build.id }, 'could not release a build slot'),
        );
    }
    if (run.cancelled) {
      await this.sink.release(build.id).catch(() => undefined);
      await run.say('cancelled; the build was stopped').catch(() => undefined);
      return;
    }
    if (wait === 'ended' && failure === undefined) {
      // Ended while it waited (QueueTimeout): admission recorded why.
      await this.sink.release(build.id).catch(() => undefined);
      return;
    }
    await this.record(run, failure);
  }

  /**
   * Waits until admission lets the build run (docs/adr/0042-admission-in-postgres.md): 'admitted',
   * 'ended' when its wait ended without a run (QueueTimeout), 'cancelled' when it was cancelled.
   * The build's timeout starts after this.
   */
  private async admitted(run: BuildRun): Promise<WaitEnd> {
    const { id } = run.build;
    if (run.cancelled) return 'cancelled';
    const end = new Promise<WaitEnd>((resolve) => this.waits.set(id, resolve));
    this.lookAtWaits();
    try {
      return await end;
    } finally {
      this.waits.delete(id);
    }
  }

  /**
   * After a pass of any process: one read of where this process's waiting builds stand, and each
   * admitted (or ended) one goes on. Reads run one at a time; one asked for meanwhile follows.
   */
  private lookAtWaits(): void {
    if (this.looking) {
      this.lookAgain = true;
      return;
    }
    this.looking = true;
    void (async () => {
      try {
        do {
          this.lookAgain = false;
          const ids = [...this.waits.keys()];
          if (ids.length === 0) break;
          const outcomes = await this.admission.outcomes(ids);
          for (const id of ids) {
            const outcome = outcomes.get(id);
            if (outcome === 'waiting') continue;
            this.waits.get(id)?.(outcome === 'admitted' ? 'admitted' : 'ended');
          }
        } while (this.lookAgain);
      } catch (error) {
        // The next pass (at most KILN_ADMISSION_POLL_MS away) looks again.
        this.logger.warn({ err: error }, 'could not read whether waiting builds were admitted');
      } finally {
        this.looking = false;
      }
    })();
  }

  /** The build in its slot, under its timeout: access, plan, steps, then the scan policy. */
  private async runBuild(run: BuildRun): Promise<void> {
    const { build } = run;
    await run.say(`running on ${HOST_PLATFORM} with the local runner`);
    // References resolved, registry checked, every value masked: before the first child runs.
    const access = await this.prepareAccess(run);
    if (!access.ok) throw new BuildFailure(access.reason, access.message);
    run.access = access;
    for (const note of access.notes) await run.say(note);
    const { timeoutSeconds } = build.spec;
    const timer = setTimeout(() => {
      run.timedOut = true;
      void run.stop(this.config.cancelGraceMs);
    }, timeoutSeconds * 1000);
    try {
      const pushed = await this.runPlan(run, localPlanOf(build.spec));
      if ('images' in pushed) run.images = pushed.images;
      if ('packer' in pushed) run.packer = pushed.packer;
      if (!run.stopped) await this.steps.run(run, pushed);
    } finally {
      clearTimeout(timer);
    }
    if (run.timedOut) throw timedOut(timeoutSeconds);
    if (!run.cancelled) await this.steps.enforceScanPolicy(run);
  }

  /**
   * The outcome, masked, in the log and the record. Postgres may be away just as the build ends:
   * keep trying, or the build stays in_progress.
   */
  private async record(run: BuildRun, failure: BuildFailure | undefined): Promise<void> {
    const { id } = run.build;
    const { images } = run;
    const deadline = Date.now() + OUTCOME_RETRY_MS;
    if (failure !== undefined) {
      const { message } = failure;
      await this.whileDatabaseDown(id, deadline, () => run.say(message, 'ERROR'));
    }
    await this.sink.release(id).catch(() => undefined);
    if (failure === undefined) {
      await this.recordSuccess(run, deadline);
      return;
    }
    // A build that failed after its push (PolicyViolation, a step) left its image in the
    // registry: recorded either way, so users can find and remove it.
    await this.whileDatabaseDown(id, deadline, () =>
      this.lifecycle.fail(id, failure.reason, failure.message, undefined, images),
    );
  }

  /**
   * Signs, stores and attaches the build's provenance before its success is written: a tenant that
   * requires provenance gets no successful build without it (ProvenanceFailed). Its `[kiln]`
   * lines come after the lines the log digest covers, and are released with the build.
   */
  private async recordSuccess(run: BuildRun, deadline: number): Promise<void> {
    const { id } = run.build;
    const { images } = run;
    const finishedAt = new Date();
    const produced = await this.whileDatabaseDown(id, deadline, async () => {
      const build = await this.lifecycle.find(id);
      if (build === undefined) return { state: 'failed: the build record is gone' };
      return this.provenance.produce({
        build,
        finishedAt,
        ...(images === undefined ? {} : { pushed: images }),
        // What a packer build made (its manifest's artifacts).
        ...(run.packer === undefined ? {} : { packer: run.packer }),
        runner: 'local',
        namespace: null,
        images: [],
        insecureRegistries: this.config.localInsecureRegistries,
      });
    });
    const provenance: ProvenanceOutcome = produced ?? {
      state: 'failed: the database was unavailable',
    };
    await this.sink.release(id).catch(() => undefined);
    await this.whileDatabaseDown(id, deadline, () =>
      provenance.fails === undefined
        ? this.lifecycle.succeed(id, finishedAt, images, provenance.state)
        : this.lifecycle.fail(id, 'ProvenanceFailed', provenance.fails, finishedAt, images),
    );
  }

  /**
   * Makes the build's directory, checks its source out and runs its plan's executor; returns
   * once the commit checked out is in the log too.
   */
  private async runPlan(run: BuildRun, plan: LocalPlan): Promise<Pushed> {
    const { build } = run;
    const tool = toolOf(plan);
    const { method } = build.spec;
    if (tool !== undefined && !(await run.onPath(tool, { tool }))) {
      throw new BuildFailure(
        'InvalidSpec',
        `${method} builds need the \`${tool}\` CLI, which is not installed on this machine; install it or use the Kubernetes runner, which supports ${method}`,
      );
    }
    await rm(run.dir, { recursive: true, force: true });
    await mkdir(run.source, { recursive: true });
    const { repository } = build.spec.source;
    if (plan.kind === 'dockerfile' && plan.dockerfile === undefined && repository === null) {
      throw new BuildFailure('InvalidSpec', 'the project has no git repository to build from');
    }
    const checkedOut = repository === null ? undefined : await checkOut(run, repository);
    // The commit is read once the plan's first child runs; the outcome and its provenance wait
    // for it.
    let pushed: Pushed;
    try {
      pushed = run.cancelled ? CANCELLED : await this.runExecutor(run, plan);
    } catch (error) {
      await checkedOut?.commitPrinted().catch(() => undefined);
      throw error;
    }
    await checkedOut?.commitPrinted();
    return pushed;
  }

  private async runExecutor(run: BuildRun, plan: LocalPlan): Promise<Pushed> {
    const { build } = run;
    const workspace = {
      source: run.source,
      targets: pushTargets(build.spec.output, build.buildNumber),
    };
    switch (plan.kind) {
      case 'dockerfile':
        return this.executors.dockerfile.run(run, plan, workspace);
      case 'pack':
        return this.executors.pack.run(run, plan, workspace);
      case 'packer':
        return this.executors.packer.run(run, plan, workspace);
    }
  }

  /**
   * What the tenant is told, masked like the log (a tail line may hold a secret a step echoed).
   * Unexpected errors are logged under a trace id and never shown: their messages name
   * addresses, paths and queries.
   */
  private failureOf(buildId: string, error: unknown): BuildFailure {
    let failure: BuildFailure;
    if (error instanceof BuildFailure) {
      failure = error;
    } else if (isDatabaseUnavailable(error)) {
      this.logger.warn({ err: error, build_id: buildId }, 'local build lost the database');
      failure = new BuildFailure('InternalError', DATABASE_LOST);
    } else {
      const traceId = randomUUID();
      this.logger.error(
        { err: error, build_id: buildId, trace_id: traceId },
        'local build failed unexpectedly',
      );
      failure = new BuildFailure(
        'InternalError',
        `the local runner failed unexpectedly; kiln's log has the details (trace ${traceId})`,
      );
    }
    return new BuildFailure(failure.reason, this.sink.maskText(buildId, failure.message));
  }

  /**
   * BuildAccess reads the tenant's settings from the database: while it is briefly away (as a
   * build starts), wait for it with backoff, as the build's log lines wait; within the build's
   * timeout, and not past a cancel.
   */
  private async prepareAccess(run: BuildRun): Promise<BuildAccessGrant | BuildAccessRefusal> {
    const { build } = run;
    const deadline = Date.now() + build.spec.timeoutSeconds * 1000;
    for (let wait = 250; ; wait = Math.min(wait * 2, OUTCOME_RETRY_MAX_WAIT_MS)) {
      try {
        return await this.buildAccess.prepare(build, this.sink.masking(build.id));
      } catch (error) {
        if (!isDatabaseUnavailable(error) || run.cancelled || Date.now() + wait > deadline) {
          throw error;
        }
        await delay(wait);
      }
    }
  }

  /** Runs `write`, again with backoff while the database is unreachable, until `deadline`. */
  private async whileDatabaseDown<T>(
    buildId: string,
    deadline: number,
    write: () => Promise<T>,
  ): Promise<T | undefined> {
    for (let wait = 250; ; wait = Math.min(wait * 2, OUTCOME_RETRY_MAX_WAIT_MS)) {
      try {
        return await write();
      } catch (error) {
        const unavailable = isDatabaseUnavailable(error);
        if (!unavailable || Date.now() + wait > deadline) {
          this.logger.error(
            { err: error, build_id: buildId },
            unavailable
              ? 'could not record the end of a local build: the database stayed unreachable'
              : 'could not record the end of a local build',
          );
          return undefined;
        }
        await delay(wait);
      }
    }
  }

  /** The working containers a build of a previous kiln process left in its project's cache. */
  private async sweepCacheOf(buildId: string): Promise<void> {
    const build = await this.lifecycle.find(buildId).catch(() => undefined);
    if (build === undefined) return;
    const cache = await this.caches.existing(build.tenantId, build.projectId);
    if (cache === undefined) return;
    await this.caches.release(cache, (storage) =>
      this.processes.run('buildah', [...storage, 'rm', '--all'], { tool: 'buildah' }),
    );
  }

  private buildDir(buildId: string): string {
    return join(this.config.dataDir, 'builds', buildId);
  }

  /**
   * Removes working containers and the checkout; keeps the image (in the project's layer cache, or
   * the build's own storage) until delete. The cache is let go: its leftover working containers
   * (a stopped bud's) are swept when no other build of this process holds it, and caches past
   * KILN_LOCAL_CACHE_MAX_BYTES are evicted.
   */
  private async cleanUp(buildId: string, run?: BuildRun, clean = false): Promise<void> {
    const dir = this.buildDir(buildId);
    if (await exists(join(dir, 'storage'))) {
      await this.processes.run('buildah', [...buildahStorageArgs(dir), 'rm', '--all'], {
        tool: 'buildah',
      });
    }
    const cache = run?.cache;
    if (run !== undefined && cache !== undefined) {
      run.cache = undefined;
      await this.caches.release(
        cache,
        (storage) =>
          this.processes.run('buildah', [...storage, 'rm', '--all'], { tool: 'buildah' }),
        !clean,
      );
    }
    try {
      await rm(join(dir, 'source'), { recursive: true, force: true });
      await rm(join(dir, 'run'), { recursive: true, force: true });
      await rm(join(dir, 'steps'), { recursive: true, force: true });
      await rm(join(dir, 'image.digest'), { force: true });
    } catch (error) {
      this.logger.warn({ err: error, build_id: buildId }, 'could not clean up a local build');
    }
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
