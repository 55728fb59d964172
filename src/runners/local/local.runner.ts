import { IMAGE_PLACEHOLDER } from '../../manifest/tool-commands.js';
import { GIT_CREDENTIAL_HELPER } from '../../build-methods/job.js';
import {
  BuildAccess,
  type BuildAccessGrant,
  type BuildAccessRefusal,
  type S3ImageTarget,
} from '../../integrations/build-access.js';
import { OciLayoutError, ociLayoutDigest } from '../../registries/oci-layout.js';
import { RegistryUnauthorizedError, RegistryUnavailableError } from '../../registries/registry.js';
import { S3ImageStore, s3ImageKey } from '../../registries/s3-upload.js';
import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { arch } from 'node:os';
import { basename, join, resolve, sep } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { ArtifactKind } from '../../artifacts/artifacts.repository.js';
import {
  BuildArtifacts,
  type ReceivedBody,
  scanPolicyOf,
} from '../../artifacts/build-artifacts.js';
import { pushTargets } from '../../manifest/build-spec.js';
import type { LocalPlan } from '../../build-methods/method.js';
import { localPlanOf } from '../../build-methods/methods.js';
import { sbomTool, scanTool, type StepSettings, type StepTool } from '../../build-methods/steps.js';
import { isDatabaseUnavailable } from '../../common/database-errors.js';
import { KilnError } from '../../common/errors.js';
import { withoutCredentials } from '../../common/url-credentials.js';
import { LOGGER } from '../../common/logger.js';
import { KilnConfig } from '../../config/config.js';
import { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import type { FailureReason } from '../../manifest/failure-reasons.js';
import type { BuilderFormat } from '../../manifest/formats.js';
import { LogSink } from '../../logs/log-sink.js';
import { pushedImages, referenceOf } from '../../steps/pushed-image.js';
import { type PushedImages } from '../../manifest/formats.js';
import { BuildRunner, type RunnableBuild } from '../build-runner.js';
import { packArgs, packerArgs, toolOf } from './build-plan.js';
import { type ChildTool, childEnvironment } from './child-env.js';
import { type ChildExit, ChildRun } from './child-process.js';
import { ProcessGroups } from './process-groups.js';
import { Slots } from './slots.js';

const execFileAsync = promisify(execFile);
const RUNNER_PREFIX = 'local:';
const HOST_PLATFORM = `linux/${arch() === 'x64' ? 'amd64' : arch()}`;
/** A child's output is spooled on disk up to this many times the log cap, then it is stopped. */
const OUTPUT_LIMIT_FACTOR = 4;
/** How long the outcome of a build is retried while the database is unreachable. */
const OUTCOME_RETRY_MS = 60_000;
const OUTCOME_RETRY_MAX_WAIT_MS = 5_000;
const DATABASE_LOST = 'kiln lost its database while this build ran; retry it';
const NOTHING_PUSHED = 'this build pushed none (no registry is configured)';
const RESTARTED = 'kiln restarted while this build ran; retry it';

/** A build that failed for a reason the runner can name. */
class BuildFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

/**
 * What a plan pushed: the image by digest (`name@sha256:…`) for the SBOM and scan steps, with
 * every reference pushed (recorded with the build's success); or why there is none.
 */
type Pushed =
  | { readonly reference: string; readonly images: PushedImages }
  | { readonly none: string; readonly images?: PushedImages };

interface ActiveRun {
  cancelled: boolean;
  /** What the build's references resolved to, and the tenant's registry credentials (BuildAccess). */
  access?: BuildAccessGrant;
  /** Set when the build outlived its spec's timeout: the current child is stopped. */
  timedOut: boolean;
  child: ChildRun | undefined;
  finished: Promise<void>;
}

/**
 * Runs builds on this machine as child processes: buildah for Dockerfile methods (kaniko, buildx,
 * container, and reference-form builds of a repository's Dockerfile), `pack` and `packer` when
 * installed. Each build gets its own work directory and buildah storage under KILN_DATA_DIR/builds;
 * output goes through LogSink; the exit status decides the outcome. After an image pushed by
 * buildah, the build's SBOM and scan tools run against its digest when their CLIs are installed,
 * their documents go to BuildArtifacts, and the scan policy gate decides as it does for the
 * operator. See docs/adr/0008-local-runner.md and docs/adr/0019-build-steps-and-artifacts.md.
 */
@Injectable()
export class LocalRunner
  extends BuildRunner
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly runs = new Map<string, ActiveRun>();
  private readonly slots: Slots;
  private readonly stepSettings: StepSettings;
  private readonly groups = new ProcessGroups();

  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly artifacts: BuildArtifacts,
    private readonly config: KilnConfig,
    private readonly buildAccess: BuildAccess,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.slots = new Slots(config.localMaxParallel);
    this.stepSettings = localStepSettings(config);
  }

  /**
   * Builds a previous kiln process left running cannot finish: their processes, which outlive a
   * kiln that was killed, are stopped as a cancel stops them, their working containers removed,
   * and the builds failed rather than left to hang.
   */
  async onApplicationBootstrap(): Promise<void> {
    if (this.config.runner !== 'local') return;
    await this.stopLeftovers();
    for (const id of await this.lifecycle.runningWithRunner(RUNNER_PREFIX)) {
      if (this.runs.has(id)) continue;
      if (await exists(this.buildDir(id))) await this.cleanUp(id);
      await this.lifecycle.fail(id, 'InternalError', RESTARTED).catch(() => undefined);
      this.logger.warn({ build_id: id }, 'failed a build left running by a previous kiln process');
    }
  }

  async start(build: RunnableBuild): Promise<void> {
    await this.lifecycle.setRunnerRef(build.id, `${RUNNER_PREFIX}${process.pid}`);
    const run: ActiveRun = {
      cancelled: false,
      timedOut: false,
      child: undefined,
      finished: Promise.resolve(),
    };
    this.runs.set(build.id, run);
    run.finished = this.execute(build, run)
      .catch((error: unknown) =>
        this.logger.error({ err: error, build_id: build.id }, 'local build crashed'),
      )
      .finally(() => this.runs.delete(build.id));
  }

  async cancel(build: RunnableBuild): Promise<void> {
    const run = this.runs.get(build.id);
    if (run === undefined) return;
    run.cancelled = true;
    await run.child?.stop(this.config.cancelGraceMs);
    await run.finished; // clean-up done: no process or working container left
  }

  async remove(build: RunnableBuild): Promise<void> {
    await this.cancel(build);
    await rm(this.buildDir(build.id), { recursive: true, force: true });
  }

  async onApplicationShutdown(): Promise<void> {
    for (const run of this.runs.values()) {
      run.cancelled = true;
      await run.child?.stop(this.config.cancelGraceMs);
    }
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
    const stopped = await this.groups.stopOrphans(dirs, this.config.cancelGraceMs);
    for (const [dir, groups] of stopped) {
      this.logger.warn(
        { build_id: basename(dir), groups },
        'stopped the processes of a build that a previous kiln process left running',
      );
    }
  }

  private async execute(build: RunnableBuild, run: ActiveRun): Promise<void> {
    let failure: BuildFailure | undefined;
    /** What the build pushed, recorded with its outcome. */
    let recorded: PushedImages | undefined;
    let acquired = false;
    try {
      if (!this.slots.free) {
        await this.lifecycle.reportProgress(build.id, 0, 0);
        await this.say(
          build.id,
          `waiting for a free local build slot (${this.slots.inUse} builds running)`,
        );
      }
      await this.slots.acquire();
      acquired = true;
      if (!run.cancelled) {
        await this.say(build.id, `running on ${HOST_PLATFORM} with the local runner`);
        // References resolved, registry checked, every value masked: before the first child runs.
        const access = await this.prepareAccess(build, run);
        if (!access.ok) throw new BuildFailure(access.reason, access.message);
        run.access = access;
        for (const note of access.notes) await this.say(build.id, note);
        const { timeoutSeconds } = build.spec;
        const timer = setTimeout(() => {
          run.timedOut = true;
          void run.child?.stop(this.config.cancelGraceMs);
        }, timeoutSeconds * 1000);
        try {
          const pushed = await this.runPlan(build, localPlanOf(build.spec), run);
          if ('images' in pushed) recorded = pushed.images;
          if (!run.cancelled && !run.timedOut) await this.runSteps(build, run, pushed);
        } finally {
          clearTimeout(timer);
        }
        if (run.timedOut) throw timedOut(timeoutSeconds);
        if (!run.cancelled) await this.enforceScanPolicy(build);
      }
    } catch (error) {
      failure = run.timedOut
        ? timedOut(build.spec.timeoutSeconds)
        : this.failureOf(build.id, error);
    } finally {
      if (acquired) this.slots.release();
      await this.cleanUp(build.id);
    }
    if (run.cancelled) {
      await this.sink.release(build.id).catch(() => undefined);
      await this.say(build.id, 'cancelled; the build was stopped').catch(() => undefined);
      return;
    }
    // Postgres may be away just as the build ends: keep trying, or the build stays in_progress.
    const deadline = Date.now() + OUTCOME_RETRY_MS;
    if (failure !== undefined) {
      const { message } = failure;
      await this.whileDatabaseDown(build.id, deadline, () => this.say(build.id, message, 'ERROR'));
    }
    await this.sink.release(build.id).catch(() => undefined);
    // A build that failed after its push (PolicyViolation, a step) left its image in the
    // registry: recorded either way, so users can find and remove it.
    await this.whileDatabaseDown(build.id, deadline, () =>
      failure === undefined
        ? this.lifecycle.succeed(build.id, undefined, recorded)
        : this.lifecycle.fail(build.id, failure.reason, failure.message, undefined, recorded),
    );
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
  private async prepareAccess(
    build: RunnableBuild,
    run: ActiveRun,
  ): Promise<BuildAccessGrant | BuildAccessRefusal> {
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
  private async whileDatabaseDown(
    buildId: string,
    deadline: number,
    write: () => Promise<unknown>,
  ): Promise<void> {
    for (let wait = 250; ; wait = Math.min(wait * 2, OUTCOME_RETRY_MAX_WAIT_MS)) {
      try {
        await write();
        return;
      } catch (error) {
        const unavailable = isDatabaseUnavailable(error);
        if (!unavailable || Date.now() + wait > deadline) {
          this.logger.error(
            { err: error, build_id: buildId },
            unavailable
              ? 'could not record the end of a local build: the database stayed unreachable'
              : 'could not record the end of a local build',
          );
          return;
        }
        await delay(wait);
      }
    }
  }

  private async runPlan(build: RunnableBuild, plan: LocalPlan, run: ActiveRun): Promise<Pushed> {
    const tool = toolOf(plan);
    const { method } = build.spec;
    if (
      tool !== undefined &&
      !(await onPath(tool, childEnvironment(this.config.childEnvironment, tool)))
    ) {
      throw new BuildFailure(
        'InvalidSpec',
        `${method} builds need the \`${tool}\` CLI, which is not installed on this machine; install it or use the Kubernetes runner, which supports ${method}`,
      );
    }
    const dir = this.buildDir(build.id);
    const source = join(dir, 'source');
    await rm(dir, { recursive: true, force: true });
    await mkdir(source, { recursive: true });
    const { repository } = build.spec.source;
    if (plan.kind === 'dockerfile' && plan.dockerfile === undefined && repository === null) {
      throw new BuildFailure('InvalidSpec', 'the project has no git repository to build from');
    }
    if (repository !== null) await this.checkout(build, repository, source, run);
    if (run.cancelled) return { none: 'the build was cancelled' };
    const targets = pushTargets(build.spec.output, build.buildNumber);

    switch (plan.kind) {
      case 'dockerfile':
        return this.runDockerfile(build, plan, run, dir, source, targets);
      case 'pack':
        return this.runPack(build, plan, run, source, targets);
      case 'packer':
        return this.runPacker(build, plan, run, source);
    }
  }

  private async runPack(
    build: RunnableBuild,
    plan: Extract<LocalPlan, { kind: 'pack' }>,
    run: ActiveRun,
    source: string,
    targets: string[],
  ): Promise<Pushed> {
    if (plan.builder !== plan.requestedBuilder) {
      await this.say(
        build.id,
        `builder ${plan.requestedBuilder} is deprecated; using ${plan.builder}`,
      );
    }
    const path = this.inside(source, build.spec.source.context);
    // Without a registry, pack leaves the image with the container engine it talks to.
    const [image = `kiln/${build.id}:build`, ...more] = targets;
    const result = await this.runChild(
      build.id,
      run,
      'pack',
      packArgs(plan, image, path, targets.length > 0),
      'pack',
      source,
      'pack',
      plan.env,
    );
    if (result.code !== 0 && !run.cancelled)
      throw new BuildFailure('BuildFailed', failureMessage(result.tail, result.code));
    if (targets.length === 0 || run.cancelled) return { none: NOTHING_PUSHED };
    await this.say(build.id, `pushed ${image}`);
    for (const tag of more)
      await this.say(build.id, `${tag} was not pushed: pack publishes one name per build`);
    return { none: 'kiln does not learn the digest of the image pack publishes' };
  }

  private async runPacker(
    build: RunnableBuild,
    plan: Extract<LocalPlan, { kind: 'packer' }>,
    run: ActiveRun,
    source: string,
  ): Promise<Pushed> {
    await writeFile(join(source, plan.templateFile), plan.template);
    // `packer init` installs an HCL2 template's plugins; JSON templates have none to install.
    const commands: Array<'init' | 'validate' | 'build'> =
      plan.templateFile === 'template.pkr.hcl'
        ? ['init', 'validate', 'build']
        : ['validate', 'build'];
    for (const command of commands) {
      const result = await this.runChild(
        build.id,
        run,
        'packer',
        packerArgs(command, plan),
        'packer',
        source,
        'packer',
        // References in environment resolved at start (packer is the one method that takes them).
        { ...plan.env, ...run.access?.env },
      );
      if (run.cancelled) break;
      if (result.code !== 0) {
        throw new BuildFailure(
          command === 'build' ? 'BuildFailed' : 'InvalidSpec',
          `packer ${command} failed: ${failureMessage(result.tail, result.code)}`,
        );
      }
    }
    return { none: 'a packer build pushes no image kiln knows of' };
  }

  /** A path inside the checkout, refusing `..` escapes. */
  private inside(source: string, relative: string): string {
    const path = resolve(source, relative);
    if (path !== source && !path.startsWith(source + sep)) {
      throw new BuildFailure('InvalidSpec', `build context ${relative} is outside the source`);
    }
    return path;
  }

  private async runDockerfile(
    build: RunnableBuild,
    plan: Extract<LocalPlan, { kind: 'dockerfile' }>,
    run: ActiveRun,
    dir: string,
    source: string,
    targets: string[],
  ): Promise<Pushed> {
    const foreign = plan.platforms.filter((platform) => platform !== HOST_PLATFORM);
    if (foreign.length > 0) {
      throw new BuildFailure(
        'InvalidSpec',
        `the local runner builds for ${HOST_PLATFORM} only; ${foreign.join(', ')} need the Kubernetes runner`,
      );
    }
    if (plan.dockerfile !== undefined)
      await writeFile(join(source, '.kiln.Dockerfile'), plan.dockerfile);

    const context = this.inside(source, build.spec.source.context);
    const image = `localhost/kiln/${build.id}:build`;
    const buildah = this.buildahArgs(dir);
    const secretArgs = await this.secretFiles(build, dir, run.access);
    const authFile = await this.registryAuthFile(dir, run.access);
    const bud = [
      ...buildah,
      'bud',
      '--isolation',
      'chroot',
      '--file',
      plan.dockerfile !== undefined
        ? join(source, '.kiln.Dockerfile')
        : join(source, plan.dockerfilePath),
      '--tag',
      image,
      ...Object.entries(plan.buildArgs).flatMap(([name, value]) => [
        '--build-arg',
        `${name}=${value}`,
      ]),
      ...(plan.target === undefined ? [] : ['--target', plan.target]),
      ...secretArgs,
      ...this.tlsArgs(),
      context,
    ];
    const built = await this.runChild(build.id, run, 'buildah', bud, 'build', source);
    if (run.cancelled) return { none: 'the build was cancelled' };
    if (built.code !== 0)
      throw new BuildFailure('BuildFailed', failureMessage(built.tail, built.code));

    if (run.access?.s3 !== undefined) {
      return this.storeInS3(build, run, dir, image, run.access.s3);
    }
    if (targets.length === 0) {
      await this.say(
        build.id,
        `built ${image}; no registry configured, so the image stays on this machine`,
      );
      return { none: NOTHING_PUSHED };
    }
    // The steps run against the first target by digest (a tag may move): buildah says which.
    const digestFile = join(dir, 'image.digest');
    await rm(digestFile, { force: true });
    for (const [index, target] of targets.entries()) {
      const registry = target.slice(0, target.indexOf('/'));
      const pushed = await this.runChild(
        build.id,
        run,
        'buildah',
        [
          ...buildah,
          'push',
          ...(this.config.localInsecureRegistries.includes(registry) ? ['--tls-verify=false'] : []),
          ...(authFile === undefined ? [] : ['--authfile', authFile]),
          ...(index === 0 ? ['--digestfile', digestFile] : []),
          image,
          `docker://${target}`,
        ],
        'push',
        dir,
      );
      if (run.cancelled) return { none: 'the build was cancelled' };
      if (pushed.code !== 0) {
        throw new BuildFailure(
          'BuildFailed',
          `pushing ${target} failed: ${failureMessage(pushed.tail, pushed.code)}`,
        );
      }
      await this.say(build.id, `pushed ${target}`);
    }
    const digest = await readFile(digestFile, 'utf8').catch(() => '');
    // Every target is the same image: buildah's digest of the first is each one's.
    const images = pushedImages(
      'image-ref',
      targets.map((target) => `${target}@${digest.trim()}`).join('\n'),
    );
    return 'problem' in images
      ? { none: 'buildah did not say which digest it pushed' }
      : { reference: referenceOf(images), images };
  }

  /**
   * `registry_type: s3` (docs/adr/0022-registries.md): the image saved as an OCI layout tarball
   * (`buildah push … oci-archive:`), uploaded to the tenant's bucket, its `s3://` address and
   * digest recorded. The SBOM and scan steps, which read registry images, do not run.
   */
  private async storeInS3(
    build: RunnableBuild,
    run: ActiveRun,
    dir: string,
    image: string,
    target: S3ImageTarget,
  ): Promise<Pushed> {
    const archive = join(dir, 'image.oci.tar');
    await rm(archive, { force: true });
    const saved = await this.runChild(
      build.id,
      run,
      'buildah',
      [...this.buildahArgs(dir), 'push', image, `oci-archive:${archive}`],
      'push',
      dir,
    );
    if (run.cancelled) return { none: 'the build was cancelled' };
    if (saved.code !== 0) {
      throw new BuildFailure(
        'BuildFailed',
        `saving the image as an OCI layout failed: ${failureMessage(saved.tail, saved.code)}`,
      );
    }
    try {
      const layout = await ociLayoutDigest(archive);
      const key = s3ImageKey({
        ...(target.prefix === undefined ? {} : { prefix: target.prefix }),
        project: build.projectId,
        buildNumber: build.buildNumber,
        digest: layout.digest,
      });
      const stored = await new S3ImageStore(target, this.config.externalCalls).upload(archive, {
        key,
      });
      await this.say(build.id, `uploaded ${stored.uri} (${stored.digest}, ${stored.size} bytes)`);
      return {
        none: 'the image went to S3 as an OCI layout, and these steps read registry images',
        images: { digest: stored.digest, images: [stored.uri] },
      };
    } catch (error) {
      if (error instanceof RegistryUnauthorizedError) {
        throw new BuildFailure('RegistryUnauthorized', error.message);
      }
      if (error instanceof RegistryUnavailableError || error instanceof OciLayoutError) {
        throw new BuildFailure('BuildFailed', `storing the image in S3 failed: ${error.message}`);
      }
      throw error;
    } finally {
      await rm(archive, { force: true });
    }
  }

  /**
   * The steps after the image (ADR 0019) on this machine: the build's SBOM tool, then its scanner,
   * each against the pushed digest when its CLI is on PATH. What a tool writes goes to
   * BuildArtifacts; a tool that fails, or a document kiln refuses, is said in the log and does
   * not fail the build (the scan policy, checked afterwards, may).
   */
  private async runSteps(build: RunnableBuild, run: ActiveRun, pushed: Pushed): Promise<void> {
    const { sbomTool: sbom, scanTool: scan } = build.spec;
    if (sbom === null && scan === null) return;
    if ('none' in pushed) {
      const what = [
        sbom === null ? undefined : `SBOM (${sbom})`,
        scan === null ? undefined : `scan (${scan})`,
      ].filter((part) => part !== undefined);
      await this.say(
        build.id,
        `the ${what.join(' and ')} step${what.length > 1 ? 's are' : ' is'} skipped: ${what.length > 1 ? 'they need' : 'it needs'} a pushed image, and ${pushed.none}`,
      );
      return;
    }
    const dir = join(this.buildDir(build.id), 'steps');
    await mkdir(dir, { recursive: true });
    const registry = pushed.reference.slice(0, pushed.reference.indexOf('/'));
    const insecure = this.config.localInsecureRegistries.includes(registry);
    if (sbom !== null) {
      const out = join(dir, 'sbom.json');
      await this.runStep(build, run, 'sbom', sbomTool(sbom, insecure, out), pushed.reference, out);
    }
    if (scan === null || run.cancelled || run.timedOut) return;
    if (scan === 'clair' && this.stepSettings.clairUrl === undefined) {
      await this.say(
        build.id,
        'the scan step is skipped: clair needs KILN_CLAIR_URL, which is not set',
      );
      return;
    }
    const out = join(dir, 'scan.json');
    const tool = scanTool(scan, insecure, this.stepSettings, out);
    if ('skip' in tool) await this.say(build.id, tool.skip);
    else await this.runStep(build, run, 'scan', tool, pushed.reference, out);
  }

  /** One step: its CLI against `reference`, then what it wrote at `out` handed to BuildArtifacts. */
  private async runStep(
    build: RunnableBuild,
    run: ActiveRun,
    kind: ArtifactKind,
    tool: StepTool,
    reference: string,
    out: string,
  ): Promise<void> {
    const label = kind === 'sbom' ? 'SBOM' : 'scan';
    const [path = '', ...rest] = tool.argv;
    const command = basename(path);
    const env = stepEnvironment(this.config.childEnvironment, tool);
    if (!(await onPath(command, env))) {
      await this.say(
        build.id,
        `the ${label} step is skipped: ${command} is not installed on this machine (kiln looked on PATH)`,
      );
      return;
    }
    const args = rest.map((arg) =>
      arg.endsWith(IMAGE_PLACEHOLDER) ? arg.slice(0, -IMAGE_PLACEHOLDER.length) + reference : arg,
    );
    await rm(out, { force: true });
    await this.say(build.id, `the ${label} step runs ${command} against ${reference}`);
    // A tool that prints its document: the shell sends its stdout to the file, its stderr to the log.
    const [file, argv] =
      tool.stdout === true
        ? ['sh', ['-c', 'exec "$@" > "$0"', out, command, ...args]]
        : [command, args];
    const dir = this.buildDir(build.id);
    const exit = await this.spawnChild(build.id, run, file, argv, kind, dir, undefined, env);
    if (run.cancelled || run.timedOut) return;
    const failed = exit.outputLimitReached
      ? `${command} printed more than ${OUTPUT_LIMIT_FACTOR} × KILN_LOG_MAX_BYTES_PER_BUILD bytes and was stopped`
      : exit.code !== 0 && exit.code !== tool.okExit
        ? `${command} exited with ${exit.code === null ? `signal ${exit.signal}` : `code ${exit.code}`}`
        : undefined;
    if (failed !== undefined) {
      await this.say(
        build.id,
        `the ${label} step failed: ${failed}; nothing from it is stored`,
        'WARN',
      );
      return;
    }
    const body = await this.readDocument(out);
    if (body === undefined) {
      await this.say(
        build.id,
        `the ${label} step failed: ${command} wrote no document; nothing from it is stored`,
        'WARN',
      );
      return;
    }
    try {
      await this.artifacts.receive(build.id, kind, body);
    } catch (error) {
      // Not a database outage nor a bug: kiln looked at the document and said no.
      if (!(error instanceof KilnError)) throw error;
      await this.say(
        build.id,
        `kiln did not store the ${label} from ${command}: ${error.message}`,
        'WARN',
      );
    }
  }

  /** A step's document, as much as BuildArtifacts reads, and its size; undefined when none. */
  private async readDocument(file: string): Promise<ReceivedBody | undefined> {
    const handle = await open(file, 'r').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (handle === undefined) return undefined;
    try {
      const { size } = await handle.stat();
      if (size === 0) return undefined;
      const buffer = Buffer.alloc(Math.min(size, this.artifacts.maxUploadBytes));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return { bytes: buffer.subarray(0, bytesRead), receivedBytes: size };
    } finally {
      await handle.close();
    }
  }

  /**
   * The scan policy gate, as the operator asks it before a build succeeds: findings past the
   * policy, or no scan to show it holds, fail the build with PolicyViolation (the image stays
   * pushed). Without a policy there is nothing to ask.
   */
  private async enforceScanPolicy(build: RunnableBuild): Promise<void> {
    if (scanPolicyOf(build.spec)?.fail_on === undefined) return;
    const record = await this.lifecycle.find(build.id);
    if (record === undefined) return; // deleted while it ran: nothing left to decide
    const verdict = await this.artifacts.gate(record);
    if (!verdict.pass) throw new BuildFailure('PolicyViolation', verdict.message);
  }

  private async checkout(
    build: RunnableBuild,
    repository: string,
    source: string,
    run: ActiveRun,
  ): Promise<void> {
    const { branch, commit } = build.spec.source;
    const git = run.access?.git;
    const clone = await this.runChild(
      build.id,
      run,
      'git',
      [
        'clone',
        '--no-tags',
        ...(branch === null ? [] : ['--branch', branch]),
        '--',
        repository,
        source,
      ],
      'checkout',
      this.buildDir(build.id),
      undefined,
      {},
      // The project's credentials through a credential helper in git's environment: never in the
      // URL, an argument or a file (the same helper as the operator's source container).
      git === undefined
        ? {}
        : {
            KILN_GIT_USERNAME: git.username,
            KILN_GIT_PASSWORD: git.password,
            GIT_CONFIG_COUNT: '1',
            GIT_CONFIG_KEY_0: 'credential.helper',
            GIT_CONFIG_VALUE_0: GIT_CREDENTIAL_HELPER,
          },
    );
    if (run.cancelled) return;
    if (clone.code !== 0) {
      throw new BuildFailure(
        'BuildFailed',
        `cloning ${withoutCredentials(repository)} failed: ${failureMessage(clone.tail, clone.code)}`,
      );
    }
    if (commit !== null) {
      const checkout = await this.runChild(
        build.id,
        run,
        'git',
        ['-c', 'advice.detachedHead=false', 'checkout', commit],
        'checkout',
        source,
      );
      if (checkout.code !== 0) {
        throw new BuildFailure(
          'InvalidSpec',
          `commit ${commit} is not in ${withoutCredentials(repository)}${branch === null ? '' : ` (branch ${branch})`}`,
        );
      }
    }
  }

  /** A step of the build proper: output past the limit fails the build. */
  private async runChild(
    buildId: string,
    run: ActiveRun,
    tool: ChildTool,
    args: string[],
    container: string,
    cwd: string,
    format: BuilderFormat | undefined = tool === 'buildah' ? 'buildah' : undefined,
    declared: Readonly<Record<string, string>> = {},
    own: Readonly<Record<string, string>> = {},
  ): Promise<ChildExit> {
    const env = childEnvironment(this.config.childEnvironment, tool, declared, own);
    const exit = await this.spawnChild(buildId, run, tool, args, container, cwd, format, env);
    if (exit.outputLimitReached && !run.cancelled) {
      throw new BuildFailure(
        'BuildFailed',
        `${tool} printed more than ${OUTPUT_LIMIT_FACTOR * this.config.logMaxBytesPerBuild} bytes of output, so kiln stopped the build (the limit is ${OUTPUT_LIMIT_FACTOR} × KILN_LOG_MAX_BYTES_PER_BUILD)`,
      );
    }
    return exit;
  }

  /** Runs a child the way cancel and the timeout can stop it, its output going to the log. */
  private async spawnChild(
    buildId: string,
    run: ActiveRun,
    command: string,
    args: string[],
    container: string,
    cwd: string,
    format: BuilderFormat | undefined,
    env: Readonly<Record<string, string>>,
  ): Promise<ChildExit> {
    if (run.timedOut) throw new BuildFailure('TimedOut', 'timed out');
    const child = new ChildRun(command, args, {
      cwd,
      container,
      format,
      env,
      spool: join(this.buildDir(buildId), 'output.spool'),
      maxOutputBytes: OUTPUT_LIMIT_FACTOR * this.config.logMaxBytesPerBuild,
      onLines: async (lines) => {
        await this.sink.append(buildId, lines);
      },
    });
    run.child = child;
    const dir = this.buildDir(buildId);
    const { pid } = child;
    // At once, before the child can be reaped: a later start of kiln stops it if this one dies.
    if (pid !== undefined) this.recordGroup(buildId, dir, pid);
    let exit: ChildExit;
    try {
      exit = await child.exited;
    } finally {
      run.child = undefined;
      if (pid !== undefined) await this.releaseGroup(buildId, dir, pid);
    }
    if (exit.incomplete !== undefined)
      this.logger.warn({ build_id: buildId, reason: exit.incomplete }, 'build output incomplete');
    return exit;
  }

  private recordGroup(buildId: string, dir: string, pid: number): void {
    try {
      this.groups.record(dir, pid);
    } catch (error) {
      this.logger.warn(
        { err: error, build_id: buildId },
        'could not record the process group of a build step; if kiln dies, it may outlive kiln',
      );
    }
  }

  private async releaseGroup(buildId: string, dir: string, pid: number): Promise<void> {
    await this.groups.release(dir, pid).catch((error: unknown) => {
      this.logger.warn(
        { err: error, build_id: buildId },
        'could not release a process group record',
      );
    });
  }

  /**
   * buildx secrets as buildah secret mounts (`RUN --mount=type=secret,id=…`): each value unsealed
   * into a file of its own (mode 0600) under the build's run directory, removed with it; the
   * value never becomes a build argument or a command-line word.
   */
  private async secretFiles(
    build: RunnableBuild,
    dir: string,
    access: BuildAccessGrant | undefined,
  ): Promise<string[]> {
    const secrets = access?.secrets ?? {};
    if (Object.keys(secrets).length === 0) return [];
    const secretsDir = join(dir, 'run', 'secrets');
    await mkdir(secretsDir, { recursive: true, mode: 0o700 });
    const args: string[] = [];
    for (const [id, value] of Object.entries(secrets)) {
      if (!/^[A-Za-z0-9_.-]{1,200}$/.test(id)) {
        throw new BuildFailure('InvalidSpec', `secret id "${id.slice(0, 64)}" is not a valid name`);
      }
      const file = join(secretsDir, id);
      await writeFile(file, value, { mode: 0o600 });
      args.push('--secret', `id=${id},src=${file}`);
    }
    return args;
  }

  /**
   * The Docker config buildah pushes with: the tenant's registry credentials, resolved for this
   * build, in a file of its own (mode 0600) removed with the build's run directory; else the
   * machine's KILN_LOCAL_AUTH_FILE.
   */
  private async registryAuthFile(
    dir: string,
    access: BuildAccessGrant | undefined,
  ): Promise<string | undefined> {
    if (access?.dockerConfig === undefined) return this.config.localAuthFile;
    const runDir = join(dir, 'run');
    await mkdir(runDir, { recursive: true, mode: 0o700 });
    const file = join(runDir, 'auth.json');
    await writeFile(file, access.dockerConfig, { mode: 0o600 });
    return file;
  }

  private buildahArgs(dir: string): string[] {
    return [
      '--root',
      join(dir, 'storage'),
      '--runroot',
      join(dir, 'run'),
      '--storage-driver',
      'vfs',
    ];
  }

  private tlsArgs(): string[] {
    // Base images from an insecure registry (pulled by bud) need the same exemption as pushes.
    return this.config.localInsecureRegistries.length > 0 ? ['--tls-verify=false'] : [];
  }

  private buildDir(buildId: string): string {
    return join(this.config.dataDir, 'builds', buildId);
  }

  /** Removes working containers and the checkout; keeps the storage (the built image) until delete. */
  private async cleanUp(buildId: string): Promise<void> {
    const dir = this.buildDir(buildId);
    await execFileAsync('buildah', [...this.buildahArgs(dir), 'rm', '--all'], {
      env: childEnvironment(this.config.childEnvironment, 'buildah'),
    }).catch(() => undefined);
    try {
      await rm(join(dir, 'source'), { recursive: true, force: true });
      await rm(join(dir, 'run'), { recursive: true, force: true });
      await rm(join(dir, 'steps'), { recursive: true, force: true });
      await rm(join(dir, 'image.digest'), { force: true });
    } catch (error) {
      this.logger.warn({ err: error, build_id: buildId }, 'could not clean up a local build');
    }
  }

  private async say(
    buildId: string,
    text: string,
    level: 'INFO' | 'WARN' | 'ERROR' = 'INFO',
  ): Promise<void> {
    await this.sink.append(buildId, [
      { text: `${level === 'INFO' ? '' : `${level}: `}[kiln] ${text}`, container: 'kiln' },
    ]);
  }
}

function timedOut(seconds: number): BuildFailure {
  return new BuildFailure(
    'TimedOut',
    `the build ran longer than its timeout of ${seconds} s (KILN_BUILD_TIMEOUT_SECONDS when it was created) and was stopped`,
  );
}

/** The error lines of a failed command, or its last lines when it printed none. */
function failureMessage(tail: readonly string[], code: number | null): string {
  const errors = tail.filter((line) => /^(Error|error|ERRO|fatal|FATAL)\b/.test(line.trim()));
  const chosen = errors.length > 0 ? errors.slice(-3) : tail.slice(-5);
  const text = chosen.join('\n').trim();
  return text === '' ? `exited with code ${code}` : text;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Whether `command` is on the PATH of `env`. */
async function onPath(command: string, env: Readonly<Record<string, string>>): Promise<boolean> {
  try {
    await execFileAsync('sh', ['-c', 'command -v "$1"', 'sh', command], { env });
    return true;
  } catch {
    return false;
  }
}

/**
 * The environment of an SBOM or scan CLI: what every child of kiln gets (the allowlist and
 * LC_ALL=C, as for git, which has no settings of its own) and the tool's own settings from
 * steps.ts; never the build's declared variables.
 */
function stepEnvironment(
  inherited: Readonly<Record<string, string>>,
  tool: StepTool,
): Record<string, string> {
  return { ...childEnvironment(inherited, 'git'), ...tool.env };
}

/**
 * The operator's step settings as this machine has them: the CLIs on PATH stand in for the step
 * images; clair needs KILN_CLAIR_URL; snyk reads its token from its own configuration (`snyk
 * auth`), so there is no Secret to name and the token counts as present.
 */
function localStepSettings(config: KilnConfig): StepSettings {
  const { clairUrl } = config.operatorSteps;
  return {
    sbomImages: { syft: 'syft', grype: 'grype', trivy: 'trivy' },
    scanImages: { trivy: 'trivy', clair: 'clairctl', grype: 'grype', snyk: 'snyk' },
    ...(clairUrl === undefined ? {} : { clairUrl }),
    snykToken: { secret: 'snyk-cli-configuration', key: 'token' },
  };
}
