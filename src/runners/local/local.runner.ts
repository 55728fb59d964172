import {
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { arch } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { BuildManifest } from '../../build-methods/manifest.js';
import { LOGGER } from '../../common/logger.js';
import { KilnConfig } from '../../config/config.js';
import { BuildLifecycle } from '../../lifecycle/build-lifecycle.js';
import type { FailureReason } from '../../lifecycle/build-state.js';
import type { BuilderFormat } from '../../logs/builder-output.js';
import { LogSink } from '../../logs/log-sink.js';
import { ProjectsRepository } from '../../projects/projects.repository.js';
import { BuildRunner, type RunnableBuild } from '../build-runner.js';
import {
  type BuildPlan,
  packArgs,
  packerArgs,
  planBuild,
  pushTargets,
  toolOf,
} from './build-plan.js';
import { ChildRun } from './child-process.js';
import { Slots } from './slots.js';

const execFileAsync = promisify(execFile);
const RUNNER_PREFIX = 'local:';
const HOST_PLATFORM = `linux/${arch() === 'x64' ? 'amd64' : arch()}`;

/** A build that failed for a reason the runner can name. */
class BuildFailure extends Error {
  constructor(
    readonly reason: FailureReason,
    message: string,
  ) {
    super(message);
  }
}

interface ActiveRun {
  cancelled: boolean;
  child: ChildRun | undefined;
  finished: Promise<void>;
}

/**
 * Runs builds on this machine as child processes: buildah for Dockerfile methods (kaniko, buildx,
 * container, and reference-form builds of a repository's Dockerfile), `pack` and `packer` when
 * installed. Each build gets its own work directory and buildah storage under KILN_DATA_DIR/builds;
 * output goes through LogSink; the exit status decides the outcome. See docs/adr/0008-local-runner.md.
 */
@Injectable()
export class LocalRunner
  extends BuildRunner
  implements OnApplicationBootstrap, OnApplicationShutdown
{
  private readonly runs = new Map<string, ActiveRun>();
  private readonly slots: Slots;

  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly sink: LogSink,
    private readonly projects: ProjectsRepository,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.slots = new Slots(config.localMaxParallel);
  }

  /** Builds a previous kiln process left running cannot finish: fail them rather than hang. */
  async onApplicationBootstrap(): Promise<void> {
    if (this.config.runner !== 'local') return;
    for (const id of await this.lifecycle.runningWithRunner(RUNNER_PREFIX)) {
      if (this.runs.has(id)) continue;
      await this.lifecycle
        .fail(id, 'InternalError', 'kiln restarted while this build ran; retry it')
        .catch(() => undefined);
      this.logger.warn({ build_id: id }, 'failed a build left running by a previous kiln process');
    }
  }

  async start(build: RunnableBuild): Promise<void> {
    await this.lifecycle.setRunnerRef(build.id, `${RUNNER_PREFIX}${process.pid}`);
    const run: ActiveRun = { cancelled: false, child: undefined, finished: Promise.resolve() };
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

  private async execute(build: RunnableBuild, run: ActiveRun): Promise<void> {
    if (!this.slots.free) {
      await this.lifecycle.reportProgress(build.id, 0, 0);
      await this.say(
        build.id,
        `waiting for a free local build slot (${this.slots.inUse} builds running)`,
      );
    }
    await this.slots.acquire();
    try {
      if (run.cancelled) return;
      await this.say(build.id, `running on ${HOST_PLATFORM} with the local runner`);
      const secrets = secretsOf(build);
      if (secrets.length > 0) this.sink.registerSecrets(build.id, secrets);
      const plan = planBuild(build.config);
      await this.runPlan(build, plan, run);
      if (run.cancelled) return;
      await this.lifecycle.succeed(build.id);
    } catch (error) {
      if (run.cancelled) return;
      const failure =
        error instanceof BuildFailure
          ? error
          : new BuildFailure(
              'InternalError',
              `the local runner failed: ${(error as Error).message}`,
            );
      if (!(error instanceof BuildFailure))
        this.logger.error({ err: error, build_id: build.id }, 'local build error');
      await this.say(build.id, failure.message, 'ERROR').catch(() => undefined);
      await this.lifecycle.fail(build.id, failure.reason, failure.message).catch(() => undefined);
    } finally {
      this.slots.release();
      await this.cleanUp(build.id);
      await this.sink.release(build.id).catch(() => undefined);
      if (run.cancelled)
        await this.say(build.id, 'cancelled; the build was stopped').catch(() => undefined);
    }
  }

  private async runPlan(build: RunnableBuild, plan: BuildPlan, run: ActiveRun): Promise<void> {
    const tool = toolOf(plan);
    const method = tool === 'pack' ? 'paketo' : 'packer';
    if (tool !== undefined && !(await onPath(tool))) {
      throw new BuildFailure(
        'InvalidSpec',
        `${method} builds need the \`${tool}\` CLI, which is not installed on this machine; install it or use the Kubernetes runner, which supports ${method}`,
      );
    }
    const dir = this.buildDir(build.id);
    const source = join(dir, 'source');
    await rm(dir, { recursive: true, force: true });
    await mkdir(source, { recursive: true });
    const project = await this.projects.findInTenant(build.tenantId, build.projectId);
    const repository = project?.gitRepositoryUrl ?? null;
    if (plan.kind === 'dockerfile' && plan.needsRepository && repository === null) {
      throw new BuildFailure('InvalidSpec', 'the project has no git repository to build from');
    }
    if (repository !== null) await this.checkout(build, repository, source, run);
    if (run.cancelled) return;
    const targets = (tags: readonly string[], registryRepository: string | undefined) =>
      pushTargets(
        tags,
        registryRepository,
        this.config.localRegistry,
        project?.name ?? 'project',
        build.buildNumber,
      );

    switch (plan.kind) {
      case 'dockerfile':
        return this.runDockerfile(
          build,
          plan,
          run,
          dir,
          source,
          targets(plan.tags, plan.registryRepository),
        );
      case 'pack':
        return this.runPack(build, plan, run, source, targets(plan.tags, plan.registryRepository));
      case 'packer':
        return this.runPacker(build, plan, run, source);
    }
  }

  private async runPack(
    build: RunnableBuild,
    plan: Extract<BuildPlan, { kind: 'pack' }>,
    run: ActiveRun,
    source: string,
    targets: string[],
  ): Promise<void> {
    if (plan.builder !== plan.requestedBuilder) {
      await this.say(
        build.id,
        `builder ${plan.requestedBuilder} is deprecated; using ${plan.builder}`,
      );
    }
    const path = this.inside(source, plan.context);
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
    );
    if (run.cancelled) return;
    if (result.code !== 0)
      throw new BuildFailure('BuildFailed', failureMessage(result.tail, result.code));
    if (targets.length > 0) await this.say(build.id, `pushed ${image}`);
    for (const tag of more)
      await this.say(build.id, `${tag} was not pushed: pack publishes one name per build`);
  }

  private async runPacker(
    build: RunnableBuild,
    plan: Extract<BuildPlan, { kind: 'packer' }>,
    run: ActiveRun,
    source: string,
  ): Promise<void> {
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
      );
      if (run.cancelled) return;
      if (result.code !== 0) {
        throw new BuildFailure(
          command === 'build' ? 'BuildFailed' : 'InvalidSpec',
          `packer ${command} failed: ${failureMessage(result.tail, result.code)}`,
        );
      }
    }
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
    plan: Extract<BuildPlan, { kind: 'dockerfile' }>,
    run: ActiveRun,
    dir: string,
    source: string,
    targets: string[],
  ): Promise<void> {
    const foreign = plan.platforms.filter((platform) => platform !== HOST_PLATFORM);
    if (foreign.length > 0) {
      throw new BuildFailure(
        'InvalidSpec',
        `the local runner builds for ${HOST_PLATFORM} only; ${foreign.join(', ')} need the Kubernetes runner`,
      );
    }
    if (plan.dockerfile !== undefined)
      await writeFile(join(source, '.kiln.Dockerfile'), plan.dockerfile);

    const context = this.inside(source, plan.context);
    const image = `localhost/kiln/${build.id}:build`;
    const buildah = this.buildahArgs(dir);
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
      ...this.tlsArgs(),
      context,
    ];
    const built = await this.runChild(build.id, run, 'buildah', bud, 'build', source);
    if (run.cancelled) return;
    if (built.code !== 0)
      throw new BuildFailure('BuildFailed', failureMessage(built.tail, built.code));

    if (targets.length === 0) {
      await this.say(
        build.id,
        `built ${image}; no registry configured, so the image stays on this machine`,
      );
    }
    for (const target of targets) {
      const registry = target.slice(0, target.indexOf('/'));
      const pushed = await this.runChild(
        build.id,
        run,
        'buildah',
        [
          ...buildah,
          'push',
          ...(this.config.localInsecureRegistries.includes(registry) ? ['--tls-verify=false'] : []),
          ...(this.config.localAuthFile === undefined
            ? []
            : ['--authfile', this.config.localAuthFile]),
          image,
          `docker://${target}`,
        ],
        'push',
        dir,
      );
      if (run.cancelled) return;
      if (pushed.code !== 0) {
        throw new BuildFailure(
          'BuildFailed',
          `pushing ${target} failed: ${failureMessage(pushed.tail, pushed.code)}`,
        );
      }
      await this.say(build.id, `pushed ${target}`);
    }
  }

  private async checkout(
    build: RunnableBuild,
    repository: string,
    source: string,
    run: ActiveRun,
  ): Promise<void> {
    const branch = build.gitBranch;
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
    );
    if (run.cancelled) return;
    if (clone.code !== 0) {
      throw new BuildFailure(
        'BuildFailed',
        `cloning ${repository} failed: ${failureMessage(clone.tail, clone.code)}`,
      );
    }
    if (build.gitCommit !== null) {
      const checkout = await this.runChild(
        build.id,
        run,
        'git',
        ['-c', 'advice.detachedHead=false', 'checkout', build.gitCommit],
        'checkout',
        source,
      );
      if (checkout.code !== 0) {
        throw new BuildFailure(
          'InvalidSpec',
          `commit ${build.gitCommit} is not in ${repository}${branch === null ? '' : ` (branch ${branch})`}`,
        );
      }
    }
  }

  private async runChild(
    buildId: string,
    run: ActiveRun,
    command: string,
    args: string[],
    container: string,
    cwd: string,
    format: BuilderFormat | undefined = command === 'buildah' ? 'buildah' : undefined,
  ) {
    const child = new ChildRun(command, args, {
      cwd,
      container,
      format,
      env: { ...process.env, BUILDAH_ISOLATION: 'chroot', LC_ALL: 'C' },
      onLines: async (lines) => {
        await this.sink.append(buildId, lines);
      },
    });
    run.child = child;
    try {
      return await child.exited;
    } finally {
      run.child = undefined;
    }
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
    await execFileAsync('buildah', [...this.buildahArgs(dir), 'rm', '--all']).catch(
      () => undefined,
    );
    await rm(join(dir, 'source'), { recursive: true, force: true });
    await rm(join(dir, 'run'), { recursive: true, force: true });
  }

  private async say(
    buildId: string,
    text: string,
    level: 'INFO' | 'ERROR' = 'INFO',
  ): Promise<void> {
    await this.sink.append(buildId, [
      { text: `${level === 'ERROR' ? 'ERROR: ' : ''}[kiln] ${text}`, container: 'kiln' },
    ]);
  }
}

/** Values that must never appear in the log: buildx secrets. */
function secretsOf(build: RunnableBuild): string[] {
  if (build.config.form !== 'wizard') return [];
  const manifest = build.config.manifest as unknown as BuildManifest;
  return Object.values(manifest.build_config.secrets ?? {});
}

/** The error lines of a failed command, or its last lines when it printed none. */
function failureMessage(tail: readonly string[], code: number | null): string {
  const errors = tail.filter((line) => /^(Error|error|ERRO|fatal|FATAL)\b/.test(line.trim()));
  const chosen = errors.length > 0 ? errors.slice(-3) : tail.slice(-5);
  const text = chosen.join('\n').trim();
  return text === '' ? `exited with code ${code}` : text;
}

async function onPath(tool: string): Promise<boolean> {
  try {
    await execFileAsync('sh', ['-c', `command -v ${tool}`]);
    return true;
  } catch {
    return false;
  }
}
