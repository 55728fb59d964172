import { rm } from 'node:fs/promises';
import { GIT_CREDENTIAL_HELPER } from '../../build-methods/job.js';
import { withoutCredentials } from '../../common/url-credentials.js';
import { BuildFailure, failureMessage } from './build-failure.js';
import type { BuildRun } from './build-run.js';

/** A commit git can fetch by itself: a full object name (SHA-1, or SHA-256). */
const FULL_COMMIT = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/** The source is in place; the commit it holds is printed beside what runs next. */
export interface CheckedOut {
  /**
   * Settles once `kiln: checked out <sha>` (the commit the build's provenance names) is in the
   * log; starts the read if no child of the build has started since the checkout. It rejects as
   * any child of the build does (it could not be started, or its lines could not be stored); a
   * read that exits non-zero prints no line and the build goes on, as before.
   */
  commitPrinted(): Promise<void>;
}

const NOTHING_PRINTED: CheckedOut = { commitPrinted: () => Promise.resolve() };

/**
 * Checks the build's repository out into its source directory (docs/adr/0057-shallow-checkout.md):
 * the branch's (or tag's) head alone when no commit is pinned; a pinned commit fetched alone
 * when the server allows it, else from a full clone as before. The project's credentials reach
 * git through a credential helper in its environment: never in the URL, an argument or a file
 * (the same helper as the operator's source container).
 *
 * Nothing waits for the commit to be read: the caller runs the build and then awaits
 * `commitPrinted()`, before the outcome and the provenance that reads the line.
 */
export async function checkOut(run: BuildRun, repository: string): Promise<CheckedOut> {
  const { commit } = run.build.spec.source;
  if (commit === null) {
    await clone(run, repository, ['--depth', '1', '--single-branch', '--no-tags']);
  } else {
    await checkOutCommit(run, repository, commit);
  }
  if (run.cancelled) return NOTHING_PRINTED;
  let printed: Promise<void> | undefined;
  let started = false;
  const print = (): Promise<void> => {
    // Once only; the read is itself the next child when no other started before it.
    if (started) return printed ?? Promise.resolve();
    started = true;
    printed = run.stopped
      ? Promise.resolve()
      : run
          .runTool({
            tool: 'git',
            args: ['log', '-1', '--format=kiln: checked out %H'],
            container: 'checkout',
            cwd: run.source,
          })
          .then(() => undefined);
    // Awaited once the build has run; until then its failure must not count as unhandled.
    printed.catch(() => undefined);
    return printed;
  };
  // Its spawn and its line would hold the builder back: it starts once the builder has started.
  run.afterNextStart(() => void print());
  return { commitPrinted: print };
}

/**
 * A pinned commit. Fetched alone (after a shallow clone of the branch, which says, as before,
 * whether the branch exists) when it is named in full and the server sends unadvertised commits
 * (protocol v2 servers and most forges do); otherwise, or when that fetch fails, the whole
 * repository is cloned, as before this change, so a commit the server would not send alone
 * still builds and a commit that is not there fails as it did.
 */
async function checkOutCommit(run: BuildRun, repository: string, commit: string): Promise<void> {
  if (FULL_COMMIT.test(commit)) {
    await clone(run, repository, ['--depth', '1', '--single-branch', '--no-tags', '--no-checkout']);
    if (run.cancelled) return;
    const fetch = await run.runTool({
      tool: 'git',
      args: ['fetch', '--depth', '1', '--no-tags', '--', 'origin', commit],
      container: 'checkout',
      cwd: run.source,
      own: credentialsOf(run),
    });
    if (run.cancelled) return;
    if (fetch.code === 0) {
      await switchTo(run, repository, commit);
      return;
    }
    await run.say(`the repository did not send commit ${commit} alone; cloning all of it`);
    await rm(run.source, { recursive: true, force: true });
  }
  await clone(run, repository, []);
  if (run.cancelled) return;
  await switchTo(run, repository, commit);
}

/** `git clone` of the spec's branch (or tag: `--branch` takes either) with `options`. */
async function clone(run: BuildRun, repository: string, options: string[]): Promise<void> {
  const { branch } = run.build.spec.source;
  const clone = await run.runTool({
    tool: 'git',
    args: [
      'clone',
      ...options,
      ...(branch === null ? [] : ['--branch', branch]),
      '--',
      repository,
      run.source,
    ],
    container: 'checkout',
    cwd: run.dir,
    own: credentialsOf(run),
  });
  if (run.cancelled) return;
  if (clone.code !== 0) {
    throw new BuildFailure(
      'BuildFailed',
      `cloning ${withoutCredentials(repository)} failed: ${failureMessage(clone.tail, clone.code)}`,
    );
  }
}

async function switchTo(run: BuildRun, repository: string, commit: string): Promise<void> {
  const { branch } = run.build.spec.source;
  const checkout = await run.runTool({
    tool: 'git',
    args: ['-c', 'advice.detachedHead=false', 'checkout', commit],
    container: 'checkout',
    cwd: run.source,
  });
  if (run.cancelled) return;
  if (checkout.code !== 0) {
    throw new BuildFailure(
      'InvalidSpec',
      `commit ${commit} is not in ${withoutCredentials(repository)}${branch === null ? '' : ` (branch ${branch})`}`,
    );
  }
}

/** What git needs to ask for the project's credentials, when it has any. */
function credentialsOf(run: BuildRun): Record<string, string> {
  const git = run.access?.git;
  return git === undefined
    ? {}
    : {
        KILN_GIT_USERNAME: git.username,
        KILN_GIT_PASSWORD: git.password,
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'credential.helper',
        GIT_CONFIG_VALUE_0: GIT_CREDENTIAL_HELPER,
      };
}
