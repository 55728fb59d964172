import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BuildAccessGrant } from '../../integrations/build-access.js';
import type { LogSink } from '../../logs/log-sink.js';
import type { BuilderFormat, PackerArtifacts, PushedImages } from '../../manifest/formats.js';
import type { RunnableBuild } from '../build-runner.js';
import { BuildFailure } from './build-failure.js';
import type { ChildEnvironment, ChildTool } from './child-env.js';
import type { ChildExit } from './child-process.js';
import { buildahStorageArgs, type CacheLease } from './layer-caches.js';
import type { Processes, StartedChild } from './processes.js';

/** A child's output is spooled on disk up to this many times the log cap, then it is stopped. */
export const OUTPUT_LIMIT_FACTOR = 4;

type Variables = Readonly<Record<string, string>>;

/** A child of the build proper: git, buildah, pack or packer. */
export interface ToolChild {
  readonly tool: ChildTool;
  readonly args: readonly string[];
  /** Labels its lines (metadata.container). */
  readonly container: string;
  readonly cwd: string;
  /** How its lines read; buildah's for buildah unless another is given. */
  readonly format?: BuilderFormat;
  /** The build's declared variables (only pack and packer get them). */
  readonly declared?: Variables;
  /** What kiln itself gives this one run (git's credential helper); wins over the machine's. */
  readonly own?: Variables;
  /** Sees each line as it is printed, before masking (for kiln's own summaries). */
  readonly watch?: (line: string) => void;
}

/** Any child of a build: a tool of the build proper, or a step's CLI. */
export interface BuildChild {
  readonly command: string;
  readonly args: readonly string[];
  readonly container: string;
  readonly cwd: string;
  readonly format?: BuilderFormat | undefined;
  readonly environment: ChildEnvironment;
  readonly watch?: ((line: string) => void) | undefined;
}

/** What every run of the local runner shares. */
export interface BuildRunParts {
  readonly processes: Processes;
  readonly sink: LogSink;
  readonly logger: Logger;
  /** A child whose output passes this many bytes is stopped. */
  readonly maxOutputBytes: number;
}

/**
 * One build while it runs on this machine, as the coordinator (LocalRunner) and the executors
 * share it: its directory, whether it was cancelled or timed out, what BuildAccess granted it,
 * and the children running now (the builder, and the checkout's commit read beside it), which a
 * cancel or the timeout stops.
 */
export class BuildRun {
  cancelled = false;
  /** Set when the build outlived its spec's timeout: the current child is stopped. */
  timedOut = false;
  /** What the build's references resolved to, and the tenant's registry credentials. */
  access: BuildAccessGrant | undefined;
  /** What the build pushed, recorded with its outcome (a build that fails later keeps it). */
  images: PushedImages | undefined;
  /** What a packer build made, as its manifest post-processor lists it. */
  packer: PackerArtifacts | undefined;
  /** The project's layer cache while the build holds it (docs/adr/0055-local-layer-cache.md). */
  cache: CacheLease | undefined;
  /** Settles once the run has ended and is cleaned up. */
  finished: Promise<void> = Promise.resolve();
  private readonly children = new Set<StartedChild>();
  /** What starts once the next child has started (see `afterNextStart`). */
  private nextStart: Array<() => void> = [];

  constructor(
    readonly build: RunnableBuild,
    /** KILN_DATA_DIR/builds/<id> (docs/adr/0008-local-runner.md). */
    readonly dir: string,
    private readonly parts: BuildRunParts,
  ) {}

  /** Where the build's repository is checked out. */
  get source(): string {
    return join(this.dir, 'source');
  }

  /** buildah's store for this build: its project's layer cache, else a store of its own. */
  get storage(): readonly string[] {
    return this.cache?.storage ?? buildahStorageArgs(this.dir);
  }

  /** Cancelled or timed out: nothing more of the build should start. */
  get stopped(): boolean {
    return this.cancelled || this.timedOut;
  }

  /**
   * Calls `start` right after the next child of the build has been started: what runs beside the
   * build (the checkout's commit read) never starts before the builder, whose first line the
   * user waits for.
   */
  afterNextStart(start: () => void): void {
    this.nextStart.push(start);
  }

  /** Stops the children running now, if any, and everything they started. */
  async stop(graceMs: number): Promise<void> {
    await Promise.all([...this.children].map((child) => child.stop(graceMs)));
  }

  /** A line of kiln's own in the build's log. */
  async say(text: string, level: 'INFO' | 'WARN' | 'ERROR' = 'INFO'): Promise<void> {
    await this.parts.sink.append(this.build.id, [
      { text: `${level === 'INFO' ? '' : `${level}: `}[kiln] ${text}`, container: 'kiln' },
    ]);
  }

  /** Whether `command` is on the PATH of that environment. */
  onPath(command: string, environment: ChildEnvironment): Promise<boolean> {
    return this.parts.processes.onPath(command, environment);
  }

  /** A child of the build proper: output past the limit fails the build. */
  async runTool(child: ToolChild): Promise<ChildExit> {
    const { tool, declared, own, format = tool === 'buildah' ? 'buildah' : undefined } = child;
    const exit = await this.runChild({
      command: tool,
      args: child.args,
      container: child.container,
      cwd: child.cwd,
      format,
      environment: { tool, declared, own },
      watch: child.watch,
    });
    if (exit.outputLimitReached && !this.cancelled) {
      throw new BuildFailure(
        'BuildFailed',
        `${tool} printed more than ${this.parts.maxOutputBytes} bytes of output, so kiln stopped the build (the limit is ${OUTPUT_LIMIT_FACTOR} × KILN_LOG_MAX_BYTES_PER_BUILD)`,
      );
    }
    return exit;
  }

  /** Runs a child the way cancel and the timeout can stop it, its output going to the log. */
  async runChild(child: BuildChild): Promise<ChildExit> {
    if (this.timedOut) throw new BuildFailure('TimedOut', 'timed out');
    const buildId = this.build.id;
    const { watch, ...start } = child;
    const started = this.parts.processes.start({
      ...start,
      buildDir: this.dir,
      maxOutputBytes: this.parts.maxOutputBytes,
      onLines: async (lines) => {
        if (watch !== undefined) for (const line of lines) watch(line.text);
        await this.parts.sink.append(buildId, lines);
      },
    });
    this.children.add(started);
    const next = this.nextStart;
    this.nextStart = [];
    for (const start of next) start();
    let exit: ChildExit;
    try {
      exit = await started.exited;
    } finally {
      this.children.delete(started);
    }
    if (exit.incomplete !== undefined) {
      this.parts.logger.warn(
        { build_id: buildId, reason: exit.incomplete },
        'build output incomplete',
      );
    }
    return exit;
  }
}
