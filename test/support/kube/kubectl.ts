import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * kubectl comes with this project's machines (google-cloud-cli), not with a bare Debian: suites
 * that need it are skipped without it, and say so.
 */
export const kubectlOnPath =
  spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

export interface KubectlRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * kubectl with a kubeconfig, run asynchronously (a double in this process must keep serving),
 * with `dir` as its HOME and cache directory so nothing of the user's is read or written.
 */
export const kubectlWith = (
  kubeconfig: string,
  dir: string,
  ...args: string[]
): Promise<KubectlRun> =>
  new Promise((resolve) => {
    execFile(
      'kubectl',
      [
        '--kubeconfig',
        kubeconfig,
        '--cache-dir',
        join(dir, 'cache'),
        '--request-timeout',
        '10s',
        ...args,
      ],
      { timeout: 15_000, env: { ...process.env, HOME: dir } },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
