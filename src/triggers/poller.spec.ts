import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnvironmentOf } from '../config/child-environment.js';
import { type BareRepository, GitDaemon } from '../../test/support/git-daemon.js';
import { GitHttpServer } from '../../test/support/git-http-server.js';
import { GitRepo } from '../../test/support/git-repo.js';
import { createTestTls } from '../../test/support/tls.js';
import type { GitEvent } from './git-event.js';
import { type GitCredentials, lsRemote } from './ls-remote.js';
import {
  type ListRefs,
  type PollCredentials,
  type PollDispatch,
  type PollStore,
  type PollTarget,
  TriggerPoller,
} from './poller.js';

const TIMEOUT_MS = 20_000;

/** The polling state as the database keeps it, in memory; every trigger is due at every tick. */
class MemoryPollStore implements PollStore {
  readonly refs = new Map<string, ReadonlyMap<string, string>>();
  readonly failures: { triggerId: string; message: string }[] = [];

  constructor(readonly targets: PollTarget[]) {}

  claimDue(limit: number): Promise<PollTarget[]> {
    return Promise.resolve(this.targets.slice(0, limit));
  }

  knownRefs(triggerId: string): Promise<ReadonlyMap<string, string> | null> {
    return Promise.resolve(this.refs.get(triggerId) ?? null);
  }

  saveRefs(triggerId: string, refs: ReadonlyMap<string, string>): Promise<void> {
    this.refs.set(triggerId, new Map(refs));
    return Promise.resolve();
  }

  recordFailure(triggerId: string, message: string): Promise<void> {
    this.failures.push({ triggerId, message });
    return Promise.resolve();
  }
}

interface Delivery {
  readonly triggerId: string;
  readonly deliveryId: string;
  readonly event: GitEvent;
}

/** Records what it receives; `failNext` makes its next receive fail, as a database error would. */
class RecordingDispatch implements PollDispatch {
  readonly deliveries: Delivery[] = [];
  failNext = false;

  receive(triggerId: string, deliveryId: string, event: GitEvent): Promise<void> {
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('the database is gone'));
    }
    this.deliveries.push({ triggerId, deliveryId, event });
    return Promise.resolve();
  }
}

class ProjectCredentials implements PollCredentials {
  readonly byProject = new Map<string, GitCredentials>();

  forProject(tenantId: string, projectId: string): Promise<GitCredentials | undefined> {
    return Promise.resolve(this.byProject.get(`${tenantId}/${projectId}`));
  }
}

function target(repositoryUrl: string): PollTarget {
  return {
    triggerId: randomUUID(),
    tenantId: randomUUID(),
    projectId: randomUUID(),
    repositoryUrl,
    intervalSeconds: 60,
  };
}

/** What a push to `branch` of the polled repository at `commit` is dispatched as. */
function push(branch: string, commit: string): Pick<Delivery, 'deliveryId' | 'event'> {
  return {
    deliveryId: `poll:refs/heads/${branch}:${commit}`,
    event: {
      kind: 'push',
      ref: `refs/heads/${branch}`,
      branch,
      tag: null,
      commit,
      deleted: false,
      pusher: null,
      author: null,
      changedFiles: null,
      pullRequest: null,
      repositoryUrl: null,
    },
  };
}

describe(TriggerPoller.name, () => {
  const daemon = new GitDaemon();
  const inherited = childEnvironmentOf(process.env);
  const listRefs: ListRefs = (url, credentials) =>
    lsRemote(url, { inherited, credentials, timeoutMs: TIMEOUT_MS });
  const workingCopies: GitRepo[] = [];
  const workingCopy = (): GitRepo => {
    const repo = new GitRepo();
    workingCopies.push(repo);
    return repo;
  };

  beforeAll(() => daemon.start());
  afterAll(async () => {
    await daemon.remove();
    for (const repo of workingCopies) rmSync(repo.dir, { recursive: true, force: true });
  });

  /** A repository with a main branch, one trigger polling it, and a poller. */
  function polling() {
    const remote: BareRepository = daemon.bareRepository(`${randomUUID()}.git`);
    const work = workingCopy();
    const first = remote.pushCommit(work, 'main', { 'README.md': 'start' });
    const trigger = target(remote.url);
    const store = new MemoryPollStore([trigger]);
    const dispatch = new RecordingDispatch();
    const poller = new TriggerPoller({
      store,
      credentials: new ProjectCredentials(),
      dispatch,
      listRefs,
      batchSize: 10,
    });
    const dispatched = (): Pick<Delivery, 'deliveryId' | 'event'>[] =>
      dispatch.deliveries.map(({ deliveryId, event }) => ({ deliveryId, event }));
    return { remote, work, first, trigger, store, dispatch, poller, dispatched };
  }

  it('records the refs at the first poll and dispatches nothing', async () => {
    const { remote, work, first, trigger, store, poller, dispatched } = polling();
    remote.pushTag(work, 'v1', first);

    expect(await poller.tick()).toBe(1);

    expect(dispatched()).toEqual([]);
    expect(Object.fromEntries(store.refs.get(trigger.triggerId) ?? [])).toEqual({
      'refs/heads/main': first,
      'refs/tags/v1': first,
    });
  });

  it('dispatches a push to main as one push event, then remembers its commit', async () => {
    const { remote, work, trigger, store, poller, dispatched } = polling();
    await poller.tick();

    const pushed = remote.pushCommit(work, 'main', { 'README.md': 'second' });
    await poller.tick();

    expect(dispatched()).toEqual([push('main', pushed)]);
    expect(store.refs.get(trigger.triggerId)?.get('refs/heads/main')).toBe(pushed);
    expect(store.failures).toEqual([]);
  });

  it('dispatches nothing at a poll that finds nothing new', async () => {
    const { remote, work, poller, dispatched } = polling();
    await poller.tick();
    remote.pushCommit(work, 'main', { 'README.md': 'second' });
    await poller.tick();

    await poller.tick();

    expect(dispatched()).toHaveLength(1);
  });

  it('dispatches one event for the last commit of several pushes between two polls', async () => {
    const { remote, work, poller, dispatched } = polling();
    await poller.tick();

    remote.pushCommit(work, 'main', { 'a.txt': '1' });
    remote.pushCommit(work, 'main', { 'a.txt': '2' });
    const last = remote.pushCommit(work, 'main', { 'a.txt': '3' });
    await poller.tick();

    expect(dispatched()).toEqual([push('main', last)]);
  });

  it('dispatches a new tag as a tag event, and a new branch as a push', async () => {
    const { remote, work, first, poller, dispatched } = polling();
    await poller.tick();

    remote.pushTag(work, 'v1.0.0', first, { annotated: true });
    const feature = remote.pushCommit(work, 'feature/x', { 'x.txt': 'x' });
    await poller.tick();

    expect(dispatched()).toEqual([
      push('feature/x', feature),
      {
        deliveryId: `poll:refs/tags/v1.0.0:${first}`,
        event: {
          ...push('main', first).event,
          kind: 'tag',
          ref: 'refs/tags/v1.0.0',
          branch: null,
          tag: 'v1.0.0',
        },
      },
    ]);
  });

  it('dispatches nothing for a deleted branch and forgets it', async () => {
    const { remote, work, trigger, store, poller, dispatched } = polling();
    remote.pushCommit(work, 'short-lived', { 'a.txt': 'a' });
    await poller.tick();

    remote.deleteBranch(work, 'short-lived');
    await poller.tick();

    expect(dispatched()).toEqual([]);
    expect([...(store.refs.get(trigger.triggerId)?.keys() ?? [])]).toEqual(['refs/heads/main']);
  });

  it('records a failed listing, dispatches nothing and catches up once the remote is back', async () => {
    const { remote, work, first, trigger, store, poller, dispatched } = polling();
    await poller.tick();
    const pushed = remote.pushCommit(work, 'main', { 'README.md': 'before the outage' });

    await daemon.stop();
    try {
      await poller.tick();
    } finally {
      await daemon.start();
    }

    expect(dispatched()).toEqual([]);
    expect(store.failures).toEqual([
      {
        triggerId: trigger.triggerId,
        message: expect.stringMatching(
          new RegExp(`^listing the refs of ${remote.url} failed: `),
        ) as string,
      },
    ]);
    expect(store.refs.get(trigger.triggerId)?.get('refs/heads/main')).toBe(first);

    await poller.tick();

    expect(dispatched()).toEqual([push('main', pushed)]);
  });

  it('keeps the refs when an event cannot be dispatched, and dispatches it again with the same delivery id', async () => {
    const { remote, work, first, trigger, store, dispatch, poller, dispatched } = polling();
    await poller.tick();
    const pushed = remote.pushCommit(work, 'main', { 'README.md': 'second' });

    dispatch.failNext = true;
    await poller.tick();

    expect(dispatched()).toEqual([]);
    expect(store.refs.get(trigger.triggerId)?.get('refs/heads/main')).toBe(first);
    expect(store.failures).toEqual([
      {
        triggerId: trigger.triggerId,
        message: `the refs of ${remote.url} were listed, but their events could not be handled: the database is gone`,
      },
    ]);

    await poller.tick();

    expect(dispatched()).toEqual([push('main', pushed)]);
    expect(store.refs.get(trigger.triggerId)?.get('refs/heads/main')).toBe(pushed);
  });

  it('polls every claimed trigger, a failing one without holding up the others', async () => {
    const repositories = Array.from({ length: 3 }, () => {
      const remote = daemon.bareRepository(`${randomUUID()}.git`);
      const work = workingCopy();
      remote.pushCommit(work, 'main', { 'README.md': 'start' });
      return { remote, work, trigger: target(remote.url) };
    });
    const missing = target(daemon.url('missing.git'));
    const store = new MemoryPollStore([missing, ...repositories.map(({ trigger }) => trigger)]);
    const dispatch = new RecordingDispatch();
    const poller = new TriggerPoller({
      store,
      credentials: new ProjectCredentials(),
      dispatch,
      listRefs,
      batchSize: 10,
    });
    await poller.tick();

    const pushed = repositories.map(({ remote, work }) =>
      remote.pushCommit(work, 'main', { 'README.md': 'second' }),
    );
    expect(await poller.tick()).toBe(4);

    expect(
      dispatch.deliveries.map(({ triggerId, deliveryId }) => [triggerId, deliveryId]).sort(),
    ).toEqual(
      repositories
        .map(({ trigger }, index) => [trigger.triggerId, `poll:refs/heads/main:${pushed[index]}`])
        .sort(),
    );
    expect(store.failures.map(({ triggerId }) => triggerId)).toEqual([
      missing.triggerId,
      missing.triggerId,
    ]);
  });

  it('lists at most four repositories at once', async () => {
    const targets = Array.from({ length: 9 }, () => {
      const remote = daemon.bareRepository(`${randomUUID()}.git`);
      remote.pushCommit(workingCopy(), 'main', { 'README.md': 'start' });
      return target(remote.url);
    });
    let listing = 0;
    let most = 0;
    const listed: string[] = [];
    const counting: ListRefs = async (url, credentials) => {
      most = Math.max(most, ++listing);
      try {
        return await listRefs(url, credentials);
      } finally {
        listing -= 1;
        listed.push(url);
      }
    };
    const poller = new TriggerPoller({
      store: new MemoryPollStore(targets),
      credentials: new ProjectCredentials(),
      dispatch: new RecordingDispatch(),
      listRefs: counting,
      batchSize: 20,
    });

    await poller.tick();

    expect(listed.sort()).toEqual(targets.map(({ repositoryUrl }) => repositoryUrl).sort());
    expect(most).toBe(4);
  });

  it('claims no more triggers than its batch', async () => {
    const targets = Array.from({ length: 3 }, () => target(daemon.url(`${randomUUID()}.git`)));
    const store = new MemoryPollStore(targets);
    const poller = new TriggerPoller({
      store,
      credentials: new ProjectCredentials(),
      dispatch: new RecordingDispatch(),
      listRefs,
      batchSize: 2,
    });

    expect(await poller.tick()).toBe(2);
    expect(store.failures.map(({ triggerId }) => triggerId).sort()).toEqual(
      targets
        .slice(0, 2)
        .map(({ triggerId }) => triggerId)
        .sort(),
    );
  });

  describe('with a repository behind Basic credentials', () => {
    const username = 'kiln-bot';
    const password = 'poller-password-0815';
    let server: GitHttpServer;
    const caDir = mkdtempSync(join(tmpdir(), 'kiln-poller-'));
    let httpsRefs: ListRefs;

    beforeAll(async () => {
      const tls = createTestTls();
      writeFileSync(join(caDir, 'ca.crt'), tls.ca);
      const https = { ...inherited, GIT_SSL_CAINFO: join(caDir, 'ca.crt') };
      httpsRefs = (url, credentials) =>
        lsRemote(url, { inherited: https, credentials, timeoutMs: TIMEOUT_MS });
      server = await GitHttpServer.start({ root: daemon.basePath, username, password, tls });
    });
    afterAll(async () => {
      await server.stop();
      rmSync(caDir, { recursive: true, force: true });
    });

    it('lists it with the project’s credentials, and records a failure for a project without', async () => {
      const remote = daemon.bareRepository(`${randomUUID()}.git`);
      const work = workingCopy();
      remote.pushCommit(work, 'main', { 'README.md': 'start' });
      const withCredentials = target(server.url(remote.name));
      const without = { ...target(server.url(remote.name)), tenantId: withCredentials.tenantId };
      const credentials = new ProjectCredentials();
      credentials.byProject.set(`${withCredentials.tenantId}/${withCredentials.projectId}`, {
        username,
        password,
      });
      const store = new MemoryPollStore([withCredentials, without]);
      const dispatch = new RecordingDispatch();
      const poller = new TriggerPoller({
        store,
        credentials,
        dispatch,
        listRefs: httpsRefs,
        batchSize: 10,
      });
      await poller.tick();

      const pushed = remote.pushCommit(work, 'main', { 'README.md': 'second' });
      await poller.tick();

      expect(
        dispatch.deliveries.map(({ triggerId, deliveryId }) => [triggerId, deliveryId]),
      ).toEqual([[withCredentials.triggerId, `poll:refs/heads/main:${pushed}`]]);
      expect(server.authorizations).toContain(
        `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`,
      );
      expect(store.refs.has(without.triggerId)).toBe(false);
      expect(store.failures.map(({ triggerId }) => triggerId)).toEqual([
        without.triggerId,
        without.triggerId,
      ]);
      expect(store.failures.every(({ message }) => !message.includes(password))).toBe(true);
    });
  });
});
