import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { ociPathProblem } from '../src/registries/naming.js';
import {
  grantedActions,
  OciRegistryPreflight,
  parseChallenges,
} from '../src/registries/oci-preflight.js';
import {
  type OciRegistryType,
  type RegistryCredentials,
  RegistryUnauthorizedError,
  RegistryUnavailableError,
} from '../src/registries/registry.js';
import { FakeTokenRegistry, type FakeTokenRegistryOptions } from './support/fake-token-registry.js';
import { LocalRegistry } from './support/registry.js';

const PASSWORDS = {
  dev: 'dev-Secret-1',
  pusher: 'pusher-Secret-2',
  reader: 'reader-Secret-3',
};
const dev: RegistryCredentials = { username: 'dev', password: PASSWORDS.dev };
const pusher: RegistryCredentials = { username: 'pusher', password: PASSWORDS.pusher };
const reader: RegistryCredentials = { username: 'reader', password: PASSWORDS.reader };
const wrong: RegistryCredentials = { username: 'dev', password: 'not-the-Password-9' };
const QUICK = { insecure: true, timeoutMs: 200 };

/** The rejection of `promise`; fails the test when it resolves. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe(parseChallenges.name, () => {
  it('reads a Bearer challenge whose quoted values hold commas and spaces', () => {
    const header =
      'Bearer realm="https://auth.example.com/token?a=1,b=2",service="my registry",scope="repository:team/app:pull,push"';
    expect(parseChallenges(header)).toEqual([
      {
        scheme: 'bearer',
        params: {
          realm: 'https://auth.example.com/token?a=1,b=2',
          service: 'my registry',
          scope: 'repository:team/app:pull,push',
        },
      },
    ]);
  });

  it('reads several challenges, token values, escapes and any letter case', () => {
    const header =
      'Basic REALM="har\\"bor", bearer Realm=https://r/token , Service = reg,error="insufficient_scope"';
    expect(parseChallenges(header)).toEqual([
      { scheme: 'basic', params: { realm: 'har"bor' } },
      {
        scheme: 'bearer',
        params: { realm: 'https://r/token', service: 'reg', error: 'insufficient_scope' },
      },
    ]);
  });

  it('finds nothing in an empty header', () => {
    expect(parseChallenges('')).toEqual([]);
  });
});

describe(grantedActions.name, () => {
  const jwt = (claims: unknown): string =>
    `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;

  it('collects the actions of every access entry for the repository', () => {
    const token = jwt({
      access: [
        { type: 'repository', name: 'team/app', actions: ['pull'] },
        { type: 'repository', name: 'team/other', actions: ['push'] },
        { type: 'repository', name: 'team/app', actions: ['push'] },
      ],
    });
    expect(grantedActions(token, 'team/app')).toEqual(['pull', 'push']);
    expect(grantedActions(token, 'team/none')).toEqual([]);
  });

  it('cannot tell from an opaque token or a JWT without an access claim', () => {
    expect(grantedActions('0123abcd', 'team/app')).toBeUndefined();
    expect(grantedActions(jwt({ sub: 'x' }), 'team/app')).toBeUndefined();
    expect(grantedActions('a.!!!.c', 'team/app')).toBeUndefined();
  });
});

describe(OciRegistryPreflight.name, () => {
  let registry: FakeTokenRegistry;
  const started: FakeTokenRegistry[] = [];

  const start = async (options: FakeTokenRegistryOptions = {}): Promise<FakeTokenRegistry> => {
    const fake = await FakeTokenRegistry.start(options);
    fake.addUser('dev', PASSWORDS.dev, { 'team/app': ['pull', 'push', 'delete'] });
    fake.addUser('pusher', PASSWORDS.pusher, { 'team/app': ['pull', 'push'] });
    fake.addUser('reader', PASSWORDS.reader, { 'team/app': ['pull'] });
    started.push(fake);
    return fake;
  };

  const check = (
    credentials: RegistryCredentials | undefined,
    options: { type?: OciRegistryType; path?: string; insecure?: boolean; timeoutMs?: number } = {},
  ): Promise<void> =>
    new OciRegistryPreflight(options.type ?? 'harbor').checkPush(
      { host: registry.address, path: options.path ?? 'team/app' },
      credentials,
      { insecure: options.insecure ?? true, timeoutMs: options.timeoutMs ?? 2_000 },
    );

  const posts = (): number => registry.requests.filter((r) => r.method === 'POST').length;

  afterEach(async () => {
    await Promise.all(started.splice(0).map((fake) => fake.stop()));
  });

  describe('against a token registry', () => {
    beforeEach(async () => {
      registry = await start();
    });

    it('resolves for credentials that may push, and leaves no upload open', async () => {
      await check(dev);
      expect(registry.openUploads()).toEqual([]);
      expect(registry.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
        'GET /v2/',
        'GET /token',
        'POST /v2/team/app/blobs/uploads/',
        expect.stringMatching(/^DELETE \/v2\/team\/app\/blobs\/uploads\/[0-9a-f-]+$/),
        'GET /token',
        expect.stringMatching(/^DELETE \/v2\/team\/app\/blobs\/uploads\/[0-9a-f-]+$/),
      ]);
    });

    it('asks the token service for pull,push on the repository with the credentials', async () => {
      await check(dev);
      const tokenRequest = registry.requests.find((r) => r.path === '/token')!;
      expect(tokenRequest.query.get('service')).toBe('fake-registry');
      expect(tokenRequest.query.getAll('scope')).toEqual(['repository:team/app:pull,push']);
      expect(tokenRequest.headers.authorization).toBe(
        `Basic ${Buffer.from(`dev:${PASSWORDS.dev}`).toString('base64')}`,
      );
    });

    it('resolves even when the registry refuses to cancel the probe upload', async () => {
      await check(pusher);
      expect(registry.openUploads()).toHaveLength(1);
    });

    it('rejects a wrong password as unauthorized', async () => {
      const error = await rejectionOf(check(wrong));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toBe(
        `${registry.address}/team/app: the token service refused these credentials (401)`,
      );
    });

    it('rejects a pull-only account from its token alone, before any push', async () => {
      const error = await rejectionOf(check(reader));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/may not push to team\/app \(the registry granted pull only\)/);
      expect(posts()).toBe(0);
    });

    it('rejects anonymous access when the registry grants anonymous users nothing', async () => {
      const error = await rejectionOf(check(undefined));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/anonymous users may not push to team\/app/);
      expect(
        registry.requests.find((r) => r.path === '/token')!.headers.authorization,
      ).toBeUndefined();
    });

    it('retries a 503 and resolves when the registry recovers', async () => {
      registry.failNext(503, 2, /^GET \/v2\/$/);
      await check(dev);
      expect(registry.requests.filter((r) => r.path === '/v2/')).toHaveLength(3);
    });

    it('gives up after three 5xx answers as unavailable', async () => {
      registry.failNext(500, 3, /^POST /);
      const error = await rejectionOf(check(dev));
      expect(error).toBeInstanceOf(RegistryUnavailableError);
      expect(error.message).toBe(
        `${registry.address}/team/app: POST /v2/team/app/blobs/uploads/ answered 500 (3 attempts)`,
      );
    });

    it('rejects as unavailable when the registry accepts the connection and never answers', async () => {
      registry.hang = true;
      const error = await rejectionOf(check(dev, { timeoutMs: 200 }));
      expect(error).toBeInstanceOf(RegistryUnavailableError);
      expect(error.message).toMatch(/GET \/v2\/ did not answer within 200 ms \(3 attempts\)/);
      expect(registry.requests).toHaveLength(3);
    });

    it('reads a 404 on the upload start as a missing repository', async () => {
      registry.failNext(404, 1, /^POST /);
      const error = await rejectionOf(check(dev));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(
        /team\/app does not exist on the registry, or these credentials cannot see it: the Harbor project "team" does not exist.*; the registry said: NAME_UNKNOWN: injected fault$/,
      );
    });

    it('speaks HTTPS unless told the registry is insecure', async () => {
      const error = await rejectionOf(check(dev, { insecure: false }));
      expect(error).toBeInstanceOf(RegistryUnavailableError);
      expect(registry.requests).toEqual([]);
    });

    it('rejects as unavailable when nothing listens', async () => {
      const host = registry.address;
      await registry.stop();
      const error = await rejectionOf(
        new OciRegistryPreflight('harbor').checkPush({ host, path: 'team/app' }, dev, QUICK),
      );
      expect(error).toBeInstanceOf(RegistryUnavailableError);
      expect(error.message).toMatch(/GET \/v2\/ could not be reached \(ECONNREFUSED\)/);
    });

    it('stops when the caller aborts', async () => {
      registry.hang = true;
      const abort = new AbortController();
      const pending = new OciRegistryPreflight('quay').checkPush(
        { host: registry.address, path: 'team/app' },
        dev,
        { insecure: true, signal: abort.signal },
      );
      while (registry.requests.length === 0) await new Promise((done) => setTimeout(done, 10));
      abort.abort();
      const error = await rejectionOf(pending);
      expect(error.name).toBe('AbortError');
      expect(registry.requests).toHaveLength(1);
    });
  });

  describe('against a token registry whose tokens are opaque', () => {
    beforeEach(async () => {
      registry = await start({ opaqueTokens: true });
    });

    it('resolves for credentials that may push', async () => {
      await check(dev);
      expect(registry.openUploads()).toEqual([]);
    });

    it('learns from the refused upload start that a pull-only account may not push', async () => {
      const error = await rejectionOf(check(reader));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(
        /these credentials may not push to team\/app; the registry said: UNAUTHORIZED/,
      );
      expect(posts()).toBe(1);
    });
  });

  describe('against a Harbor-like registry', () => {
    beforeEach(async () => {
      registry = await start({ projects: ['team'] });
      registry.addUser('other', 'other-Secret-4', { 'other/app': ['pull', 'push'] });
    });

    it('resolves in a project that exists', async () => {
      await check(dev);
    });

    it.each<[OciRegistryType, string]>([
      ['harbor', 'the Harbor project "other" does not exist, or the account is not a member of it'],
      ['quay', 'the Quay organization or user "other" does not exist'],
      ['artifactory', 'the Artifactory repository "other" does not exist'],
    ])('names what is missing when the project does not exist (%s)', async (type, hint) => {
      const error = await rejectionOf(
        check({ username: 'other', password: 'other-Secret-4' }, { type, path: 'other/app' }),
      );
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toContain(`these credentials may not push to other/app: ${hint}`);
    });

    it('passes on what Harbor says when the token does not show the missing project', async () => {
      registry = await start({ projects: ['team'], opaqueTokens: true });
      const error = await rejectionOf(check(dev, { path: 'other/app' }));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/; the registry said: UNAUTHORIZED: project other not found$/);
    });
  });

  describe('against a Basic-auth registry', () => {
    beforeEach(async () => {
      registry = await start({ basicAuthMode: true });
    });

    it('resolves for credentials that may push and cancels the upload', async () => {
      await check(dev);
      expect(registry.openUploads()).toEqual([]);
      expect(registry.requests.every((r) => r.path !== '/token')).toBe(true);
    });

    it('rejects a wrong password as unauthorized', async () => {
      const error = await rejectionOf(check(wrong));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/refused these credentials for a push/);
    });

    it('resolves when the registry refuses to cancel the upload (403 on DELETE)', async () => {
      await check(pusher);
      expect(registry.openUploads()).toHaveLength(1);
    });

    it('rejects an account the registry denies the push (403)', async () => {
      const error = await rejectionOf(check(reader));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/denied a push to team\/app; the registry said: DENIED/);
    });

    it('rejects anonymous access without sending anything further', async () => {
      const error = await rejectionOf(check(undefined));
      expect(error).toBeInstanceOf(RegistryUnauthorizedError);
      expect(error.message).toMatch(/requires credentials \(Basic auth\), and none were given/);
      expect(registry.requests).toHaveLength(1);
    });
  });

  it('never puts a password or a token in a message, an inspection or a cause', async () => {
    const errors: Error[] = [];
    const tokens: string[] = [];
    const collect = async (options: FakeTokenRegistryOptions, run: () => Promise<void>) => {
      registry = await start(options);
      errors.push(await rejectionOf(run()));
      tokens.push(...registry.issuedTokens);
    };
    await collect({}, () => check(wrong));
    await collect({}, () => check(reader));
    await collect({ opaqueTokens: true }, () => check(reader));
    await collect({ projects: ['nope'] }, () => check(dev));
    await collect({ basicAuthMode: true }, () => check(wrong));
    await collect({ basicAuthMode: true }, () => check(reader));
    await collect({}, async () => {
      registry.failNext(404, 1, /^POST /);
      await check(dev);
    });
    await collect({}, async () => {
      registry.hang = true;
      await check(dev, { timeoutMs: 100 });
    });
    expect(tokens.length).toBeGreaterThan(0);
    const secrets = [...Object.values(PASSWORDS), wrong.password, ...tokens];
    for (const error of errors) {
      const shown = [
        error.message,
        String(error),
        inspect(error, { depth: 8 }),
        JSON.stringify(error),
      ];
      for (const secret of secrets) {
        expect(shown.filter((text) => text.includes(secret))).toEqual([]);
      }
    }
  });
});

describe('OciRegistryPreflight against the real docker-registry', () => {
  let real: LocalRegistry;

  beforeAll(async () => {
    real = await LocalRegistry.start();
  });

  afterAll(async () => {
    await real.stop();
  });

  /**
   * The uploads the registry still holds open for `path`: those with a `startedat` file, which
   * distribution needs to resume one. (Its cancel removes the upload's files, but 2.8 writes a
   * hash state back as it closes the writer, so an empty directory can stay.) LocalRegistry keeps
   * its storage directory private.
   */
  const openUploadsOf = async (path: string): Promise<string[]> => {
    const root = (real as unknown as { dir: string }).dir;
    const dir = join(root, 'data/docker/registry/v2/repositories', path, '_uploads');
    const entries = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
    const open = await Promise.all(
      entries.map(async (uuid) => (await readdir(join(dir, uuid))).includes('startedat')),
    );
    return entries.filter((_, index) => open[index]);
  };

  it('resolves where anonymous push is allowed, and cancels its upload', async () => {
    await new OciRegistryPreflight('harbor').checkPush(
      { host: real.address, path: 'team/app' },
      undefined,
      QUICK,
    );
    expect(await openUploadsOf('team/app')).toEqual([]);
    expect(await real.tags('team/app')).toEqual([]);
  });

  it('leaves an upload directory behind when one is not cancelled (the check above can fail)', async () => {
    const response = await fetch(`http://${real.address}/v2/team/left/blobs/uploads/`, {
      method: 'POST',
    });
    expect(response.status).toBe(202);
    expect(await openUploadsOf('team/left')).toHaveLength(1);
  });

  it('agrees with the registry on which repository paths are valid', async () => {
    const paths = [
      'a',
      'a/b',
      'a-b',
      'a--b',
      'a__b',
      'a.b',
      'a_b',
      'a___b',
      'a..b',
      'a.-b',
      '_a',
      'a-',
      'A',
      'a/B',
      'a//b',
    ];
    const verdicts = [];
    for (const path of paths) {
      const response = await fetch(`http://${real.address}/v2/${path}/blobs/uploads/`, {
        method: 'POST',
      });
      verdicts.push({
        path,
        registry: response.status === 202,
        kiln: ociPathProblem(path) === undefined,
      });
    }
    expect(verdicts.filter((v) => v.registry !== v.kiln)).toEqual([]);
    expect(verdicts.filter((v) => v.kiln).length).toBeGreaterThan(0);
    expect(verdicts.filter((v) => !v.kiln).length).toBeGreaterThan(0);
  });
});
