import { spawn } from 'node:child_process';
import { GIT_CREDENTIAL_HELPER } from '../build-methods/source-container.js';
import { carriesCredentials, withoutCredentials } from '../common/url-credentials.js';
import { childEnvironment } from '../runners/local/child-env.js';

/** A project's git credentials, as builds get them. */
export interface GitCredentials {
  readonly username: string;
  readonly password: string;
}

/** How one run of git ended. */
export interface GitExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  /** The end of what git printed on stderr. */
  readonly stderr: string;
  /** Its stdout passed `maxOutputBytes`: it was killed and `stdout` is cut short. */
  readonly outputLimitReached: boolean;
}

export interface GitRunOptions {
  /** The whole environment of git: nothing is inherited from kiln's own. */
  readonly env: Readonly<Record<string, string>>;
  /** Kills git and everything it started (its process group) when it aborts. */
  readonly signal: AbortSignal;
  readonly maxOutputBytes: number;
}

/**
 * Runs `git <args>` to its end: the edge lsRemote crosses, injected so that a test can watch
 * what git is started with. Rejects only when git could not be started.
 */
export type RunGit = (args: readonly string[], options: GitRunOptions) => Promise<GitExit>;

export interface LsRemoteOptions {
  /** The variables kiln's children inherit (KilnConfig.childEnvironment); never kiln's own. */
  readonly inherited: Readonly<Record<string, string>>;
  /** Given to git through the builds' credential helper: never in the URL or an argument. */
  readonly credentials?: GitCredentials | undefined;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly runGit?: RunGit;
}

/** Why a repository's refs could not be listed; its message names no credentials. */
export class LsRemoteError extends Error {
  override readonly name = 'LsRemoteError';
}

/** The protocols a project's repository URL may use (projects.service.ts), as for the source container. */
const ALLOWED_PROTOCOLS = 'https:ssh:git';
/** Far beyond the refs of any repository kiln builds; a remote that sends more is refused. */
const MAX_OUTPUT_BYTES = 32 * 1024 * 1024;
const STDERR_TAIL_BYTES = 4 * 1024;
const REF_LINE = /^([0-9a-f]{40}|[0-9a-f]{64})\t(refs\/(?:heads|tags)\/\S+)$/;
const PEELED = '^{}';

/**
 * The branches and tags of a remote repository, full ref (`refs/heads/main`, `refs/tags/v1`) →
 * commit, read with `git ls-remote`. An annotated tag maps to the commit it points at, not to
 * its tag object: the commit is what a build checks out. git runs with the allowlisted
 * environment and no git configuration of the machine's (so no credential helper or stored
 * credentials but the project's, as in a build's source container), never asks on a terminal,
 * speaks only https, ssh and git, and is killed at `timeoutMs` or when `signal` aborts. A URL
 * with credentials in it is refused. Fails with LsRemoteError.
 */
export async function lsRemote(
  url: string,
  options: LsRemoteOptions,
): Promise<ReadonlyMap<string, string>> {
  const shown = withoutCredentials(url);
  if (carriesCredentials(url)) {
    throw new LsRemoteError(
      `${shown} was not listed: the URL carries credentials; they belong in the project's git credentials`,
    );
  }
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(), options.timeoutMs);
  const cancel = (): void => stop.abort();
  options.signal?.addEventListener('abort', cancel, { once: true });
  if (options.signal?.aborted === true) stop.abort();
  let exit: GitExit;
  try {
    exit = await (options.runGit ?? runGit)(['ls-remote', '--heads', '--tags', '--', url], {
      env: gitEnvironment(options.inherited, options.credentials),
      signal: stop.signal,
      maxOutputBytes: MAX_OUTPUT_BYTES,
    });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new LsRemoteError(
      `listing the refs of ${shown} failed: git could not be started (${reason})`,
    );
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', cancel);
  }
  if (options.signal?.aborted === true) {
    throw new LsRemoteError(`listing the refs of ${shown} was cancelled`);
  }
  if (stop.signal.aborted) {
    throw new LsRemoteError(
      `listing the refs of ${shown} timed out after ${options.timeoutMs / 1000} s`,
    );
  }
  if (exit.outputLimitReached) {
    throw new LsRemoteError(
      `listing the refs of ${shown} failed: the remote listed more than ${MAX_OUTPUT_BYTES} bytes of refs`,
    );
  }
  if (exit.code !== 0) {
    const last = exit.stderr.trim().split('\n').at(-1)?.trim();
    const why =
      last === undefined || last === '' ? `git exited with ${exit.code ?? exit.signal}` : last;
    throw new LsRemoteError(`listing the refs of ${shown} failed: ${withoutCredentials(why)}`);
  }
  return refsOf(exit.stdout);
}

/** ls-remote's `<sha>\t<ref>` lines as ref → commit, a peeled tag's `^{}` line winning. */
function refsOf(output: string): ReadonlyMap<string, string> {
  const refs = new Map<string, string>();
  const peeled = new Map<string, string>();
  for (const line of output.split('\n')) {
    const match = REF_LINE.exec(line);
    if (match === null) continue;
    const [, sha, ref] = match as unknown as [string, string, string];
    if (ref.endsWith(PEELED)) peeled.set(ref.slice(0, -PEELED.length), sha);
    else refs.set(ref, sha);
  }
  for (const [ref, sha] of peeled) if (refs.has(ref)) refs.set(ref, sha);
  return refs;
}

function gitEnvironment(
  inherited: Readonly<Record<string, string>>,
  credentials: GitCredentials | undefined,
): Record<string, string> {
  return childEnvironment(
    inherited,
    'git',
    {},
    {
      GIT_TERMINAL_PROMPT: '0',
      GIT_ALLOW_PROTOCOL: ALLOWED_PROTOCOLS,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      ...(credentials === undefined
        ? {}
        : {
            KILN_GIT_USERNAME: credentials.username,
            KILN_GIT_PASSWORD: credentials.password,
            GIT_CONFIG_COUNT: '1',
            GIT_CONFIG_KEY_0: 'credential.helper',
            GIT_CONFIG_VALUE_0: GIT_CREDENTIAL_HELPER,
          }),
    },
  );
}

/** RunGit on this machine: git in a process group of its own, so a kill reaches its helpers. */
export const runGit: RunGit = (args, options) =>
  new Promise((resolve, reject) => {
    if (options.signal.aborted) {
      resolve({ code: null, signal: 'SIGKILL', stdout: '', stderr: '', outputLimitReached: false });
      return;
    }
    const child = spawn('git', args, {
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    let outputLimitReached = false;
    const kill = (): void => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    options.signal.addEventListener('abort', kill, { once: true });
    child.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > options.maxOutputBytes) {
        outputLimitReached = true;
        kill();
      } else {
        stdout.push(chunk);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-STDERR_TAIL_BYTES);
    });
    child.once('error', (error) => {
      options.signal.removeEventListener('abort', kill);
      reject(error);
    });
    child.once('close', (code, signal) => {
      options.signal.removeEventListener('abort', kill);
      kill(); // a helper git started and left behind
      resolve({
        code,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr,
        outputLimitReached,
      });
    });
  });
