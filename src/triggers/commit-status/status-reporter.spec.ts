import { randomBytes, randomUUID } from 'node:crypto';
import { type CommitState, type GitProvider, posterFor } from './commit-status.js';
import {
  backoffMs,
  type BuildLogNote,
  MAX_ATTEMPTS,
  type StatusJob,
  StatusReporter,
  type StatusStore,
  type TokenResolver,
} from './status-reporter.js';
import { FakeGitHost, fakeToken } from '../../../test/support/fake-git-hosts.js';
import { LogCapture } from '../../../test/support/log-capture.js';

/** A claim keeps a build from other replicas for this long (the real store's lease). */
const CLAIM_MS = 60_000;

interface Row {
  job: StatusJob;
  nextAt: Date | null;
  error: string | null;
}

/** StatusStore's contract over a Map: what the real one does on builds.status_*. */
class MemoryStore implements StatusStore {
  readonly rows = new Map<string, Row>();

  constructor(private readonly now: () => Date) {}

  add(job: StatusJob): void {
    this.rows.set(job.buildId, { job, nextAt: this.now(), error: null });
  }

  /** The build changed state: its new desired state starts afresh, due at once. */
  desire(buildId: string, desired: CommitState): void {
    const row = this.row(buildId);
    row.job = { ...row.job, desired, attempts: 0 };
    row.nextAt = this.now();
    row.error = null;
  }

  async due(limit: number): Promise<StatusJob[]> {
    const now = this.now().getTime();
    const due = [...this.rows.values()]
      .filter((row) => row.job.desired !== row.job.posted)
      .filter((row) => row.nextAt !== null && row.nextAt.getTime() <= now)
      .slice(0, limit);
    for (const row of due) row.nextAt = new Date(now + CLAIM_MS);
    return Promise.resolve(due.map((row) => row.job));
  }

  async posted(buildId: string, state: CommitState): Promise<void> {
    const row = this.row(buildId);
    row.job = { ...row.job, posted: state, attempts: 0 };
    row.nextAt = row.job.desired === state ? null : this.now();
    row.error = null;
    return Promise.resolve();
  }

  async failed(
    buildId: string,
    state: CommitState,
    attempts: number,
    nextAt: Date,
    error: string,
  ): Promise<void> {
    const row = this.row(buildId);
    if (row.job.desired !== state) row.nextAt = this.now();
    else {
      row.job = { ...row.job, attempts };
      row.nextAt = nextAt;
      row.error = error;
    }
    return Promise.resolve();
  }

  async gaveUp(buildId: string, state: CommitState, error: string): Promise<void> {
    const row = this.row(buildId);
    if (row.job.desired !== state) row.nextAt = this.now();
    else {
      row.nextAt = null;
      row.error = error;
    }
    return Promise.resolve();
  }

  /** The earliest time anything is due, or null. */
  next(): Date | null {
    const times = [...this.rows.values()]
      .filter((row) => row.job.desired !== row.job.posted && row.nextAt !== null)
      .map((row) => row.nextAt!.getTime());
    return times.length === 0 ? null : new Date(Math.min(...times));
  }

  row(buildId: string): Row {
    const row = this.rows.get(buildId);
    if (row === undefined) throw new Error(`no build ${buildId}`);
    return row;
  }
}

class MemoryLog implements BuildLogNote {
  readonly lines = new Map<string, string[]>();

  async note(buildId: string, line: string): Promise<void> {
    this.lines.set(buildId, [...(this.lines.get(buildId) ?? []), line]);
    return Promise.resolve();
  }

  of(buildId: string): string[] {
    return this.lines.get(buildId) ?? [];
  }
}

/** References → tokens, as a tenant's secret manager holds them; `failNext` makes it unavailable. */
class MemoryTokens implements TokenResolver {
  readonly values = new Map<string, string>();
  private failures = 0;

  failNext(count: number): void {
    this.failures += count;
  }

  async resolve(_tenantId: string, reference: string): Promise<string> {
    if (this.failures > 0) {
      this.failures--;
      throw new Error(`${reference} could not be resolved: vault: Vault answered HTTP 503`);
    }
    const value = this.values.get(reference);
    if (value === undefined) throw new Error(`${reference} could not be resolved: not found`);
    return Promise.resolve(value);
  }
}

const REFERENCE = 'vault:kv/ci/status#token';

describe(StatusReporter.name, () => {
  let host: FakeGitHost | undefined;
  let now: Date;
  let store: MemoryStore;
  let log: MemoryLog;
  let tokens: MemoryTokens;
  let logs: LogCapture;
  let reporter: StatusReporter;

  beforeEach(() => {
    now = new Date('2030-01-01T00:00:00Z');
    store = new MemoryStore(() => now);
    log = new MemoryLog();
    tokens = new MemoryTokens();
    logs = new LogCapture('warn');
    reporter = new StatusReporter({
      store,
      tokens,
      log,
      posterFor: (provider) => posterFor(provider, { timeoutMs: 2_000 }),
      publicUrl: 'https://kiln.example.com/',
      clock: () => now,
      // No jitter: the waits the lines name are the backoff's middle.
      random: () => 0.5,
      logger: logs.logger,
    });
  });

  afterEach(async () => {
    await host?.close();
    host = undefined;
  });

  async function startHost(provider: GitProvider): Promise<string> {
    const token = fakeToken(provider);
    host = await FakeGitHost.start({ provider, token });
    tokens.values.set(REFERENCE, token);
    return token;
  }

  function addBuild(provider: GitProvider, desired: CommitState): StatusJob {
    const job: StatusJob = {
      buildId: randomUUID(),
      tenantId: randomUUID(),
      provider,
      target: { apiUrl: host!.url, repository: 'acme/app', context: 'kiln', token: REFERENCE },
      sha: randomBytes(20).toString('hex'),
      desired,
      posted: null,
      attempts: 0,
      buildNumber: 7,
    };
    store.add(job);
    return job;
  }

  /** Ticks until nothing is left to do, moving the clock to each next due time. */
  async function drain(limit = 50): Promise<void> {
    for (let i = 0; i < limit; i++) {
      await reporter.tick();
      const next = store.next();
      if (next === null) return;
      if (next > now) now = next;
    }
    throw new Error('still due after 50 ticks');
  }

  it("posts the build's state with a link to its page and a description", async () => {
    await startHost('github');
    const build = addBuild('github', 'running');
    expect(await reporter.tick()).toBe(1);
    expect(host!.statuses(build.sha)).toEqual([
      expect.objectContaining({
        state: 'pending',
        context: 'kiln',
        targetUrl: `https://kiln.example.com/builds/${build.buildId}`,
        description: 'Build #7 is running',
      }),
    ]);
    expect(store.row(build.buildId).job).toMatchObject({ posted: 'running', attempts: 0 });
    expect(log.of(build.buildId)).toEqual([]);
  });

  it('handles every build that is due in one tick, and none that is not', async () => {
    await startHost('gitea');
    const builds = [addBuild('gitea', 'pending'), addBuild('gitea', 'success')];
    expect(await reporter.tick()).toBe(2);
    expect(await reporter.tick()).toBe(0);
    expect(builds.map((b) => host!.statuses(b.sha).map((s) => s.state))).toEqual([
      ['pending'],
      ['success'],
    ]);
  });

  it('follows a build through its states on GitLab', async () => {
    await startHost('gitlab');
    const build = addBuild('gitlab', 'pending');
    await drain();
    store.desire(build.buildId, 'running');
    await drain();
    store.desire(build.buildId, 'failure');
    await drain();
    expect(host!.statuses(build.sha).map((s) => s.state)).toEqual(['pending', 'running', 'failed']);
  });

  it('posts the final state once a host that was down is back up', async () => {
    const token = await startHost('github');
    const build = addBuild('github', 'running');
    host!.down();
    await reporter.tick();
    now = store.next()!;
    store.desire(build.buildId, 'success');
    await reporter.tick();
    host!.up();
    await drain();

    expect(host!.statuses(build.sha).map((s) => [s.state, s.description])).toEqual([
      ['success', 'Build #7 succeeded'],
    ]);
    expect(store.row(build.buildId).job).toMatchObject({ posted: 'success', attempts: 0 });
    const lines = log.of(build.buildId);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^\[kiln\] commit status running could not be posted to 127\.0\.0\.1:\d+: GitHub could not be reached: .+; retrying in 2s$/,
    );
    // The later state starts its attempts afresh: its first wait is the first one again.
    expect(lines[1]).toMatch(
      /^\[kiln\] commit status success could not be posted to .+; retrying in 2s$/,
    );
    expect(lines.join('\n')).not.toContain(token);
  });

  it('gives up at once on a refused token, with one line', async () => {
    await startHost('github');
    tokens.values.set(REFERENCE, 'ghp_revoked');
    const build = addBuild('github', 'success');
    await drain();
    now = new Date(now.getTime() + 3_600_000);
    expect(await reporter.tick()).toBe(0);

    expect(host!.received).toHaveLength(1);
    expect(log.of(build.buildId)).toEqual([
      `[kiln] commit status success could not be posted to ${new URL(host!.url).host}: GitHub answered HTTP 401: Bad credentials; not retrying`,
    ]);
    expect(store.row(build.buildId)).toMatchObject({
      nextAt: null,
      error: 'GitHub answered HTTP 401: Bad credentials',
    });
  });

  it(`gives up after ${MAX_ATTEMPTS} failed attempts, the waits doubling up to 5 minutes`, async () => {
    await startHost('gitlab');
    host!.failNext(100, 503);
    const build = addBuild('gitlab', 'failure');
    await drain();

    expect(host!.received).toHaveLength(MAX_ATTEMPTS);
    const lines = log.of(build.buildId);
    expect(lines).toHaveLength(MAX_ATTEMPTS);
    const waits = lines.slice(0, -1).map((line) => /; retrying in (\d+)s$/.exec(line)?.[1]);
    expect(waits).toEqual(['2', '4', '8', '16', '32', '64', '128', '256', '300']);
    expect(lines.at(-1)).toMatch(
      /^\[kiln\] commit status failure could not be posted to .+: GitLab answered HTTP 503: injected 503; giving up after 10 attempts$/,
    );
    expect(store.row(build.buildId).nextAt).toBeNull();
  });

  it('starts afresh when the build reaches a later state after giving up', async () => {
    await startHost('github');
    host!.failNext(MAX_ATTEMPTS, 502);
    const build = addBuild('github', 'running');
    await drain();
    store.desire(build.buildId, 'success');
    await drain();
    expect(host!.statuses(build.sha).map((s) => s.state)).toEqual(['success']);
  });

  it('waits as long as the host asks when that is longer than the backoff', async () => {
    await startHost('gitea');
    host!.failNext(1, 429, { 'retry-after': '90' });
    const build = addBuild('gitea', 'pending');
    await reporter.tick();
    expect(log.of(build.buildId)).toEqual([
      expect.stringMatching(/: Gitea answered HTTP 429: injected 429; retrying in 90s$/),
    ]);
    expect(store.row(build.buildId).nextAt).toEqual(new Date(now.getTime() + 90_000));
  });

  it('retries a token that could not be resolved, naming its reference', async () => {
    await startHost('forgejo');
    tokens.failNext(1);
    const build = addBuild('forgejo', 'success');
    await drain();
    expect(log.of(build.buildId)).toEqual([
      `[kiln] commit status success could not be posted to ${new URL(host!.url).host}: ${REFERENCE} could not be resolved: vault: Vault answered HTTP 503; retrying in 2s`,
    ]);
    expect(host!.statuses(build.sha).map((s) => s.state)).toEqual(['success']);
  });

  it('records nothing for a post that shutdown interrupted', async () => {
    await startHost('github');
    host!.hangNext(1);
    const build = addBuild('github', 'running');
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('shutting down')), 50);
    expect(await reporter.tick(controller.signal)).toBe(1);
    expect(log.of(build.buildId)).toEqual([]);
    expect(store.row(build.buildId)).toMatchObject({
      job: { attempts: 0, posted: null },
      error: null,
    });
  });

  it('logs each failure for the operator too', async () => {
    await startHost('github');
    host!.failNext(1, 500);
    const build = addBuild('github', 'pending');
    await reporter.tick();
    expect(logs.find((line) => line.msg === 'commit status could not be posted')).toMatchObject({
      buildId: build.buildId,
      provider: 'github',
      state: 'pending',
      attempts: 1,
    });
  });
});

describe(backoffMs.name, () => {
  it.each([
    [1, 2_000],
    [2, 4_000],
    [5, 32_000],
    [8, 256_000],
    [9, 300_000],
    [10, 300_000],
    [30, 300_000],
  ])('attempt %i waits %i ms, give or take 20 %%', (attempt, middle) => {
    expect(backoffMs(attempt, () => 0.5)).toBe(middle);
    expect(backoffMs(attempt, () => 0)).toBe(middle * 0.8);
    expect(backoffMs(attempt, () => 0.999_999)).toBeCloseTo(middle * 1.2, -1);
  });
});
