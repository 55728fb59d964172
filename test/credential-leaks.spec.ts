import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { auditCredentials } from './support/credential-audit.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { fakeBuilderBin } from './support/fake-builders.js';
import { FakeTokenRegistry } from './support/fake-token-registry.js';
import { FakeVault } from './support/fake-vault.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Issue 27, items 1 and 2, end to end with the local runner: a registry that echoes the
 * Authorization header it got, a Vault whose stored address carries credentials (a row from before
 * they were refused), a project URL likewise. What a viewer reads, what the build log holds and
 * what kiln logs carry none of the credentials, in any form (the audit checks every response and
 * the whole database when the suite ends).
 */
describe('credentials never reach what a build shows', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-credential-leaks-');
  const bin = fakeBuilderBin();
  const registryPassword = `robot-pw-${randomBytes(9).toString('hex')}`;
  const vaultToken = `hvs.${randomBytes(12).toString('hex')}`;
  const urlPassword = `url-pw-${randomBytes(9).toString('hex')}`;
  let database: TestDatabase;
  let vault: FakeVault;
  let registry: FakeTokenRegistry;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let viewer: ApiClient;

  const audit = auditCredentials(async (found) => {
    found.record("kiln's own log", kiln.logs.raw.join('\n'));
    await found.recordDatabase(kiln.dataSource);
  });

  beforeAll(async () => {
    audit.registerPair('robot-ci', registryPassword);
    audit.register(vaultToken);
    audit.register(urlPassword);
    [database, vault, registry] = await Promise.all([
      createTestDatabase(),
      FakeVault.start(),
      FakeTokenRegistry.start({ basicAuthMode: true, echoAuthorization: true }),
    ]);
    kiln = await startTestApp({
      database,
      env: {
        PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_EXTERNAL_TIMEOUT_MS: '300',
        KILN_EXTERNAL_ATTEMPTS: '1',
      },
    });
    audit.kilnOrigin(kiln.baseUrl);
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    viewer = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.viewer.email),
      seeded.tenantA,
    );
    vault.addToken(vaultToken, { policies: ['kv/'] });
    vault.put('kv', 'registry/harbor', { password: registryPassword });
    const tokenFile = join(dataDir, 'vault-token');
    writeFileSync(tokenFile, vaultToken);
    // robot-ci may pull but not push: the registry refuses the pre-flight, echoing the header.
    registry.addUser('robot-ci', registryPassword, { 'team/app': ['pull'] });
    await integrations().setSecretManager(seeded.tenantA, 'vault', {
      address: vault.url,
      auth: { method: 'token', tokenFile },
    });
    await integrations().setRegistry(seeded.tenantA, 'harbor', {
      address: registry.address,
      insecure: true,
      username: 'robot-ci',
      password: 'vault:kv/data/registry/harbor#password',
    });
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await Promise.all([database?.drop(), vault?.stop(), registry?.stop()]);
    await rm(dataDir, { recursive: true, force: true });
    await rm(bin, { recursive: true, force: true });
  });

  const integrations = (): IntegrationsService =>
    new IntegrationsService(new IntegrationsRepository(kiln.dataSource));

  /** A kaniko build pushing to the tenant's registry, started; answers it once it ended. */
  async function failedBuild(tag: string): Promise<Record<string, any>> {
    const manifest = wizardManifest('kaniko');
    manifest['tags'] = tag;
    (manifest['build_config'] as Record<string, unknown>)['registry_repository'] =
      `${registry.address}/team/app`;
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const build = await jsonOf(await viewer.request('GET', `/builds/${id}`));
      if (build.status === 'failed') return build;
      if (Date.now() > deadline) throw new Error(`build ${id} is ${build.status}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  async function logOf(id: string): Promise<string> {
    const page = await jsonOf(await viewer.request('GET', `/builds/${id}/logs?limit=1000`));
    return (page.logs as Array<{ message: string }>).map((line) => line.message).join('\n');
  }

  it('a registry that echoes the Authorization header it got puts the credential, in no form, into the error message or the log', async () => {
    const build = await failedBuild('echo');

    expect(build).toMatchObject({
      failure_reason: 'RegistryUnauthorized',
      error_message: expect.stringContaining('requested access to the resource is denied'),
    });
    const basic = Buffer.from(`robot-ci:${registryPassword}`).toString('base64');
    for (const text of [build.error_message as string, await logOf(build.id)]) {
      expect(text).not.toContain(registryPassword);
      expect(text).not.toContain(basic.slice(0, 16));
    }
    // The registry did echo it: the test exercises the leak it guards against.
    expect(registry.requests.some((r) => r.headers.authorization === `Basic ${basic}`)).toBe(true);
  });

  it("a Vault address stored with credentials shows without them in the build's error message", async () => {
    const address = `http://kiln:${urlPassword}@${new URL(vault.url).host}`;
    await kiln.dataSource.query(
      `UPDATE tenant_secret_managers SET settings = jsonb_set(settings, '{address}', to_jsonb($2::text))
        WHERE tenant_id = $1 AND type = 'vault'`,
      [seeded.tenantA, address],
    );
    try {
      const build = await failedBuild('vault-url');

      expect(build).toMatchObject({
        failure_reason: 'SecretUnavailable',
        error_message: expect.stringContaining(`cannot reach Vault at ${vault.url}`),
      });
      expect(build.error_message).not.toContain(urlPassword);
      expect(await logOf(build.id)).not.toContain(urlPassword);
    } finally {
      await kiln.dataSource.query(
        `UPDATE tenant_secret_managers SET settings = jsonb_set(settings, '{address}', to_jsonb($2::text))
          WHERE tenant_id = $1 AND type = 'vault'`,
        [seeded.tenantA, vault.url],
      );
    }
  });

  it('a project URL stored with credentials is listed without them to anyone with build:list', async () => {
    const [{ url }] = await kiln.dataSource.query(
      'SELECT git_repository_url AS url FROM projects WHERE id = $1',
      [seeded.projectA],
    );
    const withCredentials = String(url).replace('https://', `https://ci:${urlPassword}@`);
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $2 WHERE id = $1', [
      seeded.projectA,
      withCredentials,
    ]);
    try {
      const listed = await jsonOf(await viewer.request('GET', '/projects'));

      expect(listed.projects).toContainEqual(
        expect.objectContaining({ id: seeded.projectA, git_repository_url: url }),
      );
    } finally {
      await kiln.dataSource.query('UPDATE projects SET git_repository_url = $2 WHERE id = $1', [
        seeded.projectA,
        url,
      ]);
    }
  });
});
