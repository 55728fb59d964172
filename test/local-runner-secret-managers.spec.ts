import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { FakeS3 } from './support/fake-s3.js';
import { FakeTokenRegistry } from './support/fake-token-registry.js';
import { FakeVault } from './support/fake-vault.js';
import { fakeBuilderBin } from './support/fake-builders.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { auditCredentials } from './support/credential-audit.js';
import { databaseText } from './support/leaks.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { ociLayoutDigest } from '../src/registries/oci-layout.js';

/**
 * Issue 15 on a laptop: the local runner resolves a build's references through the same
 * BuildAccess as the operator (the tenant's Vault here, a fake speaking its HTTP API), gives the
 * values to buildah and packer only, masks them, and runs the registry pre-flight check.
 */
describe('the local runner resolves secret references and checks the registry', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-local-managers-');
  const bin = fakeBuilderBin();
  let database: TestDatabase;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let vault: FakeVault;
  let registry: FakeTokenRegistry;
  let s3: FakeS3;

  // Every value below is registered; no response, log line or row may show one (issue 27).
  const audit = auditCredentials(async (found) => {
    found.record("kiln's own log", kiln.logs.raw.join('\n'));
    await found.recordDatabase(kiln.dataSource);
  });

  beforeAll(async () => {
    [database, vault, registry, s3] = await Promise.all([
      createTestDatabase(),
      FakeVault.start(),
      FakeTokenRegistry.start(),
      FakeS3.start({ region: 'eu-west-1', buckets: ['kiln-images'] }),
    ]);
    repo = new GitRepo();
    repo.commit('main', { busybox: { copyFrom: '/bin/busybox' } });
    kiln = await startTestApp({
      database,
      env: {
        PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_EXTERNAL_TIMEOUT_MS: '300',
        KILN_EXTERNAL_ATTEMPTS: '2',
      },
    });
    audit.kilnOrigin(kiln.baseUrl);
    seeded = await seedTenancy(kiln);
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      seeded.projectA,
    ]);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    const token = audit.register(`hvs.${randomBytes(12).toString('hex')}`);
    vault.addToken(token, { policies: ['kv/'] });
    const tokenFile = join(dataDir, 'vault-token');
    writeFileSync(tokenFile, token);
    await integrations().setSecretManager(seeded.tenantA, 'vault', {
      address: vault.url,
      auth: { method: 'token', tokenFile },
    });
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await Promise.all([database?.drop(), vault?.stop(), registry?.stop(), s3?.stop()]);
    await rm(dataDir, { recursive: true, force: true });
    await rm(bin, { recursive: true, force: true });
    if (repo !== undefined) await rm(repo.dir, { recursive: true, force: true });
  });

  const integrations = (): IntegrationsService =>
    new IntegrationsService(new IntegrationsRepository(kiln.dataSource));

  async function started(manifest: Record<string, unknown>): Promise<string> {
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  async function finished(id: string): Promise<Record<string, unknown>> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  async function messagesOf(id: string): Promise<string[]> {
    const rows: Array<{ message: string }> = await kiln.dataSource.query(
      'SELECT message FROM build_log_lines WHERE build_id = $1 ORDER BY seq',
      [id],
    );
    return rows.map((row) => row.message);
  }

  it('a buildx secret from Vault reaches buildah’s secret mount, is masked, and is stored nowhere', async () => {
    const value = audit.register(randomBytes(18).toString('base64url'));
    vault.put('kv', 'team/npm', { token: value });
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: [
        'FROM scratch',
        'COPY busybox /bin/busybox',
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]',
        'RUN --mount=type=secret,id=NPM_TOKEN echo "token=$(cat /run/secrets/NPM_TOKEN)"',
        '',
      ].join('\n'),
      platforms: ['linux/amd64'],
      secrets: { NPM_TOKEN: 'vault:kv/data/team/npm#token' },
    });
    const id = await started(manifest);

    const build = await finished(id);
    expect({ status: build['status'], error: build['error_message'] }).toEqual({
      status: 'success',
      error: null,
    });
    const messages = (await messagesOf(id)).join('\n');
    expect(messages).toContain('token=***');
    expect(messages).not.toContain(value);
    expect(await databaseText(kiln.dataSource)).not.toContain(value);
    expect(existsSync(join(dataDir, 'builds', id, 'run'))).toBe(false);
  });

  it('a packer environment entry from Vault reaches packer’s environment, masked', async () => {
    const value = audit.register(randomBytes(18).toString('base64url'));
    vault.put('kv', 'ci/aws', { secret: value });
    const manifest = wizardManifest('packer');
    manifest['environment'] = { AWS_SECRET_ACCESS_KEY: 'vault:kv/data/ci/aws#secret' };
    (manifest['build_config'] as Record<string, unknown>)['variables'] = { mode: 'env' };
    const id = await started(manifest);

    expect((await finished(id))['status']).toBe('success');
    const messages = await messagesOf(id);
    expect(messages).toContain('AWS_SECRET_ACCESS_KEY=***');
    expect(messages.join('\n')).not.toContain(value);
  });

  it('a reference Vault does not hold fails the build with SecretUnavailable before anything runs', async () => {
    const manifest = wizardManifest('packer');
    manifest['environment'] = { TOKEN: 'vault:kv/data/ci/none#token' };
    const id = await started(manifest);

    const build = await finished(id);
    expect(build['status']).toBe('failed');
    expect(build['error_message']).toContain(
      'manifest.environment.TOKEN: vault:kv/data/ci/none#token could not be resolved',
    );
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      id,
    ]);
    expect(row.failure_reason).toBe('SecretUnavailable');
  });

  it('registry credentials the registry refuses fail the build with RegistryUnauthorized', async () => {
    registry.addUser('robot', randomBytes(9).toString('hex'), { 'team/app': ['pull', 'push'] });
    audit.registerPair('robot', 'wrong-password');
    vault.put('kv', 'registry/robot', { password: 'wrong-password' });
    await integrations().setRegistry(seeded.tenantA, 'harbor', {
      address: registry.address,
      insecure: true,
      username: 'robot',
      password: 'vault:kv/data/registry/robot#password',
    });
    const manifest = wizardManifest('kaniko');
    (manifest['build_config'] as Record<string, unknown>)['registry_repository'] =
      `${registry.address}/team/app`;
    const id = await started(manifest);

    const build = await finished(id);
    expect(build['status']).toBe('failed');
    expect(build['error_message']).toContain(`${registry.address}/team/app`);
    expect(build['error_message']).not.toContain('wrong-password');
    const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
      id,
    ]);
    expect(row.failure_reason).toBe('RegistryUnauthorized');
    await integrations().removeRegistry(seeded.tenantA, 'harbor');
  });

  describe('registry_type s3', () => {
    const accessKeyId = `AKIA${randomBytes(8).toString('hex').toUpperCase()}`;
    const secretAccessKey = randomBytes(20).toString('base64');

    beforeAll(() => {
      audit.register(secretAccessKey);
      s3.addUser({ accessKeyId, secretAccessKey });
      vault.put('kv', 'ci/s3', { id: accessKeyId, secret: secretAccessKey });
    });

    afterEach(() =>
      integrations()
        .removeRegistry(seeded.tenantA, 's3')
        .catch(() => undefined),
    );

    function s3Manifest(): Record<string, unknown> {
      const manifest = wizardManifest('buildx');
      Object.assign(manifest['build_config'] as Record<string, unknown>, {
        registry_type: 's3',
        dockerfile: 'FROM scratch\nCOPY busybox /bin/busybox\n',
        platforms: ['linux/amd64'],
      });
      return manifest;
    }

    it('saves the image as an OCI layout, uploads it to the bucket and records its s3:// address and digest', async () => {
      await integrations().setRegistry(seeded.tenantA, 's3', {
        bucket: 'kiln-images',
        prefix: 'builds',
        region: 'eu-west-1',
        endpoint: s3.url,
        forcePathStyle: true,
        accessKeyId: 'vault:kv/data/ci/s3#id',
        secretAccessKey: 'vault:kv/data/ci/s3#secret',
      });
      const id = await started(s3Manifest());

      const build = await finished(id);
      expect({ status: build['status'], error: build['error_message'] }).toEqual({
        status: 'success',
        error: null,
      });
      const digest = build['image_digest'] as string;
      expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      const images = build['images'] as string[];
      expect(images).toEqual([
        `s3://kiln-images/builds/${seeded.projectA}/${String(build['build_number'])}-${digest.slice(7, 19)}.oci.tar`,
      ]);
      const stored = s3.object('kiln-images', images[0]!.slice('s3://kiln-images/'.length))!;
      expect(stored.contentType).toBe('application/vnd.oci.image.layout.v1+tar');
      expect(stored.metadata['oci-digest']).toBe(digest);
      // The object is the layout whose manifest is the recorded digest.
      const tar = join(dataDir, 'downloaded.oci.tar');
      writeFileSync(tar, stored.body);
      expect((await ociLayoutDigest(tar)).digest).toBe(digest);
      const messages = (await messagesOf(id)).join('\n');
      expect(messages).toMatch(/STEP \d+\/\d+/); // buildah's, which a refused build never prints
      expect(messages).toContain(`uploaded ${images[0]}`);
      expect(messages).not.toContain(secretAccessKey);
      expect(await databaseText(kiln.dataSource)).not.toContain(secretAccessKey);
    });

    it('keys S3 refuses fail the build with RegistryUnauthorized before anything is built', async () => {
      vault.put('kv', 'ci/s3-wrong', { id: accessKeyId, secret: 'not-the-secret-key' });
      await integrations().setRegistry(seeded.tenantA, 's3', {
        bucket: 'kiln-images',
        region: 'eu-west-1',
        endpoint: s3.url,
        forcePathStyle: true,
        accessKeyId: 'vault:kv/data/ci/s3-wrong#id',
        secretAccessKey: 'vault:kv/data/ci/s3-wrong#secret',
      });
      const id = await started(s3Manifest());

      const build = await finished(id);
      expect(build['status']).toBe('failed');
      expect(build['error_message']).toContain('s3://kiln-images');
      const [row] = await kiln.dataSource.query('SELECT failure_reason FROM builds WHERE id = $1', [
        id,
      ]);
      expect(row.failure_reason).toBe('RegistryUnauthorized');
      // buildah never ran: none of its `STEP n/m` lines.
      expect((await messagesOf(id)).filter((line) => /STEP \d+\/\d+/.test(line))).toEqual([]);
    });

    it('a tenant without S3 settings gets InvalidSpec saying how to add them', async () => {
      const id = await started(s3Manifest());
      const build = await finished(id);
      expect(build['status']).toBe('failed');
      expect(build['error_message']).toContain('kiln settings registry set s3');
    });
  });
});
