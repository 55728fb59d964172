import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnvironmentOf } from '../config/child-environment.js';
import { type BareRepository, GitDaemon } from '../../test/support/git-daemon.js';
import { GitHttpServer } from '../../test/support/git-http-server.js';
import { GitRepo } from '../../test/support/git-repo.js';
import { processesMentioning } from '../../test/support/processes.js';
import { createTestTls } from '../../test/support/tls.js';
import { type GitRunOptions, lsRemote, LsRemoteError, type RunGit, runGit } from './ls-remote.js';

const USERNAME = 'kiln-bot';
const PASSWORD = 'hunter2-ls-remote-password';
const TIMEOUT_MS = 20_000;

/** What git was started with, each time; the real git runs. */
function recordingGit(): {
  runGit: RunGit;
  runs: { args: readonly string[]; options: GitRunOptions }[];
} {
  const runs: { args: readonly string[]; options: GitRunOptions }[] = [];
  return {
    runs,
    runGit: (args, options) => {
      runs.push({ args, options });
      return runGit(args, options);
    },
  };
}

async function rejection(promise: Promise<unknown>): Promise<LsRemoteError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(LsRemoteError);
  return error as LsRemoteError;
}

describe('lsRemote', () => {
  const daemon = new GitDaemon();
  const work = new GitRepo();
  const inherited = childEnvironmentOf(process.env);

  beforeAll(() => daemon.start());
  afterAll(async () => {
    await daemon.remove();
    rmSync(work.dir, { recursive: true, force: true });
  });

  describe('against a git daemon', () => {
    let remote: BareRepository;
    let main: string;

    beforeAll(() => {
      remote = daemon.bareRepository('app.git');
      main = remote.pushCommit(work, 'main', { 'README.md': 'one' });
    });

    it('lists the branches and tags a push left, each with its commit', async () => {
      const feature = remote.pushCommit(work, 'feature/login', { 'login.ts': 'x' });
      remote.pushTag(work, 'v1', main);
      remote.pushTag(work, 'v2', feature, { annotated: true });

      const refs = await lsRemote(remote.url, { inherited, timeoutMs: TIMEOUT_MS });

      expect(Object.fromEntries(refs)).toEqual({
        'refs/heads/main': main,
        'refs/heads/feature/login': feature,
        'refs/tags/v1': main,
        'refs/tags/v2': feature,
      });
    });

    it('gives an annotated tag the commit it points at, not its tag object', async () => {
      remote.pushTag(work, 'annotated', main, { annotated: true });
      const tagObject = work.git('rev-parse', 'refs/tags/annotated').trim();

      const refs = await lsRemote(remote.url, { inherited, timeoutMs: TIMEOUT_MS });

      expect(tagObject).not.toBe(main);
      expect(refs.get('refs/tags/annotated')).toBe(main);
    });

    it('follows a branch that moves and forgets one that was deleted', async () => {
      remote.pushCommit(work, 'short-lived', { 'a.txt': 'a' });
      const moved = remote.pushCommit(work, 'main', { 'README.md': 'two' });
      remote.deleteBranch(work, 'short-lived');

      const refs = await lsRemote(remote.url, { inherited, timeoutMs: TIMEOUT_MS });

      expect(refs.get('refs/heads/main')).toBe(moved);
      expect(refs.has('refs/heads/short-lived')).toBe(false);
    });

    it('lists nothing for an empty repository', async () => {
      const empty = daemon.bareRepository('empty.git');

      expect((await lsRemote(empty.url, { inherited, timeoutMs: TIMEOUT_MS })).size).toBe(0);
    });

    it('fails with git’s last line when the repository does not exist', async () => {
      const error = await rejection(
        lsRemote(daemon.url('missing.git'), { inherited, timeoutMs: TIMEOUT_MS }),
      );

      expect(error.message).toBe(
        `listing the refs of ${daemon.url('missing.git')} failed: fatal: remote error: no such repository: /missing.git`,
      );
    });
  });

  it('refuses a URL with credentials in it and starts no git', async () => {
    const git = recordingGit();

    const error = await rejection(
      lsRemote(`https://${USERNAME}:${PASSWORD}@127.0.0.1/app.git`, {
        inherited,
        timeoutMs: TIMEOUT_MS,
        runGit: git.runGit,
      }),
    );

    expect(error.message).toBe(
      "https://127.0.0.1/app.git was not listed: the URL carries credentials; they belong in the project's git credentials",
    );
    expect(git.runs).toEqual([]);
  });

  it('refuses the file:// protocol (https, ssh and git only)', async () => {
    const error = await rejection(lsRemote(work.url, { inherited, timeoutMs: TIMEOUT_MS }));

    expect(error.message).toBe(
      `listing the refs of ${work.url} failed: fatal: transport 'file' not allowed`,
    );
  });

  describe('against a remote that never answers', () => {
    let silent: Server;
    const sockets: Socket[] = [];

    beforeAll(async () => {
      silent = createServer((socket) => sockets.push(socket));
      await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
    });
    afterAll(async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((done) => silent.close(done));
    });

    const url = (): string => `git://127.0.0.1:${(silent.address() as { port: number }).port}/x`;

    it('kills git at the timeout and says so', async () => {
      const error = await rejection(lsRemote(url(), { inherited, timeoutMs: 300 }));

      expect(error.message).toBe(`listing the refs of ${url()} timed out after 0.3 s`);
      expect(processesMentioning(url())).toEqual([]);
    });

    it('kills git when the caller aborts', async () => {
      const abort = new AbortController();
      const listing = lsRemote(url(), { inherited, timeoutMs: TIMEOUT_MS, signal: abort.signal });
      setTimeout(() => abort.abort(), 100);

      const error = await rejection(listing);

      expect(error.message).toBe(`listing the refs of ${url()} was cancelled`);
      expect(processesMentioning(url())).toEqual([]);
    });
  });

  describe('against smart HTTP with Basic credentials', () => {
    let server: GitHttpServer;
    let caFile: string;
    let https: Readonly<Record<string, string>>;
    let commit: string;
    const caDir = mkdtempSync(join(tmpdir(), 'kiln-ls-remote-'));

    beforeAll(async () => {
      const tls = createTestTls();
      caFile = join(caDir, 'ca.crt');
      writeFileSync(caFile, tls.ca);
      https = { ...inherited, GIT_SSL_CAINFO: caFile };
      commit = daemon.bareRepository('private.git').pushCommit(work, 'main', { 'x.txt': 'x' });
      server = await GitHttpServer.start({
        root: daemon.basePath,
        username: USERNAME,
        password: PASSWORD,
        tls,
      });
    });
    afterAll(async () => {
      await server.stop();
      rmSync(caDir, { recursive: true, force: true });
    });
    beforeEach(() => {
      server.authorizations.length = 0;
    });

    it('lists the refs with the credentials given through the credential helper alone', async () => {
      const git = recordingGit();
      const url = server.url('private.git');

      const refs = await lsRemote(url, {
        inherited: https,
        credentials: { username: USERNAME, password: PASSWORD },
        timeoutMs: TIMEOUT_MS,
        runGit: git.runGit,
      });

      expect(Object.fromEntries(refs)).toEqual({ 'refs/heads/main': commit });
      const basic = `Basic ${Buffer.from(`${USERNAME}:${PASSWORD}`).toString('base64')}`;
      expect(server.authorizations).toContain(basic);
      expect(url).not.toContain(PASSWORD);
      expect(git.runs.map(({ args }) => args)).toEqual([
        ['ls-remote', '--heads', '--tags', '--', url],
      ]);
      const env = git.runs[0]!.options.env;
      expect(Object.keys(env).filter((name) => env[name]!.includes(PASSWORD))).toEqual([
        'KILN_GIT_PASSWORD',
      ]);
    });

    it('fails without credentials, sending none', async () => {
      const error = await rejection(
        lsRemote(server.url('private.git'), { inherited: https, timeoutMs: TIMEOUT_MS }),
      );

      expect(error.message).toMatch(
        /^listing the refs of https:\/\/127\.0\.0\.1:\d+\/private\.git failed: .*terminal prompts disabled$/,
      );
      expect(server.authorizations.length).toBeGreaterThan(0);
      expect(server.authorizations.every((header) => header === undefined)).toBe(true);
    });

    it('fails with wrong credentials and never names the password', async () => {
      const wrong = 'not-the-password-4711';

      const error = await rejection(
        lsRemote(server.url('private.git'), {
          inherited: https,
          credentials: { username: USERNAME, password: wrong },
          timeoutMs: TIMEOUT_MS,
        }),
      );

      expect(error.message).toMatch(/failed: .*Authentication failed/);
      expect(error.message).not.toContain(wrong);
      expect(server.authorizations).toContain(
        `Basic ${Buffer.from(`${USERNAME}:${wrong}`).toString('base64')}`,
      );
    });

    it('ignores the credential helpers of the machine’s git configuration', async () => {
      const home = mkdtempSync(join(caDir, 'home-'));
      writeFileSync(
        join(home, '.gitconfig'),
        `[credential]\n\thelper = "!f() { echo username=${USERNAME}; echo password=${PASSWORD}; }; f"\n`,
      );

      const error = await rejection(
        lsRemote(server.url('private.git'), {
          inherited: { ...https, HOME: home },
          timeoutMs: TIMEOUT_MS,
        }),
      );

      expect(error.message).toMatch(/terminal prompts disabled$/);
      expect(server.authorizations.every((header) => header === undefined)).toBe(true);
    });
  });
});
