/**
 * Git branch-name validation, following `git check-ref-format --branch` (git 2.39): the refname
 * rules of `man git-check-ref-format` applied to `refs/heads/<name>`, plus the `--branch` extras
 * (no leading '-', not "HEAD"). Any "@{" is rejected, as git does outside a repository (inside
 * one it would first expand `@{-N}`). Stricter than git: the bare name "@" (git accepts it as a
 * branch name, but it is the HEAD shorthand in revision syntax) and the length, 1..255 characters
 * (code points, like PostgreSQL's `length()` in the builds table's CHECK constraint).
 */

const MAX_BRANCH_NAME_LENGTH = 255;

/** True when `name` is a branch name git would accept (see the module comment for the extras). */
export function isValidBranchName(name: string): boolean {
  return branchNameProblem(name) === undefined;
}

/** A short human reason why `name` is not a valid branch name, or undefined when it is. */
export function branchNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'must not be empty';
  if ([...name].length > MAX_BRANCH_NAME_LENGTH) {
    return `must be at most ${MAX_BRANCH_NAME_LENGTH} characters`;
  }
  if (name.startsWith('-')) return "must not start with '-'";
  if (name === '@') return "must not be '@'";
  if (name === 'HEAD') return "must not be 'HEAD'";

  const bad = forbiddenCharacter(name);
  if (bad !== undefined) return bad;
  if (name.includes('..')) return "must not contain '..'";
  if (name.includes('@{')) return "must not contain '@{'";

  for (const component of name.split('/')) {
    if (component.length === 0) {
      return "must not start or end with '/' or contain '//'";
    }
    if (component.startsWith('.')) return "no '/'-separated part may start with '.'";
    if (component.endsWith('.lock')) return "no '/'-separated part may end with '.lock'";
  }
  if (name.endsWith('.')) return "must not end with '.'";
  return undefined;
}

const FORBIDDEN = new Set([' ', '~', '^', ':', '?', '*', '[', '\\']);

function forbiddenCharacter(name: string): string | undefined {
  for (const ch of name) {
    const code = ch.codePointAt(0) ?? 0;
    if (code < 0x20 || code === 0x7f) return 'must not contain control characters';
    if (FORBIDDEN.has(ch)) {
      return ch === ' ' ? 'must not contain spaces' : `must not contain '${ch}'`;
    }
  }
  return undefined;
}
