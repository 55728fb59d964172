import type { ChildExit } from '../../src/runners/local/child-process.js';
import type { ChildEnvironment } from '../../src/runners/local/child-env.js';
import {
  type ChildStart,
  Processes,
  type StartedChild,
} from '../../src/runners/local/processes.js';

/** How one scripted child behaves. */
export interface ChildScript {
  /** The lines it prints, in order. */
  readonly lines?: readonly string[];
  /** Its exit code; 0 unless given. */
  readonly code?: number;
  /** It runs until it is stopped, then ends by SIGTERM. */
  readonly hang?: boolean;
  /** It printed past the output limit, so it was stopped (by SIGTERM). */
  readonly outputLimitReached?: boolean;
  /**
   * What it does before it exits (buildah writing its digest file, a step its document); when it
   * throws, `exited` rejects as for a child that could not be started.
   */
  readonly effect?: () => Promise<void>;
}

/** A child the fake started, and what became of it. */
export interface FakeChild {
  readonly start: ChildStart;
  running: boolean;
  /** The grace it was stopped with, if it was. */
  stoppedWithGraceMs?: number;
}

/**
 * A process port that runs nothing: each child does what the script says for it. It keeps the
 * little world a build changes (the children, which run, and buildah's working containers per
 * build storage, which `bud` makes and `rm --all` removes), and answers `onPath` from `installed`.
 */
export class FakeProcesses extends Processes {
  readonly children: FakeChild[] = [];
  /** Commands on PATH; anything else is not. */
  readonly installed = new Set(['git', 'buildah', 'sh']);
  /** Build storages (`--root`) holding a working container. */
  readonly workingContainers = new Set<string>();
  /** Groups a previous kiln left, by build directory, as stopOrphans finds them. */
  readonly orphans = new Map<string, number>();
  /** The build directories stopOrphans was asked about. */
  readonly orphansLookedFor: string[] = [];

  constructor(public script: (child: ChildStart) => ChildScript = () => ({})) {
    super();
  }

  /** The children that still run. */
  get running(): FakeChild[] {
    return this.children.filter((child) => child.running);
  }

  start(start: ChildStart): StartedChild {
    const script = this.script(start);
    const child: FakeChild = { start, running: true };
    this.children.push(child);
    if (start.args.includes('bud')) this.workingContainers.add(rootOf(start.args));
    let stopped: (signal: NodeJS.Signals) => void = () => undefined;
    const stop = new Promise<NodeJS.Signals>((done) => (stopped = done));
    const exited = (async (): Promise<ChildExit> => {
      const lines = script.lines ?? [];
      if (lines.length > 0) {
        const ts = new Date();
        await start.onLines(
          lines.map((text) => ({ text, ts, container: start.container, format: start.format })),
        );
      }
      let status: { code: number | null; signal: NodeJS.Signals | null } = {
        code: script.code ?? 0,
        signal: null,
      };
      try {
        if (script.hang === true) status = { code: null, signal: await stop };
        else if (script.outputLimitReached === true) status = { code: null, signal: 'SIGTERM' };
        else await script.effect?.(); // throwing: the child could not be started
      } finally {
        child.running = false;
      }
      return {
        ...status,
        tail: lines.slice(-20),
        incomplete: undefined,
        outputLimitReached: script.outputLimitReached ?? false,
      };
    })();
    return {
      exited,
      stop: async (graceMs) => {
        if (!child.running) return;
        child.stoppedWithGraceMs = graceMs;
        stopped('SIGTERM');
        await exited.catch(() => undefined);
      },
    };
  }

  onPath(command: string, _environment: ChildEnvironment): Promise<boolean> {
    return Promise.resolve(this.installed.has(command));
  }

  run(command: string, args: readonly string[], _environment: ChildEnvironment): Promise<boolean> {
    if (command === 'buildah' && args.includes('rm')) this.workingContainers.delete(rootOf(args));
    return Promise.resolve(true);
  }

  stopOrphans(buildDirs: readonly string[], _graceMs: number): Promise<Map<string, number>> {
    this.orphansLookedFor.push(...buildDirs);
    return Promise.resolve(new Map([...this.orphans].filter(([dir]) => buildDirs.includes(dir))));
  }
}

/** The buildah storage (`--root`) a buildah command names. */
function rootOf(args: readonly string[]): string {
  return args[args.indexOf('--root') + 1] ?? '';
}
