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
    const branches = this.git('branch', '--list', branch).trim();
    this.git(
      'checkout',
      '--quiet',
      ...(branches === '' && branch !== 'main' ? ['-b', branch] : [branch]),
    );
    for (const [name, content] of Object.entries(files)) {
      if (typeof content === 'string') writeFileSync(join(this.dir, name), content);
      else copyFileSync(content.copyFrom, join(this.dir, name));
    }
    this.git('add', '.');
    this.git('commit', '--quiet', '-m', `update ${branch}`);
    const head = this.git('rev-parse', 'HEAD').trim();
    this.git('checkout', '--quiet', 'main');
    return head;
  }
}
