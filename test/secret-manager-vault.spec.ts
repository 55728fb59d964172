import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import {
  type ResolveLimits,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from '../src/secret-managers/secret-manager.js';
import { type VaultReference } from '../src/manifest/secret-reference.js';
import type { VaultSettings } from '../src/secret-managers/settings.js';
import { VaultSecretManager } from '../src/secret-managers/vault.js';
import { FakeVault } from './support/fake-vault.js';
import { generateTlsMaterial } from './support/kube/tls.js';

/** Values that must never show up in an error: the secrets and kiln's own credentials. */
const VALUE = 'pa55-DISTINCTIVE-value-7c1e';
const OTHER_VALUE = 'other-DISTINCTIVE-value-2b9d';
const TOKEN = 'hvs.TOKEN-DISTINCTIVE-0a4f';
const JWT = 'eyJ.JWT-DISTINCTIVE.5d6e';
const NUMBER_VALUE = 739251846;
const NEVER_SHOWN = [VALUE, OTHER_VALUE, String(NUMBER_VALUE), TOKEN, JWT];

const FAST: ResolveLimits = { timeoutMs: 200, attempts: 2 };

function ref(mount: string, path: string, key: string, version?: number): VaultReference {
  const query = version === undefined ? '' : `?version=${version}`;
  return {
    manager: 'vault',
    text: `vault:${mount}/data/${path}${query}#${key}`,
    mount,
    path,
    key,
    ...(version === undefined ? {} : { version }),
  };
}

/** The rejection of `promise`, checked to carry no secret value or credential anywhere. */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (reason: unknown) => reason as Error,
  );
  const printed = inspect(error, { depth: 10 });
  for (const secret of NEVER_SHOWN) expect(printed).not.toContain(secret);
  return error;
}

describe(VaultSecretManager.name, () => {
  let vault: FakeVault;
  let dir: string;
  let tokenFile: string;
  let jwtFile: string;

  const tokenSettings = (extra: Partial<VaultSettings> = {}): VaultSettings => ({
    address: vault.url,
    auth: { method: 'token', tokenFile },
    ...extra,
  });
  const kubernetesSettings = (extra: Partial<VaultSettings> = {}): VaultSettings => ({
    address: vault.url,
    auth: { method: 'kubernetes', role: 'kiln', jwtFile },
    ...extra,
  });

  beforeEach(async () => {
    vault = await FakeVault.start();
    dir = await mkdtemp(join(tmpdir(), 'kiln-vault-'));
    tokenFile = join(dir, 'token');
    jwtFile = join(dir, 'jwt');
    await writeFile(tokenFile, `${TOKEN}\n`);
    await writeFile(jwtFile, `${JWT}\n`);
    vault.addToken(TOKEN, { policies: ['kv/data/app/'] });
    vault.put('kv', 'app/db', { password: VALUE, user: OTHER_VALUE, pin: NUMBER_VALUE });
  });

  afterEach(async () => {
    await vault.stop();
    await rm(dir, { recursive: true, force: true });
  });

  describe('with token auth', () => {
    it('reads a key of the secret with the token from the token file', async () => {
      const manager = new VaultSecretManager(tokenSettings());

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
      expect(vault.requests.at(-1)?.headers['x-vault-token']).toBe(TOKEN);
    });

    it('reads the token file again on each resolve, so a rotated token is used', async () => {
      const manager = new VaultSecretManager(tokenSettings());
      await manager.resolve(ref('kv', 'app/db', 'password'));
      vault.addToken('rotated-token', { policies: ['kv/data/app/'] });
      await writeFile(tokenFile, 'rotated-token');

      await expect(manager.resolve(ref('kv', 'app/db', 'user'))).resolves.toBe(OTHER_VALUE);
      expect(vault.requests.at(-1)?.headers['x-vault-token']).toBe('rotated-token');
    });

    it('reads the version the reference names', async () => {
      vault.put('kv', 'app/db', { password: 'newer' });
      const manager = new VaultSecretManager(tokenSettings());

      await expect(manager.resolve(ref('kv', 'app/db', 'password', 1))).resolves.toBe(VALUE);
      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe('newer');
      expect(vault.requests.map((r) => r.url)).toEqual([
        '/v1/kv/data/app/db?version=1',
        '/v1/kv/data/app/db',
      ]);
    });

    it('reads under a mount with slashes in its path', async () => {
      vault.put('secret/team', 'app/db', { password: 'team-value' });
      vault.addToken('team-token', { policies: ['secret/team/data/app/'] });
      await writeFile(tokenFile, 'team-token');
      const manager = new VaultSecretManager(tokenSettings());

      await expect(manager.resolve(ref('secret/team', 'app/db', 'password'))).resolves.toBe(
        'team-value',
      );
    });

    it('sends the namespace as X-Vault-Namespace and reads the namespace secret', async () => {
      vault.put('kv', 'app/db', { password: 'in-namespace' }, 'tenant-a');
      vault.addToken('ns-token', { namespace: 'tenant-a', policies: ['kv/data/app/'] });
      await writeFile(tokenFile, 'ns-token');
      const manager = new VaultSecretManager(tokenSettings({ namespace: 'tenant-a' }));

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe('in-namespace');
      expect(vault.requests.at(-1)?.headers['x-vault-namespace']).toBe('tenant-a');
    });

    it('fails with SecretManagerUnavailableError naming the token file when it cannot be read', async () => {
      const missing = join(dir, 'missing');
      const manager = new VaultSecretManager(
        tokenSettings({ auth: { method: 'token', tokenFile: missing } }),
      );

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(error.message).toContain(missing);
      expect(vault.requests).toHaveLength(0);
    });
  });

  describe('when the secret cannot be read', () => {
    const cases: Array<{
      name: string;
      reference: () => VaultReference;
      setUp?: () => void;
      detail: RegExp;
    }> = [
      {
        name: 'a key the secret does not have',
        reference: () => ref('kv', 'app/db', 'token'),
        detail: /has no key token/,
      },
      {
        name: 'a path with no secret',
        reference: () => ref('kv', 'app/none', 'password'),
        detail: /no secret at kv\/data\/app\/none/,
      },
      {
        name: 'a version past the latest',
        reference: () => ref('kv', 'app/db', 'password', 9),
        detail: /no secret at kv\/data\/app\/db version 9/,
      },
      {
        name: 'a path the policy does not allow',
        reference: () => ref('kv', 'private/db', 'password'),
        setUp: () => vault.put('kv', 'private/db', { password: VALUE }),
        detail: /permission denied/,
      },
      {
        name: 'a deleted version',
        reference: () => ref('kv', 'app/db', 'password', 1),
        setUp: () => {
          vault.put('kv', 'app/db', { password: 'newer' });
          vault.deleteVersion('kv', 'app/db', 1);
        },
        detail: /version 1 of kv\/data\/app\/db was deleted/,
      },
      {
        name: 'a destroyed version',
        reference: () => ref('kv', 'app/db', 'password'),
        setUp: () => vault.destroy('kv', 'app/db', 1),
        detail: /version 1 of kv\/data\/app\/db was destroyed/,
      },
      {
        name: 'a key whose value is not a string',
        reference: () => ref('kv', 'app/db', 'pin'),
        detail: /key pin .* is not a string/,
      },
    ];

    it.each(cases)(
      'fails with SecretNotFoundError naming the reference for $name',
      async ({ reference, setUp, detail }) => {
        setUp?.();
        const manager = new VaultSecretManager(tokenSettings());
        const asked = reference();

        const error = await rejection(manager.resolve(asked));

        expect(error).toBeInstanceOf(SecretNotFoundError);
        expect((error as SecretNotFoundError).reference).toBe(asked.text);
        expect(error.message).toContain(asked.text);
        expect(error.message).toMatch(detail);
      },
    );
  });

  describe('with kubernetes auth', () => {
    beforeEach(() => {
      vault.addKubernetesRole('kubernetes', 'kiln', {
        jwt: JWT,
        policies: ['kv/data/app/'],
        ttlSeconds: 3600,
      });
    });

    it('logs in with the role and the JWT file, then reads with the login token', async () => {
      const manager = new VaultSecretManager(kubernetesSettings());

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
      expect(vault.logins).toBe(1);
      const [login, read] = vault.requests;
      expect(login).toMatchObject({ method: 'POST', url: '/v1/auth/kubernetes/login' });
      expect(read?.headers['x-vault-token']).toMatch(/^hvs\./);
    });

    it('reuses the login token while its lease lasts', async () => {
      const manager = new VaultSecretManager(kubernetesSettings());

      await manager.resolve(ref('kv', 'app/db', 'password'));
      await manager.resolve(ref('kv', 'app/db', 'user'));
      await Promise.all([
        manager.resolve(ref('kv', 'app/db', 'password')),
        manager.resolve(ref('kv', 'app/db', 'user')),
      ]);

      expect(vault.logins).toBe(1);
    });

    it('shares one login between resolves that start together', async () => {
      const manager = new VaultSecretManager(kubernetesSettings());

      const values = await Promise.all([
        manager.resolve(ref('kv', 'app/db', 'password')),
        manager.resolve(ref('kv', 'app/db', 'user')),
      ]);

      expect(values).toEqual([VALUE, OTHER_VALUE]);
      expect(vault.logins).toBe(1);
    });

    it('logs in again when the lease is about to end', async () => {
      let now = 1_000_000;
      const manager = new VaultSecretManager(kubernetesSettings(), undefined, () => now);
      await manager.resolve(ref('kv', 'app/db', 'password'));

      now += 3_600_000;

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
      expect(vault.logins).toBe(2);
    });

    it('logs in again once when Vault refuses a cached login token, then reads', async () => {
      const manager = new VaultSecretManager(kubernetesSettings());
      await manager.resolve(ref('kv', 'app/db', 'password'));
      vault.revokeLoginTokens();

      await expect(manager.resolve(ref('kv', 'app/db', 'user'))).resolves.toBe(OTHER_VALUE);
      expect(vault.logins).toBe(2);
    });

    it('fails with SecretNotFoundError when a fresh login token is refused too', async () => {
      vault.put('kv', 'private/db', { password: VALUE });
      const manager = new VaultSecretManager(kubernetesSettings());
      await manager.resolve(ref('kv', 'app/db', 'password'));

      const error = await rejection(manager.resolve(ref('kv', 'private/db', 'password')));

      expect(error).toBeInstanceOf(SecretNotFoundError);
      expect(error.message).toContain('vault:kv/data/private/db#password');
      expect(vault.logins).toBe(2);
    });

    it('logs in at the auth mount given, with the namespace header', async () => {
      vault.addKubernetesRole('k8s/prod', 'kiln', {
        jwt: JWT,
        policies: ['kv/data/'],
        ttlSeconds: 60,
        namespace: 'tenant-a',
      });
      vault.put('kv', 'app/db', { password: 'in-namespace' }, 'tenant-a');
      const manager = new VaultSecretManager(
        kubernetesSettings({
          namespace: 'tenant-a',
          auth: { method: 'kubernetes', role: 'kiln', mount: 'k8s/prod', jwtFile },
        }),
      );

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe('in-namespace');
      expect(vault.requests[0]).toMatchObject({
        url: '/v1/auth/k8s/prod/login',
        headers: expect.objectContaining({ 'x-vault-namespace': 'tenant-a' }),
      });
    });

    it.each([
      { name: 'a JWT the role does not accept', role: 'kiln', jwt: 'some-other-jwt' },
      { name: 'a role Vault does not know', role: 'nobody', jwt: JWT },
    ])(
      'fails with SecretManagerUnavailableError saying Vault refused the login for $name',
      async ({ role, jwt }) => {
        await writeFile(jwtFile, jwt);
        const manager = new VaultSecretManager(
          kubernetesSettings({ auth: { method: 'kubernetes', role, jwtFile } }),
        );

        const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

        expect(error).toBeInstanceOf(SecretManagerUnavailableError);
        expect(error.message).toContain(`Vault refused kiln's kubernetes login for role ${role}`);
        expect(vault.requests.filter((r) => r.url.includes('/data/'))).toHaveLength(0);
      },
    );
  });

  describe('when Vault is unavailable', () => {
    it('fails with SecretManagerUnavailableError when Vault accepts the connection and never answers', async () => {
      vault.hang = true;
      const manager = new VaultSecretManager(tokenSettings(), FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(error.message).toContain('did not answer');
      expect(vault.requests).toHaveLength(FAST.attempts);
    });

    it('fails with SecretManagerUnavailableError when a login never answers', async () => {
      vault.hang = true;
      const manager = new VaultSecretManager(kubernetesSettings(), FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(error.message).toContain('login for role kiln');
    });

    it.each([503, 500, 429])(
      'retries %i and resolves when a later attempt succeeds',
      async (status) => {
        vault.failNext(status, 2);
        const manager = new VaultSecretManager(tokenSettings(), { timeoutMs: 2_000, attempts: 3 });

        await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
        expect(vault.requests).toHaveLength(3);
      },
    );

    it('fails with SecretManagerUnavailableError after the attempts when Vault stays sealed', async () => {
      vault.sealed = true;
      const manager = new VaultSecretManager(tokenSettings(), { timeoutMs: 2_000, attempts: 3 });

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(error.message).toContain('503');
      expect(vault.requests).toHaveLength(3);
    });

    it('does not retry a 4xx answer', async () => {
      vault.failNext(400, 1);
      const manager = new VaultSecretManager(tokenSettings(), { timeoutMs: 2_000, attempts: 3 });

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(vault.requests).toHaveLength(1);
    });

    it('fails with SecretManagerUnavailableError when nothing listens at the address', async () => {
      const address = vault.url;
      await vault.stop();
      const manager = new VaultSecretManager({ ...tokenSettings(), address }, FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(error.message).toContain(`cannot reach Vault at ${address}`);
    });

    it("rejects with the signal's reason when the caller aborts", async () => {
      vault.hang = true;
      const manager = new VaultSecretManager(tokenSettings(), { timeoutMs: 10_000, attempts: 3 });
      const controller = new AbortController();

      const resolving = manager.resolve(ref('kv', 'app/db', 'password'), controller.signal);
      while (vault.requests.length === 0) await new Promise((done) => setTimeout(done, 10));
      controller.abort(new Error('build cancelled'));

      await expect(resolving).rejects.toThrow('build cancelled');
      expect(vault.requests).toHaveLength(1);
    });
  });

  describe('when Vault redirects', () => {
    let elsewhere: FakeVault;

    beforeEach(async () => {
      elsewhere = await FakeVault.start();
      elsewhere.addToken(TOKEN, { policies: ['kv/data/app/'] });
      elsewhere.put('kv', 'app/db', { password: VALUE });
    });

    afterEach(async () => {
      await elsewhere.stop();
    });

    it.each([301, 302, 307, 308])(
      'refuses a %i to another origin, naming it, and never sends the token there',
      async (status) => {
        vault.redirectNext(status, elsewhere.url);
        const manager = new VaultSecretManager(tokenSettings(), FAST);

        const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

        expect(error).toBeInstanceOf(SecretManagerUnavailableError);
        expect(error.message).toContain(`redirected to ${elsewhere.url}, another origin`);
        expect(elsewhere.requests).toEqual([]);
        // Not tried again: a redirect elsewhere is configuration, not a passing fault.
        expect(vault.requests).toHaveLength(1);
      },
    );

    it("refuses a kubernetes login redirected elsewhere, sending neither kiln's JWT nor a token there", async () => {
      vault.addKubernetesRole('kubernetes', 'kiln', {
        jwt: JWT,
        policies: ['kv/data/app/'],
        ttlSeconds: 600,
      });
      vault.redirectNext(307, elsewhere.url);
      const manager = new VaultSecretManager(kubernetesSettings(), FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error.message).toContain(`redirected to ${elsewhere.url}`);
      expect(elsewhere.requests).toEqual([]);
    });

    it('follows a redirect within the configured origin, token and all', async () => {
      vault.redirectNext(307, `${vault.url}/`);
      const manager = new VaultSecretManager(tokenSettings(), FAST);

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
      expect(vault.requests.map((r) => r.headers['x-vault-token'])).toEqual([TOKEN, TOKEN]);
    });

    it('gives up on a redirect loop within the origin', async () => {
      vault.redirectNext(302, `${vault.url}/`, 20);
      const manager = new VaultSecretManager(tokenSettings(), FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error.message).toContain('redirected more than 5 times');
    });
  });

  describe('over https', () => {
    const tls = generateTlsMaterial('fake-vault');
    let https: FakeVault;

    beforeEach(async () => {
      https = await FakeVault.start({ tls });
      https.addToken(TOKEN, { policies: ['kv/data/'] });
      https.put('kv', 'app/db', { password: VALUE });
    });

    afterEach(async () => {
      await https.stop();
    });

    it('trusts the CA in caFile', async () => {
      const caFile = join(dir, 'ca.pem');
      await writeFile(caFile, tls.caPem);
      const manager = new VaultSecretManager({ ...tokenSettings(), address: https.url, caFile });

      await expect(manager.resolve(ref('kv', 'app/db', 'password'))).resolves.toBe(VALUE);
    });

    it('fails with SecretManagerUnavailableError for a certificate no trusted CA signed', async () => {
      const manager = new VaultSecretManager({ ...tokenSettings(), address: https.url }, FAST);

      const error = await rejection(manager.resolve(ref('kv', 'app/db', 'password')));

      expect(error).toBeInstanceOf(SecretManagerUnavailableError);
      expect(https.requests).toHaveLength(0);
    });
  });
});
