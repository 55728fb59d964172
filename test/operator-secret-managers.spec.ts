import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { BUILDKIT_IMAGE, GIT_IMAGE } from '../src/build-methods/images.js';
import { BUILD_SECRETS_DIR } from '../src/build-methods/job.js';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { ProjectsRepository } from '../src/projects/projects.repository.js';
import { ProjectsService } from '../src/projects/projects.service.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeAwsSecretsManager } from './support/fake-aws-secrets-manager.js';
import { FakeTokenRegistry } from './support/fake-token-registry.js';
import { FakeVault } from './support/fake-vault.js';
import { auditCredentials } from './support/credential-audit.js';
import { tokenFor } from './support/auth.js';
import { jsonOf } from './support/http.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import { hostPath } from './support/kube/kubelet.js';
import { NS, OperatorGround, until } from './support/operator-ground.js';

noteDoubleOnly('secret managers and registries behind fakes');

/**
 * Issue 15 end to end: a build's secret references resolved by the tenant's secret manager when
 * the operator starts it, into the build's own Secret and nowhere else; the registry's pre-flight
 * check before the Job. The managers and the registry are fakes that speak the vendors' wire
 * protocols (each pinned by its own spec); the SDKs are the real ones.
 */
const EXTERNAL = { KILN_EXTERNAL_TIMEOUT_MS: '300', KILN_EXTERNAL_ATTEMPTS: '2' };

let ground: OperatorGround;
let vault: FakeVault;
let aws: FakeAwsSecretsManager;
let registry: FakeTokenRegistry;
let files: string;

// Every credential below is registered; no response, log line, Event, status or row may show one.
const audit = auditCredentials((found) => ground.showTo(found));

/** A value no fixture holds, long enough to be masked. */
const secretValue = (): string => audit.register(randomBytes(18).toString('base64url'));

beforeAll(async () => {
  [ground, vault, aws, registry] = await Promise.all([
    OperatorGround.start('operator-secret-managers', { apiEnv: EXTERNAL }),
    FakeVault.start(),
    FakeAwsSecretsManager.start({ region: 'eu-west-1' }),
    FakeTokenRegistry.start(),
  ]);
  files = mkdtempSync(join(tmpdir(), 'kiln-managers-'));
  await ground.startOperator({ env: EXTERNAL });
});

afterEach(async () => {
  vault.hang = false;
  await integrations()
    .removeRegistry(ground.seeded.tenantA, 'harbor')
    .catch(() => undefined);
});

afterAll(async () => {
  await Promise.all([ground?.close(), vault?.stop(), aws?.stop(), registry?.stop()]);
  rmSync(files, { recursive: true, force: true });
});

/** What `kiln settings secret-manager|registry set` write, on the suite's database. */
const integrations = (): IntegrationsService =>
  new IntegrationsService(new IntegrationsRepository(ground.api.dataSource));

/** A file the tenant's settings name (a mounted Kubernetes Secret in a real deployment). */
function file(name: string, text: string): string {
  const path = join(files, name);
  writeFileSync(path, text);
  return path;
}

async function useVault(): Promise<void> {
  const token = audit.register(`hvs.${randomBytes(12).toString('hex')}`);
  vault.addToken(token, { policies: ['kv/'] });
  await integrations().setSecretManager(ground.seeded.tenantA, 'vault', {
    address: vault.url,
    auth: { method: 'token', tokenFile: file('vault-token', token) },
  });
}

async function useAws(): Promise<void> {
  const id = `AKIA${randomBytes(8).toString('hex').toUpperCase()}`;
  const key = audit.register(randomBytes(20).toString('base64'));
  aws.addCredentials(id, key);
  await integrations().setSecretManager(ground.seeded.tenantA, 'aws_secretsmanager', {
    region: 'eu-west-1',
    endpoint: aws.url,
    credentialsFile: file(
      'aws-credentials',
      `[default]\naws_access_key_id = ${id}\naws_secret_access_key = ${key}\n`,
    ),
  });
}

/** A builder that prints what a careless Dockerfile step would: the mounted secret. */
function printingBuilder(): void {
  ground.cluster.kubelet.script(BUILDKIT_IMAGE, {
    run: (context) => {
      const value = readFileSync(
        hostPath(context, `${BUILD_SECRETS_DIR}/build-secret.npm_token`),
        'utf8',
      );
      return Promise.resolve({ lines: [`npm token: ${value}`, 'pushed'] });
    },
  });
}

/** A buildx build with `secrets`, created and started through the API. */
async function started(
  secretManager: string,
  secrets: Record<string, string>,
  repository = 'registry.example.com/team/app',
): Promise<string> {
  const manifest = wizardManifest('buildx');
  Object.assign(manifest['build_config'] as Record<string, unknown>, {
    secret_manager_type: secretManager,
    secrets,
    registry_repository: repository,
  });
  return ground.startedWizard(manifest);
}

describe('secret references through the operator', () => {
  it.each([
    [
      'vault',
      useVault,
      (value: string): string => {
        vault.put('kv', 'team/npm', { token: value });
        return 'vault:kv/data/team/npm#token';
      },
    ],
    [
      'aws_secretsmanager',
      useAws,
      (value: string): string => {
        aws.put('team/npm', JSON.stringify({ token: value }));
        return 'aws:team/npm#token';
      },
    ],
  ] as const)(
    'a buildx secret from %s reaches the builder through the build’s Secret only, masked in the log',
    async (manager, configure, seed) => {
      await configure();
      const value = secretValue();
      const reference = seed(value);
      printingBuilder();

      const id = await started(manager, { npm_token: reference });
      const build = await ground.ended(id);
      expect({ status: build.status, error: build.error_message }).toEqual({
        status: 'success',
        error: null,
      });

      const secret = ground.buildSecret(id)!;
      expect(Buffer.from(secret.data!['build-secret.npm_token']!, 'base64').toString()).toBe(value);
      expect(secret.metadata?.ownerReferences).toEqual([
        expect.objectContaining({ kind: 'Job', name: `kiln-${id}`, controller: true }),
      ]);
      const lines = await ground.storedLines(id);
      expect(lines.map((l) => l.message)).toContain('npm token: ***');
      const encoded = Buffer.from(value).toString('base64');
      for (const text of [ground.clusterTextBesides(id), await ground.databaseText()]) {
        expect(text).not.toContain(value);
        expect(text).not.toContain(encoded);
      }
      // The reference itself is no secret: the build's record keeps it, sealed like any secret.
      expect(reference).toMatch(/^(vault|aws):/);

      // The Secret goes with its Job (Kubernetes' garbage collector).
      ground.cluster.deleteAsController('batch/v1', 'Job', NS, `kiln-${id}`, 'Background');
      await until('the build’s Secret to be collected', () => ground.buildSecret(id) === undefined);
    },
  );

  it('a reference to a secret that does not exist fails the build with SecretUnavailable, naming it', async () => {
    await useVault();
    const id = await started('vault', { npm_token: 'vault:kv/data/team/missing#token' });
    const build = await ground.failedWith(id, 'SecretUnavailable');
    expect(build.error_message).toContain(
      'manifest.build_config.secrets.npm_token: vault:kv/data/team/missing#token could not be resolved',
    );
    expect(ground.jobOf(id)).toBeUndefined();
    expect(ground.buildSecret(id)).toBeUndefined();
  });

  it('a manager that does not answer fails the start with a clear message, no Job and no hang', async () => {
    await useVault();
    vault.hang = true;
    const id = await started('vault', { npm_token: 'vault:kv/data/team/npm#token' });
    const build = await ground.failedWith(id, 'SecretUnavailable');
    expect(build.error_message).toMatch(/vault: .*(timed out|did not answer|unavailable)/i);
    expect(ground.jobOf(id)).toBeUndefined();
  });

  it('another tenant’s build cannot use tenant A’s manager: its references resolve against its own settings', async () => {
    await useVault();
    vault.put('kv', 'team/npm', { token: secretValue() });
    const adminB = new ApiClient(
      ground.api,
      await tokenFor(ground.api.baseUrl, ground.seeded.users.adminB.email),
      ground.seeded.tenantB,
    );
    const manifest = wizardManifest('buildx');
    Object.assign(manifest['build_config'] as Record<string, unknown>, {
      secrets: { npm_token: 'vault:kv/data/team/npm#token' },
      registry_repository: 'registry.example.com/b/app',
    });
    const created = await adminB.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantB,
      project_id: ground.seeded.projectB,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await adminB.request('POST', `/builds/${id}/start`)).status).toBe(200);

    const build = await until('tenant B’s build to end', async () => {
      const record = await jsonOf(await adminB.request('GET', `/builds/${id}`));
      return ['success', 'failed'].includes(record.status) ? record : undefined;
    });
    expect(build.status).toBe('failed');
    expect(build.error_message).toContain('the tenant has no vault settings');
    expect(ground.jobOf(id)).toBeUndefined();
  });

  it('a tenant without settings for the chosen manager gets a message saying how to add them', async () => {
    await integrations()
      .removeSecretManager(ground.seeded.tenantA, 'aws_secretsmanager')
      .catch(() => undefined);
    const id = await started('aws_secretsmanager', { npm_token: 'aws:team/npm#token' });
    const build = await ground.failedWith(id, 'SecretUnavailable');
    expect(build.error_message).toContain('kiln settings secret-manager set aws_secretsmanager');
  });
});

describe('the registry pre-flight check through the operator', () => {
  async function useHarbor(password: string): Promise<string> {
    audit.registerPair('robot$team+ci', password);
    await useVault();
    vault.put('kv', 'registry/robot', { username: 'robot$team+ci', password });
    await integrations().setRegistry(ground.seeded.tenantA, 'harbor', {
      address: registry.address,
      insecure: true,
      username: 'vault:kv/data/registry/robot#username',
      password: 'vault:kv/data/registry/robot#password',
    });
    return `${registry.address}/team/app`;
  }

  it('good robot credentials pass, and the builder gets them as its Docker config', async () => {
    const password = secretValue();
    registry.addUser('robot$team+ci', password, { 'team/app': ['pull', 'push', 'delete'] });
    const repository = await useHarbor(password);
    printingBuilder();
    vault.put('kv', 'team/npm', { token: secretValue() });

    const id = await started('vault', { npm_token: 'vault:kv/data/team/npm#token' }, repository);
    expect((await ground.ended(id)).status).toBe('success');
    const config = JSON.parse(
      Buffer.from(ground.buildSecret(id)!.data!['.dockerconfigjson']!, 'base64').toString(),
    );
    expect(config).toEqual({
      auths: {
        [registry.address]: {
          auth: Buffer.from(`robot$team+ci:${password}`).toString('base64'),
        },
      },
    });
    expect(registry.openUploads()).toEqual([]);
    for (const text of [ground.clusterTextBesides(id), await ground.databaseText()])
      expect(text).not.toContain(password);
  });

  it('wrong credentials fail the build with RegistryUnauthorized before any Job', async () => {
    registry.addUser('robot$team+ci', secretValue(), { 'team/app': ['pull', 'push'] });
    const repository = await useHarbor('not-the-password');
    const id = await started('vault', {}, repository);
    const build = await ground.failedWith(id, 'RegistryUnauthorized');
    expect(build.error_message).toContain(`${registry.address}/team/app`);
    expect(build.error_message).not.toContain('not-the-password');
    expect(ground.jobOf(id)).toBeUndefined();
  });
});

describe('project git credentials through the operator', () => {
  const projects = (): ProjectsService =>
    new ProjectsService(new ProjectsRepository(ground.api.dataSource));

  afterEach(async () => {
    await projects().setGitCredentials(ground.seeded.tenantA, ground.seeded.projectA, null);
  });

  it('the source container clones with a token from Vault, through a credential helper real git runs', async () => {
    await useVault();
    const token = secretValue();
    vault.put('kv', 'git/ci', { token });
    await projects().setGitCredentials(ground.seeded.tenantA, ground.seeded.projectA, {
      username: 'kiln-ci',
      password: 'vault:kv/data/git/ci#token',
    });
    // What git itself answers when it needs credentials, in the source container's environment.
    let answered = '';
    ground.cluster.kubelet.script(GIT_IMAGE, {
      run: (context) => {
        const fill = spawnSync('git', ['credential', 'fill'], {
          input: 'protocol=https\nhost=git.example.com\n\n',
          env: { ...context.env, PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: files },
          encoding: 'utf8',
        });
        answered = fill.stdout;
        return Promise.resolve({
          lines: ["Cloning into '/workspace'...", ...fill.stdout.trim().split('\n')],
        });
      },
    });
    printingBuilder();
    vault.put('kv', 'team/npm', { token: secretValue() });

    const id = await started('vault', { npm_token: 'vault:kv/data/team/npm#token' });
    expect((await ground.ended(id)).status).toBe('success');
    expect(answered).toContain('username=kiln-ci');
    expect(answered).toContain(`password=${token}`);
    const source = ground
      .jobOf(id)!
      .spec!.template.spec!.initContainers!.find((c) => c.name === 'source')!;
    expect(source.env).toEqual(
      expect.arrayContaining([
        {
          name: 'KILN_GIT_PASSWORD',
          valueFrom: { secretKeyRef: { name: `kiln-${id}`, key: 'git.password' } },
        },
      ]),
    );
    // Printed by the source container: masked in the stored log.
    const lines = (await ground.storedLines(id)).map((l) => l.message).join('\n');
    expect(lines).toContain('password=***');
    for (const text of [lines, ground.clusterTextBesides(id), await ground.databaseText()]) {
      expect(text).not.toContain(token);
    }
  });
});
