import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, copyFileSync } from 'node:fs';
import { join } from 'node:path';

/** A real git repository on disk that builds clone through file:// URLs. */
export class GitRepo {
  readonly dir = mkdtempSync('/dev/shm/kiln-repo-');

  constructor() {
    this.git('init', '--quiet', '--initial-branch', 'main');
    this.git('commit', '--quiet', '--allow-empty', '-m', 'start');
  }

  get url(): string {
    return `file://${this.dir}`;
  }

  git(...args: string[]): string {
    return execFileSync(
      'git',
      ['-c', 'user.name=kiln', '-c', 'user.email=kiln@example.com', ...args],
      {
        cwd: this.dir,
        encoding: 'utf8',
      },
    );
  }

  /** Writes files (text, or `{ copyFrom }`) and commits them on `branch`, creating it from main. */
  commit(branch: string, files: Record<string, string | { copyFrom: string }>): string {
    // Every commit leaves main checked out: a commit on main needs no checkout (each git process
    // costs tens of milliseconds forked from a test worker, and some suites make hundreds).
    const onMain = branch === 'main';
    if (!onMain) {
      const branches = this.git('branch', '--list', branch).trim();
      this.git('checkout', '--quiet', ...(branches === '' ? ['-b', branch] : [branch]));
    }
    for (const [name, content] of Object.entries(files)) {
      if (typeof content === 'string') writeFileSync(join(this.dir, name), content);
      else copyFileSync(content.copyFrom, join(this.dir, name));
    }
    this.git('add', '.');
    this.git('commit', '--quiet', '-m', `update ${branch}`);
    const head = this.git('rev-parse', 'HEAD').trim();
    if (!onMain) this.git('checkout', '--quiet', 'main');
    return head;
  }
}
