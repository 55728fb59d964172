import type { Logger } from 'pino';
import type { BuilderFormat } from '../../manifest/formats.js';
import type { LogLineInput } from '../../logs/log-sink.js';
import { jitteredDelay } from '../runtime/backoff.js';
import { type LogCursor, type ParsedLine, StreamSession } from './stream-session.js';

/** What the reconciler last saw of one container of the build's pod. */
export type ContainerState =
  /** Not started yet (the pod may still run it). */
  | 'waiting'
  | 'running'
  | 'terminated'
  /** The pod ended without ever running it (an earlier init container failed). */
  | 'skipped'
  /** The pod is gone: what was not read is lost. */
  | 'gone';

export type { LogCursor } from './stream-session.js';

export interface FollowedContainer {
  readonly name: string;
  /** How to read levels and steps from this container's output. */
  readonly format?: BuilderFormat;
}

export interface FollowTarget {
  readonly buildId: string;
  readonly namespace: string;
  readonly pod: string;
  /** In order: init containers first (they run one after another), then the others. */
  readonly containers: readonly FollowedContainer[];
}

/** Ports: the pod-log API (src/kubernetes/pod-logs.ts), LogSink, and the stored cursors. */
export interface LogFollowerDeps {
  readonly logs: {
    stream(
      ref: { namespace: string; pod: string; container: string },
      options: { follow: boolean; sinceTime?: string },
      /** A promise holds the stream until it settles (backpressure). */
      onText: (text: string) => void | Promise<void>,
      signal: AbortSignal,
    ): Promise<void>;
  };
  /**
   * LogSink: `buffered` says the lines are held in memory until the database is back (an
   * outage), not stored yet.
   */
  readonly sink: {
    append(
      buildId: string,
      lines: readonly LogLineInput[],
    ): Promise<{ readonly buffered: boolean }>;
  };
  /**
   * The cursors of what is already stored (a restarted operator resumes from them), by
   * container; a container with no line stored has none.
   */
  readonly cursors: {
    containerCursors(
      buildId: string,
      containers: readonly string[],
    ): Promise<ReadonlyMap<string, LogCursor>>;
  };
  readonly logger: Logger;
  /** What every follower of the process holds together (none: this follower's own bound only). */
  readonly budget?: FollowerBudget;
  /**
   * One follower per build across operator processes: it follows only while it holds the build's
   * claim (renewed every third of `ttlMs`), so two operators that both believe they lead do not
   * store each line twice. Without it, the follower follows at once.
   */
  readonly claim?: {
    readonly store: {
      claimFollower(buildId: string, holder: string, ttlMs: number): Promise<boolean>;
      releaseFollower(buildId: string, holder: string): Promise<void>;
    };
    readonly holder: string;
    readonly ttlMs: number;
  };
}

export interface LogFollowerOptions {
  /** A running container's stream that sends nothing this long is reopened. */
  readonly stallMs: number;
  /**
   * Past this many lines handed to LogSink and not yet answered, the stream is not read on
   * until they are stored (backpressure).
   */
  readonly maxUnansweredLines: number;
  /**
   * The same for every follower of the process together ({@link FollowerBudget}): past this many
   * lines or characters read and not yet answered, each follower reads on only once its own are.
   */
  readonly maxHeldLines: number;
  readonly maxHeldChars: number;
  readonly retryBaseMs: number;
  readonly retryMaxMs: number;
}

/** Lines a follower hands LogSink in one append at most. */
const MAX_APPEND_LINES = 5_000;

export const DEFAULT_LOG_FOLLOWER_OPTIONS: LogFollowerOptions = {
  stallMs: 30_000,
  maxUnansweredLines: 10_000,
  maxHeldLines: 50_000,
  maxHeldChars: 32 * 1024 * 1024,
  retryBaseMs: 250,
  retryMaxMs: 5_000,
};

/**
 * Log text the followers of one process have read from pods and LogSink has not answered yet.
 * Past its bounds every follower waits for its own lines before it reads on, so a database that
 * stores slower than pods print keeps the backlog in the kubelets' log files, not in this heap.
 */
export class FollowerBudget {
  private lines = 0;
  private chars = 0;

  constructor(private readonly limits: Pick<LogFollowerOptions, 'maxHeldLines' | 'maxHeldChars'>) {}

  take(chars: number): void {
    this.lines++;
    this.chars += chars;
  }

  give(chars: number): void {
    this.lines--;
    this.chars -= chars;
  }

  get exceeded(): boolean {
    return this.lines > this.limits.maxHeldLines || this.chars > this.limits.maxHeldChars;
  }

  /** What is held now: for tests and the bench. */
  get held(): { lines: number; chars: number } {
    return { lines: this.lines, chars: this.chars };
  }
}

export interface FollowOutcome {
  /** Every container was read to its end. */
  readonly complete: boolean;
  /** Containers whose log was not read to the end (a marker line says so for each). */
  readonly incomplete: readonly string[];
  /** Of those, how many `abandon` gave up on (the drain deadline's markers). */
  readonly abandoned: number;
}

/**
 * Reads every container of one build's pod, in order, into LogSink with the container as
 * metadata (docs/adr/0015-pod-log-follower.md). Streams use `follow=true&timestamps=true`.
 *
 * No loss, no duplicate: a stream that ends while its container runs, breaks, or stalls is
 * reopened from the second of the last line handed on (the API filters at whole seconds), and
 * what was handed on already is dropped again by (timestamp, ordinal within that timestamp): lines
 * of one container come back in the same order. A restarted operator starts from the cursor of
 * what is stored. When the pod goes away before a log was read to its end, one WARN marker line
 * says which container's lines are missing from when.
 */
export class BuildLogFollower {
  readonly done: Promise<FollowOutcome>;
  private readonly states = new Map<string, ContainerState>();
  private readonly stopper = new AbortController();
  private wake: (() => void) | undefined;
  private writing: Promise<unknown> = Promise.resolve();
  private abandonReason: string | undefined;
  /** LogSink answered an append with "held until the database is back". */
  private held = false;
  /** Lines handed to LogSink whose append has not returned yet. */
  private unanswered = 0;
  /** Containers given up on by `abandon`, each with its marker line. */
  private abandoned = 0;
  /** Lines read while an append was out: the next append's. */
  private pending: LogLineInput[] = [];
  private appending = false;
  /**
   * Every container's cursor, read in one query as soon as the claim is held, while the first
   * container has not started yet: the reads are then off the way of a container's first line.
   * Undefined when that read failed (each container asks on its own then, retrying).
   */
  private earlyCursors: Promise<ReadonlyMap<string, LogCursor> | undefined> =
    Promise.resolve(undefined);

  constructor(
    private readonly deps: LogFollowerDeps,
    private readonly target: FollowTarget,
    private readonly options: LogFollowerOptions = DEFAULT_LOG_FOLLOWER_OPTIONS,
  ) {
    this.done = this.run();
  }

  /** Lines handed to LogSink whose append has not returned (bounded by backpressure). */
  get unansweredLines(): number {
    return this.unanswered;
  }

  /** The container states the reconciler read from the pod; wakes a waiting follower. */
  observe(states: ReadonlyMap<string, ContainerState>): void {
    for (const [name, state] of states) this.states.set(name, state);
    this.wake?.();
  }

  /**
   * Stops at once without a marker (this operator lost its lease; the next leader resumes from
   * the stored cursor).
   */
  async stop(): Promise<void> {
    this.stopper.abort(new Error('log follower stopped'));
    this.wake?.();
    await this.done.catch(() => undefined);
  }

  /**
   * Gives up on what is not read yet (the drain deadline passed): one marker line per
   * incomplete container, then `done` resolves.
   */
  async abandon(reason: string): Promise<FollowOutcome> {
    this.abandonReason = reason;
    this.stopper.abort(new Error(reason));
    this.wake?.();
    return this.done;
  }

  private async run(): Promise<FollowOutcome> {
    const claim = this.deps.claim;
    if (claim === undefined) return this.followAll();
    if (!(await this.claimed(claim))) {
      // Stopped or abandoned while another follower held the log: that one stores it.
      return {
        complete: false,
        incomplete: this.target.containers.map((c) => c.name),
        abandoned: 0,
      };
    }
    const renewal = setInterval(() => void this.renew(claim), Math.max(100, claim.ttlMs / 3));
    try {
      return await this.followAll();
    } finally {
      clearInterval(renewal);
      await claim.store
        .releaseFollower(this.target.buildId, claim.holder)
        .catch((error: unknown) =>
          this.deps.logger.warn(
            { err: error, build_id: this.target.buildId },
            'could not let go of the log claim; it runs out by itself',
          ),
        );
    }
  }

  /** Waits until this follower holds the build's claim; false when stopped first. */
  private async claimed(claim: NonNullable<LogFollowerDeps['claim']>): Promise<boolean> {
    let told = false;
    while (!this.stopper.signal.aborted) {
      try {
        if (await claim.store.claimFollower(this.target.buildId, claim.holder, claim.ttlMs))
          return true;
        if (!told) {
          told = true;
          this.deps.logger.warn(
            { build_id: this.target.buildId },
            'another operator follows this build’s log; waiting for its claim to end',
          );
        }
      } catch (error) {
        this.deps.logger.warn(
          { err: error, build_id: this.target.buildId },
          'could not claim the build’s log; retrying',
        );
      }
      await this.waitForChange(Math.min(this.options.retryMaxMs, claim.ttlMs / 2));
    }
    return false;
  }

  /** Renews the claim; one that another follower holds now stops this one (no marker). */
  private async renew(claim: NonNullable<LogFollowerDeps['claim']>): Promise<void> {
    try {
      if (await claim.store.claimFollower(this.target.buildId, claim.holder, claim.ttlMs)) return;
      this.deps.logger.warn(
        { build_id: this.target.buildId },
        'another operator took over this build’s log; stopping here',
      );
      this.stopper.abort(new Error('another operator follows this log'));
      this.wake?.();
    } catch (error) {
      // The database is away: so is anyone who could take the claim from us.
      this.deps.logger.warn(
        { err: error, build_id: this.target.buildId },
        'could not renew the log claim; following on',
      );
    }
  }

  private async followAll(): Promise<FollowOutcome> {
    // Only this follower stores the build's lines while it holds the claim: what is stored of a
    // container does not change before this follower reads it.
    this.earlyCursors = this.deps.cursors
      .containerCursors(
        this.target.buildId,
        this.target.containers.map((c) => c.name),
      )
      .catch(() => undefined);
    const incomplete: string[] = [];
    for (const container of this.target.containers) {
      let read = false;
      try {
        read = await this.follow(container);
      } catch (error) {
        if (!this.stopper.signal.aborted) {
          this.deps.logger.error(
            { err: error, build_id: this.target.buildId, container: container.name },
            'log follower failed',
          );
        }
      }
      if (!read) incomplete.push(container.name);
      if (this.stopper.signal.aborted && this.abandonReason === undefined) break;
    }
    await this.writing.catch(() => undefined);
    await this.untilStored();
    return { complete: incomplete.length === 0, incomplete, abandoned: this.abandoned };
  }

  /**
   * Waits until LogSink has stored every line handed to it. During a database outage LogSink
   * holds lines in memory and `append` resolves at once: handed on is not yet stored, and the
   * reconciler records the build's end (which closes live streams and lets the Job go) once
   * `done` resolves. One build's writes are stored in call order, so an empty append that is
   * stored (not buffered) means every line before it is. Ends early on stop or abandon; LogSink
   * keeps holding the lines either way.
   */
  private async untilStored(): Promise<void> {
    let attempts = 0;
    while (this.held && !this.stopper.signal.aborted) {
      try {
        if (!(await this.deps.sink.append(this.target.buildId, [])).buffered) {
          this.held = false;
          return;
        }
      } catch (error) {
        this.deps.logger.warn(
          { err: error, build_id: this.target.buildId },
          'could not learn whether held log lines are stored; asking again',
        );
      }
      attempts++;
      await this.waitForChange(backoff(attempts, this.options));
    }
  }

  /** True when the container's log was read to its end (or it never ran). */
  private async follow(container: FollowedContainer): Promise<boolean> {
    const { buildId } = this.target;
    let cursor: LogCursor | undefined;
    let cursorRead = false;
    let failures = 0;
    for (;;) {
      const state = this.states.get(container.name) ?? 'waiting';
      if (this.stopper.signal.aborted) {
        if (this.abandonReason !== undefined && state !== 'skipped') {
          await this.marker(container.name, cursor, this.abandonReason);
          this.abandoned++;
        }
        return state === 'skipped';
      }
      if (state === 'skipped') return true;
      if (state === 'waiting') {
        await this.waitForChange(this.options.retryMaxMs);
        continue;
      }
      if (!cursorRead) {
        // Where to resume is what is stored. While the database cannot say (an outage), wait
        // for it: giving up would skip the container's whole log without a word, and reading
        // from the start would store lines twice.
        try {
          const known = failures === 0 ? await this.earlyCursors : undefined;
          cursor = (
            known ?? (await this.deps.cursors.containerCursors(buildId, [container.name]))
          ).get(container.name);
          cursorRead = true;
        } catch (error) {
          failures++;
          this.deps.logger.warn(
            { err: error, build_id: buildId, container: container.name },
            'could not read where the log resumes; retrying',
          );
          await this.waitForChange(backoff(failures, this.options));
          continue;
        }
        failures = 0;
      }
      if (state === 'gone') {
        await this.marker(container.name, cursor, 'the pod was deleted before its log was read');
        return false;
      }
      const session = new StreamSession(cursor);
      const end = await this.open(container, session);
      cursor = session.cursor;
      if (end === 'ended' && (session.terminatedAtOpen || this.terminated(container.name))) {
        // The server ends a terminated container's stream after its last line.
        this.hand(container, session.finish());
        return true;
      }
      if (end !== 'ended') {
        // A stream that carried lines before it broke was a working one: its break is a first
        // failure, not one more in a row, or a stream cut now and then would wait ever longer.
        failures = session.accepted > 0 ? 1 : failures + 1;
        const retryInMs = backoff(failures, this.options);
        if (!this.stopper.signal.aborted) {
          this.deps.logger.info(
            {
              err: end.reason,
              build_id: buildId,
              container: container.name,
              failures,
              retry_in_ms: Math.round(retryInMs),
            },
            end.stalled ? 'log stream stalled; reopening it' : 'log stream broke; reopening it',
          );
        }
        await this.waitForChange(retryInMs);
      } else {
        // Ended while the container runs (rotation, the API server), or the pod's end is not
        // observed yet: reopen after a moment.
        failures = 0;
        await this.waitForChange(this.options.retryBaseMs);
      }
    }
  }

  /** One stream: 'ended' when the server ended it, or why it did not. */
  private async open(
    container: FollowedContainer,
    session: StreamSession,
  ): Promise<'ended' | StreamFailure> {
    session.terminatedAtOpen = this.terminated(container.name);
    const abort = new AbortController();
    const onStop = () => abort.abort(this.stopper.signal.reason);
    this.stopper.signal.addEventListener('abort', onStop, { once: true });
    let stalled = false;
    let timer: NodeJS.Timeout | undefined;
    const armStall = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        if (this.states.get(container.name) !== 'running') return armStall();
        stalled = true;
        abort.abort(new Error('log stream stalled'));
      }, this.options.stallMs);
    };
    armStall();
    try {
      await this.deps.logs.stream(
        {
          namespace: this.target.namespace,
          pod: this.target.pod,
          container: container.name,
        },
        {
          follow: true,
          ...(session.cursor === undefined ? {} : { sinceTime: wholeSecond(session.cursor.tsMs) }),
        },
        (text) => {
          armStall();
          this.hand(container, session.take(text));
          if (
            this.unanswered <= this.options.maxUnansweredLines &&
            !this.held &&
            this.deps.budget?.exceeded !== true
          )
            return undefined;
          // Paused on kiln's side is not a stalled stream.
          clearTimeout(timer);
          return this.catchUp().then(armStall);
        },
        abort.signal,
      );
      return 'ended';
    } catch (error) {
      return { reason: error, stalled };
    } finally {
      clearTimeout(timer);
      this.stopper.signal.removeEventListener('abort', onStop);
      session.dropPartial();
    }
  }

  /** Lines go to the sink in order, one append at a time. */
  private hand(container: FollowedContainer, lines: readonly ParsedLine[]): void {
    if (lines.length === 0) return;
    // Lines of one kubelet write share their timestamp, and so one Date.
    let ts = new Date(lines[0]!.tsMs);
    const { name, format } = container;
    const batch: LogLineInput[] = lines.map((line) => {
      if (line.tsMs !== ts.getTime()) ts = new Date(line.tsMs);
      return format === undefined
        ? { text: line.text, ts, container: name }
        : { text: line.text, ts, container: name, format };
    });
    this.append(batch);
  }

  /**
   * Hands lines to LogSink after what was handed before. While an append is out, lines read
   * meanwhile wait here and go in the next append together (up to MAX_APPEND_LINES): a stream
   * read in many small chunks costs one append per database round trip, not one per chunk.
   */
  private append(lines: readonly LogLineInput[]): void {
    this.unanswered += lines.length;
    for (const line of lines) {
      this.pending.push(line);
      this.deps.budget?.take(line.text.length);
    }
    if (!this.appending) {
      this.appending = true;
      this.writing = this.appendPending();
    }
  }

  /** Appends what is pending until nothing is, noting whether LogSink stored or holds it. */
  private async appendPending(): Promise<void> {
    try {
      while (this.pending.length > 0) {
        const batch = this.pending.splice(0, MAX_APPEND_LINES);
        try {
          if ((await this.deps.sink.append(this.target.buildId, batch)).buffered) this.held = true;
        } catch (error) {
          // LogSink refused the lines for good (the build is gone): nothing to retry.
          this.deps.logger.warn(
            { err: error, build_id: this.target.buildId, lines: batch.length },
            'log lines could not be stored',
          );
        } finally {
          this.unanswered -= batch.length;
          const budget = this.deps.budget;
          if (budget !== undefined) for (const line of batch) budget.give(line.text.length);
        }
      }
    } finally {
      this.appending = false;
    }
  }

  /**
   * Backpressure: a stream that prints faster than Postgres stores, or while the database is
   * away (LogSink holding lines in memory), is not read on until what was handed on is stored.
   * What is not read stays with the kubelet (the container's log file), so memory stays bounded
   * and LogSink's hold never has to drop a line.
   */
  private async catchUp(): Promise<void> {
    await this.writing.catch(() => undefined);
    await this.untilStored();
  }

  private async marker(container: string, cursor: LogCursor | undefined, why: string) {
    const since =
      cursor === undefined
        ? 'all of its lines'
        : `its lines after ${new Date(cursor.tsMs).toISOString()}`;
    const text = `WARN: [kiln] ${why}: ${since} from container ${container} are missing`;
    this.append([{ text, container: 'kiln' }]);
    await this.writing.catch(() => undefined);
  }

  private terminated(container: string): boolean {
    return this.states.get(container) === 'terminated';
  }

  private waitForChange(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/** The API's sinceTime filters at whole seconds: ask from the second of the cursor. */
function wholeSecond(tsMs: number): string {
  return new Date(Math.floor(tsMs / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** Why a stream ended before the server ended it: it broke, or sent nothing for `stallMs`. */
interface StreamFailure {
  readonly reason: unknown;
  readonly stalled: boolean;
}

function backoff(failures: number, options: LogFollowerOptions): number {
  return jitteredDelay(failures, options.retryBaseMs, options.retryMaxMs, Math.random);
}
