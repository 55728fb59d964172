import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { branchNameProblem, isValidBranchName } from './git-ref.js';

const accepted = [
  'main',
  'feature/x',
  'release-1.2',
  'a/b/c',
  'fix-ü',
  '日本語/ブランチ',
  'rocket-🚀',
  'a.lock.x',
  'a./b',
  'lock',
  'a@b',
  'a{b}',
  'x@',
  'HEAD/a',
  'a/HEAD',
  'a/-b',
  'a'.repeat(255),
  '🚀'.repeat(255),
];

const rejected: [name: string, problem: string][] = [
  ['', 'must not be empty'],
  ['-x', "must not start with '-'"],
  ['@', "must not be '@'"],
  ['HEAD', "must not be 'HEAD'"],
  ['a..b', "must not contain '..'"],
  ['a/.b', "no '/'-separated part may start with '.'"],
  ['.a', "no '/'-separated part may start with '.'"],
  ['a.lock', "no '/'-separated part may end with '.lock'"],
  ['a/b.lock', "no '/'-separated part may end with '.lock'"],
  ['a.lock/b', "no '/'-separated part may end with '.lock'"],
  ['a//b', "must not start or end with '/' or contain '//'"],
  ['/a', "must not start or end with '/' or contain '//'"],
  ['a/', "must not start or end with '/' or contain '//'"],
  ['a.', "must not end with '.'"],
  ['a b', 'must not contain spaces'],
  ['a~b', "must not contain '~'"],
  ['a^b', "must not contain '^'"],
  ['a:b', "must not contain ':'"],
  ['a?b', "must not contain '?'"],
  ['a*b', "must not contain '*'"],
  ['a[b', "must not contain '['"],
  ['a\\b', "must not contain '\\'"],
  ['a@{b', "must not contain '@{'"],
  ['@{-1}', "must not contain '@{'"],
  ['a\x00b', 'must not contain control characters'],
  ['a\x01b', 'must not contain control characters'],
  ['a\tb', 'must not contain control characters'],
  ['a\nb', 'must not contain control characters'],
  ['a\x1fb', 'must not contain control characters'],
  ['a\x7fb', 'must not contain control characters'],
  ['a'.repeat(256), 'must be at most 255 characters'],
];

/** A test-title form of a name: control characters escaped, long runs abbreviated. */
const show = (name: string): string =>
  name.length > 40
    ? `${JSON.stringify([...name][0])} × ${[...name].length}`
    : JSON.stringify(name).replace(/\x7f/g, '\\u007f');

/** Names git accepts that we reject on purpose: the bare "@" and anything over 255 characters. */
const strongerThanGit = (name: string): boolean => name === '@' || [...name].length > 255;

describe(isValidBranchName.name, () => {
  // Outside any repository, so git does not expand `@{-N}` or "@" against a real checkout.
  let cwd: string;
  const gitAccepts = (name: string): boolean =>
    spawnSync('git', ['check-ref-format', '--branch', name], {
      cwd,
      env: { ...process.env, GIT_CEILING_DIRECTORIES: dirname(cwd) },
      stdio: 'ignore',
    }).status === 0;

  beforeAll(() => {
    cwd = mkdtempSync(join(tmpdir(), 'kiln-git-ref-'));
  });

  afterAll(() => {
    rmSync(cwd, { recursive: true, force: true });
  });

  it.each(accepted.map((name) => [show(name), name]))('accepts %s', (_shown, name) => {
    expect(branchNameProblem(name)).toBeUndefined();
    expect(isValidBranchName(name)).toBe(true);
  });

  it.each(rejected.map(([name, problem]) => [show(name), problem, name]))(
    'rejects %s (%s)',
    (_shown, problem, name) => {
      expect(branchNameProblem(name)).toBe(problem);
      expect(isValidBranchName(name)).toBe(false);
    },
  );

  it('agrees with git on every table example it can pass to git, except where it is stricter', () => {
    const passable = [...accepted, ...rejected.map(([name]) => name)].filter(
      (name) => !name.includes('\x00'),
    );
    for (const name of passable) {
      const expected = strongerThanGit(name) ? false : gitAccepts(name);
      expect({ name, valid: isValidBranchName(name) }).toEqual({ name, valid: expected });
    }
  });

  it('rejects the bare "@" although git accepts it as a branch name', () => {
    expect(gitAccepts('@')).toBe(true);
    expect(isValidBranchName('@')).toBe(false);
  });

  it('agrees with git check-ref-format --branch on random names rich in special characters', () => {
    const alphabet = [...'./-_@{}~^:?*[\\ ', ...'abcxyzAZ019', ...'üé日🚀', ...'\t\x01\x7f'];
    const names = fc.string({ unit: fc.constantFrom(...alphabet), minLength: 0, maxLength: 40 });
    fc.assert(
      fc.property(names, (name) => {
        fc.pre(!strongerThanGit(name));
        expect({ name, valid: isValidBranchName(name) }).toEqual({
          name,
          valid: gitAccepts(name),
        });
      }),
      { numRuns: 300 },
    );
  }, 60_000);
});
