import { GIT_CREDENTIAL_HELPER } from '../../build-methods/job.js';
import { withoutCredentials } from '../../common/url-credentials.js';
import { BuildFailure, failureMessage } from './build-failure.js';
import type { BuildRun } from './build-run.js';

/**
 * Clones the build's repository into its source directory at the spec's branch, then checks out
 * its commit. The project's credentials reach git through a credential helper in its environment:
 * never in the URL, an argument or a file (the same helper as the operator's source container).
 * The branch may be a tag (a trigger's tag build): the clone fetches tags, so git finds it.
 */
export async function checkOut(run: BuildRun, repository: string): Promise<void> {
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
  if (run.cancelled) return;
  if (clone.code !== 0) {
    throw new BuildFailure(
      'BuildFailed',
      `cloning ${withoutCredentials(repository)} failed: ${failureMessage(clone.tail, clone.code)}`,
    );
  }
  if (commit !== null) await checkOutCommit(run, repository, commit);
  if (run.cancelled) return;
  // The commit built, as the operator's source container prints it: the build's provenance
  // reads it from this line of the log (a branch head is known only now).
  await run.runTool({
    tool: 'git',
    args: ['log', '-1', '--format=kiln: checked out %H'],
    container: 'checkout',
    cwd: run.source,
  });
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
