import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { referenceSpec } from '../../../test/support/build-specs.js';
import { GitDaemon } from '../../../test/support/git-daemon.js';
import { GitHttpServer } from '../../../test/support/git-http-server.js';
import { GitRepo } from '../../../test/support/git-repo.js';
import { LogCapture } from '../../../test/support/log-capture.js';
import { createTestTls } from '../../../test/support/tls.js';
import type { BuildAccessGrant } from '../../integrations/build-access.js';
import { childEnvironmentOf } from '../../config/child-environment.js';
import type { KilnConfig } from '../../config/config.js';
import type { LogLineInput, LogSink } from '../../logs/log-sink.js';
import { BuildFailure } from './build-failure.js';
import { BuildRun } from './build-run.js';
import { checkOut } from './checkout.js';
import { HostProcesses } from './processes.js';

/** What a checkout printed, by container. */
interface Printed {
  readonly container: string;
  readonly text: string;
}

/** A build run over real git (HostProcesses) whose log lines are kept in memory. */
function runOf(
  source: { repository: string; branch: string | null; commit: string | null },
  home: string,
  env: Readonly<Record<string, string>> = {},
): { run: BuildRun; printed: Printed[] } {
  const printed: Printed[] = [];
  const sink = {
    append: (_buildId: string, lines: LogLineInput[]) => {
      printed.push(...lines.map(({ container, text }) => ({ container: container ?? '', text })));
      return Promise.resolve();
    },
  } as unknown as LogSink;
  const { logger } = new LogCapture();
  const config = { childEnvironment: childEnvironmentOf({ ...env, HOME: home }) } as KilnConfig;
  const run = new BuildRun(
    {
      id: '00000000-0000-4000-8000-000000000001',
      tenantId: '00000000-0000-4000-8000-000000000002',
      projectId: '00000000-0000-4000-8000-000000000003',
      buildNumber: 1,
      cancelReason: null,
      spec: referenceSpec({ source: { ...source, context: '.' } }),
    },
    mkdtempSync(join(tmpdir(), 'kiln-checkout-')),
    { processes: new HostProcesses(config, logger), sink, logger, maxOutputBytes: 1 << 20 },
  );
  return { run, printed };
}

function git(dir: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd: dir, encoding: 'utf8' }).trim();
}

describe(checkOut.name, () => {
  let repo: GitRepo;
  /** main's commits, oldest first. */
  const main: string[] = [];
  let tagged: string;
  /** A HOME whose git speaks protocol v0, where a server sends no commit it did not advertise. */
  const v0Home = mkdtempSync(join(tmpdir(), 'kiln-git-v0-'));
  const home = mkdtempSync(join(tmpdir(), 'kiln-git-'));
  const runs: BuildRun[] = [];

  beforeAll(() => {
    repo = new GitRepo();
    main.push(repo.git('rev-parse', 'HEAD').trim());
    for (const n of [1, 2, 3]) main.push(repo.commit('main', { 'file.txt': `${n}\n` }));
    repo.git('tag', '--annotate', '--message', 'release', 'v1', main[1] ?? '');
    tagged = main[1] ?? '';
    repo.commit('other', { 'other.txt': 'other\n' });
    writeFileSync(join(v0Home, '.gitconfig'), '[protocol]\n\tversion = 0\n');
  });

  afterAll(async () => {
    for (const dir of [repo.dir, v0Home, home, ...runs.map((run) => run.dir)]) {
      await rm(dir, { recursive: true, force: true });
    }
  });

  async function checkedOut(
    source: { branch: string | null; commit: string | null },
    gitHome = home,
  ): Promise<{ run: BuildRun; printed: Printed[] }> {
    const made = runOf({ repository: repo.url, ...source }, gitHome);
    runs.push(made.run);
    await mkdir(made.run.source, { recursive: true });
    await (await checkOut(made.run, repo.url)).commitPrinted();
    return made;
  }

  const tip = () => main.at(-1) ?? '';
  const printedCommit = (printed: Printed[]) =>
    printed.filter((line) => line.container === 'checkout' && line.text.startsWith('kiln: '));

  it("clones only the branch's head when no commit is pinned, and prints the commit it holds", async () => {
    const { run, printed } = await checkedOut({ branch: 'main', commit: null });

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(tip());
    expect(git(run.source, 'rev-parse', '--is-shallow-repository')).toBe('true');
    expect(git(run.source, 'rev-list', '--all', '--count')).toBe('1');
    expect(git(run.source, 'tag')).toBe('');
    expect(git(run.source, 'branch', '--remotes')).not.toContain('other');
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${tip()}` },
    ]);
  });

  it('clones the default branch the same way when the build names none', async () => {
    const { run, printed } = await checkedOut({ branch: null, commit: null });

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(tip());
    expect(git(run.source, 'rev-list', '--all', '--count')).toBe('1');
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${tip()}` },
    ]);
  });

  it('checks a tag build out at its tag, the tag itself fetched', async () => {
    const { run, printed } = await checkedOut({ branch: 'v1', commit: null });

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(tagged);
    expect(git(run.source, 'describe', '--tags', '--exact-match')).toBe('v1');
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${tagged}` },
    ]);
  });

  it('checks a pinned commit out exactly, fetched alone, though it is not the branch head', async () => {
    const pinned = main[2] ?? '';

    const { run, printed } = await checkedOut({ branch: 'main', commit: pinned });

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(pinned);
    expect(git(run.source, 'rev-parse', '--is-shallow-repository')).toBe('true');
    expect(git(run.source, 'status', '--porcelain')).toBe('');
    expect(printed.map((line) => line.text)).not.toContainEqual(
      expect.stringContaining('cloning all of it'),
    );
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${pinned}` },
    ]);
  });

  it('clones the whole repository when the server will not send the pinned commit alone, and checks it out', async () => {
    const pinned = main[1] ?? '';

    const { run, printed } = await checkedOut({ branch: 'main', commit: pinned }, v0Home);

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(pinned);
    expect(git(run.source, 'rev-parse', '--is-shallow-repository')).toBe('false');
    expect(printed).toContainEqual({
      container: 'kiln',
      text: `[kiln] the repository did not send commit ${pinned} alone; cloning all of it`,
    });
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${pinned}` },
    ]);
  });

  it('checks out an abbreviated pinned commit from a full clone, as before', async () => {
    const pinned = main[1] ?? '';

    const { run, printed } = await checkedOut({ branch: 'main', commit: pinned.slice(0, 10) });

    expect(git(run.source, 'rev-parse', 'HEAD')).toBe(pinned);
    expect(printedCommit(printed)).toEqual([
      { container: 'checkout', text: `kiln: checked out ${pinned}` },
    ]);
  });

  it('fails a pinned commit the repository does not hold as InvalidSpec, naming it', async () => {
    const missing = 'f'.repeat(40);

    await expect(checkedOut({ branch: 'main', commit: missing })).rejects.toEqual(
      new BuildFailure('InvalidSpec', `commit ${missing} is not in ${repo.url} (branch main)`),
    );
  });

  it.each([
    ['no commit is pinned', null],
    ['a commit is pinned', 'a'.repeat(40)],
  ])('fails a branch the repository does not have as BuildFailed when %s', async (_, commit) => {
    const failure = checkedOut({ branch: 'nowhere', commit });

    await expect(failure).rejects.toBeInstanceOf(BuildFailure);
    await expect(failure).rejects.toMatchObject({
      reason: 'BuildFailed',
      message: expect.stringMatching(
        new RegExp(`^cloning ${repo.url} failed: .*Remote branch nowhere not found`),
      ) as unknown,
    });
  });
  describe('over smart HTTP with Basic credentials', () => {
    const daemon = new GitDaemon();
    const caDir = mkdtempSync(join(tmpdir(), 'kiln-checkout-ca-'));
    const credentials = { username: 'kiln-bot', password: 'pa55-word-in-helper' };
    let server: GitHttpServer;
    let caFile: string;
    const work = new GitRepo();
    let pinned: string;

    beforeAll(async () => {
      const tls = createTestTls();
      caFile = join(caDir, 'ca.crt');
      writeFileSync(caFile, tls.ca);
      await daemon.start();
      const remote = daemon.bareRepository('private.git');
      pinned = remote.pushCommit(work, 'main', { 'a.txt': 'a' });
      remote.pushCommit(work, 'main', { 'b.txt': 'b' });
      server = await GitHttpServer.start({ root: daemon.basePath, ...credentials, tls });
    });

    afterAll(async () => {
      await server.stop();
      await daemon.remove();
      await rm(caDir, { recursive: true, force: true });
      await rm(work.dir, { recursive: true, force: true });
    });

    it('fetches a pinned commit alone with the credentials from the helper, and checks it out', async () => {
      const url = server.url('private.git');
      const { run, printed } = runOf({ repository: url, branch: 'main', commit: pinned }, home, {
        GIT_SSL_CAINFO: caFile,
      });
      runs.push(run);
      run.access = { git: credentials } as BuildAccessGrant;
      await mkdir(run.source, { recursive: true });

      const checkedOut = await checkOut(run, url);
      await checkedOut.commitPrinted();

      expect(git(run.source, 'rev-parse', 'HEAD')).toBe(pinned);
      expect(git(run.source, 'rev-parse', '--is-shallow-repository')).toBe('true');
      const basic = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
      expect(server.authorizations).toContain(basic);
      expect(git(run.source, 'config', '--get', 'remote.origin.url')).toBe(url);
      expect(printedCommit(printed)).toEqual([
        { container: 'checkout', text: `kiln: checked out ${pinned}` },
      ]);
    });
  });
});
