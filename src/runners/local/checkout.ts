import { GIT_CREDENTIAL_HELPER } from '../../build-methods/job.js';
import { withoutCredentials } from '../../common/url-credentials.js';
import { BuildFailure, failureMessage } from './build-failure.js';
import type { BuildRun } from './build-run.js';

/** The source is in place; the commit it holds is being printed beside what runs next. */
export interface CheckedOut {
  /**
   * Settles once `kiln: checked out <sha>` (the commit the build's provenance names) is in the
   * log. It rejects as any child of the build does (it could not be started, or its lines could
   * not be stored); a read that exits non-zero prints no line and the build goes on, as before.
   */
  readonly commitPrinted: Promise<void>;
}

const NOTHING_PRINTED: CheckedOut = { commitPrinted: Promise.resolve() };

/**
 * Clones the build's repository into its source directory at the spec's branch, then checks out
 * its commit. The project's credentials reach git through a credential helper in its environment:
 * never in the URL, an argument or a file (the same helper as the operator's source container).
 * The branch may be a tag (a trigger's tag build): the clone fetches tags, so git finds it.
 *
 * Nothing waits for the commit to be read: the caller runs the build and then awaits
 * `commitPrinted`, before the outcome and the provenance that reads the line.
 */
export async function checkOut(run: BuildRun, repository: string): Promise<CheckedOut> {
  const { branch, commit } = run.build.spec.source;
  const git = run.access?.git;
  const clone = await run.runTool({
    tool: 'git',
    args: ['clone', ...(branch === null ? [] : ['--branch', branch]), '--', repository, run.source],
    container: 'checkout',
    cwd: run.dir,
    own:
      git === undefined
        ? {}
        : {
            KILN_GIT_USERNAME: git.username,
            KILN_GIT_PASSWORD: git.password,
            GIT_CONFIG_COUNT: '1',
            GIT_CONFIG_KEY_0: 'credential.helper',
            GIT_CONFIG_VALUE_0: GIT_CREDENTIAL_HELPER,
          },
  });
  if (run.cancelled) return NOTHING_PRINTED;
  if (clone.code !== 0) {
    throw new BuildFailure(
      'BuildFailed',
      `cloning ${withoutCredentials(repository)} failed: ${failureMessage(clone.tail, clone.code)}`,
    );
  }
  if (commit !== null) await checkOutCommit(run, repository, commit);
  if (run.cancelled) return NOTHING_PRINTED;
  // The commit built, as the operator's source container prints it: the build's provenance
  // reads it from this line of the log (a branch head is known only now).
  const printed = run
    .runTool({
      tool: 'git',
      args: ['log', '-1', '--format=kiln: checked out %H'],
      container: 'checkout',
      cwd: run.source,
    })
    .then(() => undefined);
  // Awaited once the build has run; until then its failure must not count as unhandled.
  printed.catch(() => undefined);
  return { commitPrinted: printed };
}

async function checkOutCommit(run: BuildRun, repository: string, commit: string): Promise<void> {
  const { branch } = run.build.spec.source;
  const checkout = await run.runTool({
    tool: 'git',
    args: ['-c', 'advice.detachedHead=false', 'checkout', commit],
    container: 'checkout',
    cwd: run.source,
  });
  if (checkout.code !== 0) {
    throw new BuildFailure(
      'InvalidSpec',
      `commit ${commit} is not in ${withoutCredentials(repository)}${branch === null ? '' : ` (branch ${branch})`}`,
    );
  }
}
