import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { GitRepo } from './git-repo.js';
import { freePort } from './processes.js';

const START_MS = 15_000;
const OUTPUT_TAIL = 4_000;

/**
 * A real `git daemon` on 127.0.0.1 serving the bare repositories under `basePath` as
 * `git://127.0.0.1:<port>/<name>`, pushes included (receive-pack is enabled). It can be stopped
 * and started again on the same port, so a client sees its remote go away and come back.
 */
export class GitDaemon {
  readonly basePath = mkdtempSync('/dev/shm/kiln-git-daemon-');
  private port: number | undefined;
  private child: ChildProcess | undefined;
  private output = '';

  /** Starts the daemon (on the port it had before, if it ran) and waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.child !== undefined) throw new Error('the git daemon is running already');
    this.port ??= await freePort();
    this.output = '';
    // prettier-ignore
    const child = spawn('git', [
      'daemon', '--export-all', '--reuseaddr', '--informative-errors', '--enable=receive-pack',
      `--base-path=${this.basePath}`, '--listen=127.0.0.1', `--port=${this.port}`, this.basePath,
    ], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    child.stderr?.on('data', (chunk: Buffer) => {
      this.output = (this.output + chunk.toString()).slice(-OUTPUT_TAIL);
    });
    this.child = child;
    const deadline = Date.now() + START_MS;
    while (!(await accepts(this.port))) {
      if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
        await this.stop();
        throw new Error(`git daemon did not start on port ${this.port}:\n${this.output}`);
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  }

  /** Stops the daemon and the connections it serves (its whole process group); keeps the repositories. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child?.pid === undefined) return;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((done) => child.once('exit', done));
      signalGroup(child.pid, 'SIGTERM');
      await exited;
    }
    signalGroup(child.pid, 'SIGKILL'); // a connection's process it left behind
  }

  /** Stops the daemon and removes its repositories. */
  async remove(): Promise<void> {
    await this.stop();
    await rm(this.basePath, { recursive: true, force: true });
  }

  /** `git://127.0.0.1:<port>/<name>` (the port is known once the daemon was started). */
  url(name: string): string {
    if (this.port === undefined) throw new Error('start the git daemon first');
    return `git://127.0.0.1:${this.port}/${name}`;
  }

  /** A new, empty bare repository `<basePath>/<name>` (e.g. `app.git`). */
  bareRepository(name: string): BareRepository {
    const path = join(this.basePath, name);
    mkdirSync(path, { recursive: true });
    git(path, 'init', '--quiet', '--bare', '--initial-branch', 'main');
    return new BareRepository(this, name, path);
  }
}

/**
 * A bare repository the daemon serves, changed only by real pushes (`git push` over git://) from
 * a working copy, as a developer changes a remote.
 */
export class BareRepository {
  constructor(
    private readonly daemon: GitDaemon,
    readonly name: string,
    readonly path: string,
  ) {}

  get url(): string {
    return this.daemon.url(this.name);
  }

  /** Commits `files` on `branch` in the working copy and pushes the branch (forced); the commit's sha. */
  pushCommit(repo: GitRepo, branch: string, files: Record<string, string>): string {
    const sha = repo.commit(branch, files);
    repo.git('push', '--quiet', this.url, `+${sha}:refs/heads/${branch}`);
    return sha;
  }

  /**
   * Pushes tag `tag` at commit `sha` (moving it if it exists): a lightweight tag, or an annotated
   * one (a tag object of its own that points at the commit).
   */
  pushTag(repo: GitRepo, tag: string, sha: string, options: { annotated?: boolean } = {}): void {
    if (options.annotated === true) {
      repo.git('tag', '--force', '--annotate', '--message', `release ${tag}`, tag, sha);
      repo.git('push', '--quiet', this.url, `+refs/tags/${tag}:refs/tags/${tag}`);
    } else {
      repo.git('push', '--quiet', this.url, `+${sha}:refs/tags/${tag}`);
    }
  }

  /** Deletes `branch` on the remote. */
  deleteBranch(repo: GitRepo, branch: string): void {
    repo.git('push', '--quiet', this.url, `:refs/heads/${branch}`);
  }

  /** The remote's commit of a full ref, read from the repository itself (not through the daemon). */
  commitOf(ref: string): string {
    return git(this.path, 'rev-parse', '--verify', `${ref}^{commit}`).trim();
  }
}

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group is gone already
  }
}
