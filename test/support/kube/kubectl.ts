import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..', '..');

/**
 * kubectl 1.34 and helm 4 as the project installs them (scripts/kube-tools.sh, run by `make test`
 * and by jest's global setup): under .tools/kube/, checked against scripts/kube-tools.sha256,
 * never whatever kubectl or helm is on PATH.
 */
export const KUBECTL = join(ROOT, '.tools', 'kube', 'kubectl');
export const HELM = join(ROOT, '.tools', 'kube', 'helm');

/** Fails with the command that installs them when the project's kubectl or helm is missing. */
export function requireKubeTools(): void {
  for (const tool of [KUBECTL, HELM]) {
    if (!existsSync(tool))
      throw new Error(`${tool} is missing: run \`bash scripts/kube-tools.sh\` (make test runs it)`);
  }
}

export interface KubectlRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** One of the tools, run asynchronously (a double in this process must keep serving). */
function run(
  tool: string,
  args: string[],
  options: { timeout: number; maxBuffer?: number; env: NodeJS.ProcessEnv },
): Promise<KubectlRun> {
  requireKubeTools();
  return new Promise((resolve) => {
    execFile(tool, args, options, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * kubectl with a kubeconfig, with `dir` as its HOME and cache directory so nothing of the user's
 * is read or written.
 */
export const kubectlWith = (
  kubeconfig: string,
  dir: string,
  ...args: string[]
): Promise<KubectlRun> =>
  run(
    KUBECTL,
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
  );

/** helm with a kubeconfig, its HOME and caches in `dir`, like kubectlWith. */
export const helmWith = (kubeconfig: string, dir: string, ...args: string[]): Promise<KubectlRun> =>
  run(HELM, ['--kubeconfig', kubeconfig, ...args], {
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
    env: {
      ...process.env,
      HOME: dir,
      HELM_CACHE_HOME: join(dir, 'helm', 'cache'),
      HELM_CONFIG_HOME: join(dir, 'helm', 'config'),
      HELM_DATA_HOME: join(dir, 'helm', 'data'),
    },
  });
