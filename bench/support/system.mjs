// What the benches ask of the machine: whether a tool is installed, and git in a directory.
import { execFileSync } from 'node:child_process';

/** Whether `tool` is on PATH. */
export function onPath(tool) {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** `git …` in `dir` as a bench's commit author, its output ignored. */
export function gitIn(dir) {
  return (...args) =>
    execFileSync('git', ['-c', 'user.name=kiln', '-c', 'user.email=kiln@example.com', ...args], {
      cwd: dir,
      stdio: 'ignore',
    });
}
