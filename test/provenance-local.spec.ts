import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import {
  generateSigningKey,
  keyIdOf,
  SIGSTORE_BUNDLE_V03,
  verifyBundleWithKey,
} from '../src/provenance/signing.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeVault } from './support/fake-vault.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import {
  logDigestFromPages,
  registryBlob,
  registryManifest,
  statementOf,
  statementProblems,
} from './support/provenance.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/**
 * Provenance of local builds (docs/provenance.md, TESTPLAN PROV-01…04): real buildah, the real
 * Debian docker-registry (no referrers API: the fallback tag), the statement checked against the
 * vendored in-toto and SLSA schemas, the bundle verified with @sigstore/verify.
 */
describe('provenance of local builds (real buildah, real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-provenance-');
  let registry: LocalRegistry;
  let vault: FakeVault;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let adminB: ApiClient;
  let mainCommit: string;

  beforeAll(async () => {
    [registry, vault] = await Promise.all([LocalRegistry.start(), FakeVault.start()]);
    repo = new GitRepo();
    mainCommit = repo.commit('main', {
      'hello.txt': 'hello\n',
      Dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
    });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: dataDir,
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_PUBLIC_URL: 'https://kiln.example.com',
      },
    });
    seeded = await seedTenancy(kiln);
    for (const [project, name] of [
      [seeded.projectA, 'web'],
      [seeded.projectB, 'api'],
    ] as const) {
      await kiln.dataSource.query(
        'UPDATE projects SET git_repository_url = $1, name = $2 WHERE id = $3',
        [repo.url, name, project],
      );
    }
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    adminB = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
    // Tenant B signs with its own key, from Vault.
    const token = `hvs.${randomBytes(12).toString('hex')}`;
    vault.addToken(token, { policies: ['kv/'] });
    const tokenFile = join(dataDir, 'vault-token');
    writeFileSync(tokenFile, token);
    await new IntegrationsService(new IntegrationsRepository(kiln.dataSource)).setSecretManager(
      seeded.tenantB,
      'vault',
      { address: vault.url, auth: { method: 'token', tokenFile } },
    );
  }, 60_000);

  afterAll(async () => {
    await kiln?.close();
    await Promise.all([registry?.stop(), vault?.stop()]);
    await rm(dataDir, { recursive: true, force: true });
    if (repo !== undefined) await rm(repo.dir, { recursive: true, force: true });
  });

  async function finished(client: ApiClient, id: string): Promise<any> {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const build = await jsonOf(await client.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  async function built(client: ApiClient, project: string): Promise<any> {
    const created = await client.createBuild(project, 'main', {
      build_args: { RUN: randomBytes(4).toString('hex') },
    });
    expect((await client.request('POST', `/builds/${created.id}/start`)).status).toBe(200);
    return finished(client, created.id as string);
  }

  async function provenanceOf(client: ApiClient, id: string): Promise<any> {
    const response = await client.request('GET', `/builds/${id}/provenance`);
    expect(response.status).toBe(200);
    return jsonOf(response);
  }

  async function pemOf(client: ApiClient, keyId: string): Promise<string> {
    const response = await client.request('GET', `/signing-keys/${keyId}/pem`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/x-pem-file');
    return response.text();
  }

  let first: { build: any; provenance: any; pem: string };

  it('signs a valid SLSA v1 statement whose subject is the pushed digest, and attaches it (PROV-01, PROV-02)', async () => {
    const build = await built(admin, seeded.projectA);
    expect({ status: build.status, provenance: build.provenance }).toEqual({
      status: 'success',
      provenance: 'attached',
    });
    const provenance = await provenanceOf(admin, build.id);
    const { statement } = provenance;

    expect(statementProblems(statement)).toEqual([]);
    expect(statement.subject).toEqual([
      {
        name: `${registry.address}/kiln/web:${build.build_number}`,
        digest: { sha256: build.image_digest.slice('sha256:'.length) },
      },
    ]);
    const { buildDefinition, runDetails } = statement.predicate;
    expect(buildDefinition.buildType).toBe('https://kiln.dev/buildtypes/kaniko/v1');
    expect(runDetails.builder.id).toBe('https://kiln.example.com/builders/kaniko');
    expect(runDetails.metadata).toMatchObject({ invocationId: build.id });
    expect(new Date(runDetails.metadata.finishedOn).getTime()).toBe(
      new Date(build.completed_at).getTime(),
    );
    // The commit the checkout printed, though the build named only a branch.
    expect(buildDefinition.resolvedDependencies).toEqual(
      expect.arrayContaining([expect.objectContaining({ digest: { gitCommit: mainCommit } })]),
    );
    expect(buildDefinition.internalParameters).toMatchObject({ runner: 'local' });

    // Verified by @sigstore/verify with the published key, and by nothing kiln wrote.
    const keys = (await jsonOf(await admin.request('GET', '/signing-keys'))).keys;
    expect(keys).toEqual([
      expect.objectContaining({ key_id: provenance.key_id, active: true, source: 'generated' }),
    ]);
    const pem = await pemOf(admin, provenance.key_id);
    expect(keyIdOf(pem)).toBe(provenance.key_id);
    expect(verifyBundleWithKey(provenance.bundle, pem)).toEqual(statement);
    first = { build, provenance, pem };
  });

  it('a changed payload or another key does not verify (PROV-02)', () => {
    const { provenance, pem } = first;
    const tampered = structuredClone(provenance.bundle);
    const statement = statementOf(tampered);
    statement.subject[0].digest.sha256 = 'f'.repeat(64);
    tampered.dsseEnvelope.payload = Buffer.from(JSON.stringify(statement)).toString('base64');
    expect(() => verifyBundleWithKey(tampered, pem)).toThrow();
    expect(() =>
      verifyBundleWithKey(provenance.bundle, generateSigningKey().publicKeyPem),
    ).toThrow();
  });

  it('is in the registry as a referrer of the image, under the fallback tag (no referrers API)', async () => {
    const { build, provenance } = first;
    const repository = 'kiln/web';
    const hex = build.image_digest.slice('sha256:'.length);
    expect(
      (await fetch(`http://${registry.address}/v2/${repository}/referrers/${build.image_digest}`))
        .status,
    ).toBe(404);

    const index = await registryManifest(registry.address, repository, `sha256-${hex}`);
    expect(index.status).toBe(200);
    expect(index.json.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    const referrers = index.json.manifests.filter(
      (entry: any) => entry.artifactType === SIGSTORE_BUNDLE_V03,
    );
    expect(referrers.map((entry: any) => entry.digest)).toEqual(
      provenance.attachments.map((attachment: any) => attachment.digest),
    );
    const referrer = await registryManifest(registry.address, repository, referrers[0].digest);
    expect(referrer.digest).toBe(referrers[0].digest);
    expect(referrer.json.subject.digest).toBe(build.image_digest);
    expect(referrer.json.artifactType).toBe(SIGSTORE_BUNDLE_V03);
    const [layer] = referrer.json.layers;
    const bytes = await registryBlob(registry.address, repository, layer.digest);
    expect(JSON.parse(bytes.toString('utf8'))).toEqual(provenance.bundle);
    expect(provenance.attachments).toEqual([
      {
        kind: 'provenance',
        subject: `${registry.address}/${repository}@${build.image_digest}`,
        digest: referrers[0].digest,
        via: 'fallback-tag',
      },
    ]);
  });

  it("the log digest in byproducts equals one recomputed from the log's pages (PROV-03)", async () => {
    const { build, provenance } = first;
    const log = provenance.statement.predicate.runDetails.byproducts.find(
      (byproduct: any) => byproduct.name === 'build-log',
    );
    expect(log).toMatchObject({
      uri: `https://kiln.example.com/api/v1/builds/${build.id}/logs`,
      annotations: { lines: provenance.log.lines },
    });
    expect(provenance.log.digest).toBe(`sha256:${log.digest.sha256}`);
    expect(await logDigestFromPages(admin, build.id, provenance.log.lines)).toBe(log.digest.sha256);
    // kiln's own line about the attachment comes after the lines the digest covers.
    const all = await jsonOf(await admin.request('GET', `/builds/${build.id}/logs?limit=1000`));
    expect(all.total_lines).toBeGreaterThan(provenance.log.lines);
    expect(
      all.logs
        .slice(provenance.log.lines)
        .some((line: any) => line.message.includes('signed provenance attached')),
    ).toBe(true);
  });

  it('no secret value of the build is in its statement (PROV-04)', async () => {
    const plain = `npm-${randomBytes(12).toString('hex')}`;
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
      platforms: ['linux/amd64'],
      secrets: { NPM_TOKEN: plain },
      build_args: { VERSION: '1.2.3' },
    });
    const created = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    const build = await finished(admin, id);
    expect(build.status).toBe('success');

    const { statement, bundle } = await provenanceOf(admin, id);
    const [row] = await kiln.dataSource.query('SELECT spec FROM builds WHERE id = $1', [id]);
    const sealed = row.spec.config.secrets.NPM_TOKEN as string;
    for (const text of [JSON.stringify(statement), JSON.stringify(bundle)]) {
      expect(text).not.toContain(plain);
      expect(text).not.toContain(sealed);
    }
    expect(JSON.stringify(statement.predicate.buildDefinition.externalParameters)).toContain(
      '[redacted]',
    );
    expect(statement.predicate.buildDefinition.buildType).toBe(
      'https://kiln.dev/buildtypes/buildx/v1',
    );
  });

  it('a rotated key: old statements verify with the old key, new ones with the new key', async () => {
    const rotated = await admin.request('POST', '/signing-keys/rotate');
    expect(rotated.status).toBe(201);
    const fresh = await jsonOf(rotated);
    expect(fresh).toMatchObject({ active: true, source: 'generated', retired_at: null });
    expect(fresh.key_id).not.toBe(first.provenance.key_id);

    const keys = (await jsonOf(await admin.request('GET', '/signing-keys'))).keys;
    expect(keys.map((key: any) => [key.key_id, key.active])).toEqual([
      [fresh.key_id, true],
      [first.provenance.key_id, false],
    ]);
    expect(keys[1].retired_at).toEqual(expect.any(String));

    const build = await built(admin, seeded.projectA);
    const provenance = await provenanceOf(admin, build.id);
    expect(provenance.key_id).toBe(fresh.key_id);
    const newPem = await pemOf(admin, fresh.key_id);
    expect(() => verifyBundleWithKey(provenance.bundle, newPem)).not.toThrow();
    expect(() => verifyBundleWithKey(provenance.bundle, first.pem)).toThrow();
    expect(() => verifyBundleWithKey(first.provenance.bundle, first.pem)).not.toThrow();
    expect(() => verifyBundleWithKey(first.provenance.bundle, newPem)).toThrow();
  });

  it("signs with the tenant's own key from its secret manager; a key that is no P-256 key is refused", async () => {
    const own = generateSigningKey();
    vault.put('kv', 'kiln/signing', { pem: own.privateKeyPem });
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
      type: 'pkcs8',
      format: 'pem',
    }) as string;
    vault.put('kv', 'kiln/rsa', { pem: rsa });

    const refused = await adminB.request('PUT', '/settings/provenance', {
      signing_key: 'vault:kv/data/kiln/rsa#pem',
    });
    expect(refused.status).toBe(400);
    expect((await jsonOf(refused)).details.signing_key).toMatch(/P-256/);
    const notReference = await adminB.request('PUT', '/settings/provenance', {
      signing_key: own.privateKeyPem,
    });
    expect(notReference.status).toBe(400);
    expect(JSON.stringify(await jsonOf(notReference))).not.toContain('PRIVATE KEY');
    expect(await jsonOf(await adminB.request('GET', '/settings/provenance'))).toMatchObject({
      provenance: 'optional',
      signing_key: null,
    });

    const set = await adminB.request('PUT', '/settings/provenance', {
      signing_key: 'vault:kv/data/kiln/signing#pem',
    });
    expect(set.status).toBe(200);
    expect(await jsonOf(await adminB.request('POST', '/signing-keys/rotate'))).toMatchObject({
      code: 'CONFLICT',
    });

    const build = await built(adminB, seeded.projectB);
    expect(build.provenance).toBe('attached');
    const provenance = await provenanceOf(adminB, build.id);
    expect(provenance.key_id).toBe(own.keyId);
    expect(() => verifyBundleWithKey(provenance.bundle, own.publicKeyPem)).not.toThrow();
    const [stored] = await kiln.dataSource.query(
      'SELECT private_key_sealed, source FROM signing_keys WHERE key_id = $1',
      [own.keyId],
    );
    expect(stored).toEqual({ private_key_sealed: null, source: 'secret-manager' });
  });

  it('a key that cannot be read: the build succeeds saying so, or fails with ProvenanceFailed when required', async () => {
    vault.put('kv', 'kiln/signing', { pem: 'not a key' });

    const optional = await built(adminB, seeded.projectB);
    expect(optional.status).toBe('success');
    expect(optional.provenance).toMatch(/^failed: could not be signed: /);
    const messages = (
      await jsonOf(await adminB.request('GET', `/builds/${optional.id}/logs?limit=1000`))
    ).logs.map((line: any) => line.message);
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^WARN: \[kiln\] provenance could not be signed/),
      ]),
    );
    expect((await adminB.request('GET', `/builds/${optional.id}/provenance`)).status).toBe(404);

    expect(
      (await adminB.request('PUT', '/settings/provenance', { provenance: 'required' })).status,
    ).toBe(200);
    const required = await built(adminB, seeded.projectB);
    expect(required).toMatchObject({
      status: 'failed',
      failure_reason: 'ProvenanceFailed',
      provenance: null,
    });
    expect(required.error_message).toMatch(/could not be signed/);
    // The image was pushed before: the failed build says where it is.
    expect(required.images).toEqual([expect.stringContaining(`${registry.address}/kiln/api:`)]);
  });

  // Last: its image is the first build's (the same files), which the referrer test counts on.
  it('names a pinned commit, checked out exactly though its branch has moved on', async () => {
    const later = repo.commit('main', { 'later.txt': 'later\n' });
    const created = await admin.createBuild(seeded.projectA, 'main', {
      git_commit: mainCommit,
      build_args: { RUN: randomBytes(4).toString('hex') },
    });
    expect((await admin.request('POST', `/builds/${created.id}/start`)).status).toBe(200);

    const build = await finished(admin, created.id as string);

    expect(build.status).toBe('success');
    const { statement } = await provenanceOf(admin, build.id);
    expect(statement.predicate.buildDefinition.resolvedDependencies).toEqual(
      expect.arrayContaining([expect.objectContaining({ digest: { gitCommit: mainCommit } })]),
    );
    const messages = (
      await jsonOf(await admin.request('GET', `/builds/${build.id}/logs?limit=1000`))
    ).logs.map((line: any) => line.message);
    expect(messages).toContain(`kiln: checked out ${mainCommit}`);
    expect(messages).not.toContain(`kiln: checked out ${later}`);
  });
});
