import { Inject, Injectable } from '@nestjs/common';
import { execFile } from 'node:child_process';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { LOGGER } from '../../common/logger.js';
import { KilnConfig } from '../../config/config.js';
import type { LogLineInput } from '../../logs/log-sink.js';
import type { BuilderFormat } from '../../manifest/formats.js';
import { type ChildEnvironment, environmentOf } from './child-env.js';
import { type ChildExit, ChildRun } from './child-process.js';
import { ProcessGroups } from './process-groups.js';

const execFileAsync = promisify(execFile);

/** One child of a build: what runs, where, and where its output goes. */
export interface ChildStart {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  /** Which environment it gets; the port builds it from the allowlist. */
  readonly environment: ChildEnvironment;
  /** Labels the lines (metadata.container) and picks the output parser. */
  readonly container: string;
  readonly format?: BuilderFormat | undefined;
  /** The build's directory: the output spool and the record of the child's group go there. */
  readonly buildDir: string;
  /** Output past this many bytes is not read: the child is stopped and its exit says so. */
  readonly maxOutputBytes: number;
  /** Receives the output in order, a batch at a time. */
  readonly onLines: (lines: LogLineInput[]) => Promise<void>;
}

/** A child that was started. */
export interface StartedChild {
  /**
   * Resolves once the child has exited and every line was handed over (rejects when it could
   * not be started, or its lines could not be stored).
   */
  readonly exited: Promise<ChildExit>;
  /** Stops the child and everything it started: SIGTERM, SIGKILL after `graceMs`. */
  stop(graceMs: number): Promise<void>;
}

/**
 * The process port of the local runner: the one place that starts processes. Each child runs in
 * a process group of its own, so that a stop reaches everything it started; its group is
 * recorded under the build's directory while it runs, so that a kiln started after one that was
 * killed stops what that one left (docs/adr/0033-local-child-processes.md); its environment is
 * the allowlist kiln was started with plus what the caller's ChildEnvironment names, never kiln's
 * own. Tests give the runner a port that scripts its children.
 */
export abstract class Processes {
  /** Starts a child at once (synchronously, so that its group is recorded before it is reaped). */
  abstract start(child: ChildStart): StartedChild;
  /** Whether `command` is on the PATH of that environment. */
  abstract onPath(command: string, environment: ChildEnvironment): Promise<boolean>;
  /** Runs a command to its end, its output discarded; whether it exited with 0. */
  abstract run(
    command: string,
    args: readonly string[],
    environment: ChildEnvironment,
  ): Promise<boolean>;
  /**
   * Stops the groups recorded under `buildDirs` by kiln processes that no longer run (SIGTERM,
   * SIGKILL after `graceMs`); how many groups were stopped, by build directory.
   */
  abstract stopOrphans(
    buildDirs: readonly string[],
    graceMs: number,
  ): Promise<ReadonlyMap<string, number>>;
}

/** Processes on this machine: `spawn` through ChildRun, groups through ProcessGroups. */
@Injectable()
export class HostProcesses extends Processes {
  private readonly groups = new ProcessGroups();
  private readonly inherited: Readonly<Record<string, string>>;

  constructor(
    config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.inherited = config.childEnvironment;
  }

  start(child: ChildStart): StartedChild {
    const { buildDir } = child;
    const run = new ChildRun(child.command, child.args, {
      cwd: child.cwd,
      container: child.container,
      format: child.format,
      env: environmentOf(this.inherited, child.environment),
      spool: join(buildDir, 'output.spool'),
      maxOutputBytes: child.maxOutputBytes,
      onLines: child.onLines,
    });
    const { pid } = run;
    // At once, before the child can be reaped: a later start of kiln stops it if this one dies.
    if (pid !== undefined) this.record(buildDir, pid);
    return {
      exited: run.exited.finally(async () => {
        if (pid !== undefined) await this.release(buildDir, pid);
      }),
      stop: (graceMs) => run.stop(graceMs),
    };
  }

  async onPath(command: string, environment: ChildEnvironment): Promise<boolean> {
    return this.run('sh', ['-c', 'command -v "$1"', 'sh', command], environment);
  }

  async run(
    command: string,
    args: readonly string[],
    environment: ChildEnvironment,
  ): Promise<boolean> {
    try {
      await execFileAsync(command, args, { env: environmentOf(this.inherited, environment) });
      return true;
    } catch {
      return false;
    }
  }

  stopOrphans(buildDirs: readonly string[], graceMs: number): Promise<Map<string, number>> {
    return this.groups.stopOrphans(buildDirs, graceMs);
  }

  private record(buildDir: string, pid: number): void {
    try {
      this.groups.record(buildDir, pid);
    } catch (error) {
      this.logger.warn(
        { err: error, build_id: basename(buildDir) },
        'could not record the process group of a build step; if kiln dies, it may outlive kiln',
      );
    }
  }

  private async release(buildDir: string, pid: number): Promise<void> {
    await this.groups.release(buildDir, pid).catch((error: unknown) => {
      this.logger.warn(
        { err: error, build_id: basename(buildDir) },
        'could not release a process group record',
      );
    });
  }
}
