import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILDKIT_IMAGE } from '../src/build-methods/images.js';
import { BUILD_SECRETS_DIR } from '../src/build-methods/job.js';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { wizardManifest } from './support/builds.js';
import { ConnectProxy } from './support/connect-proxy.js';
import { FAKE_VAULT_HOST, FakeAzureKeyVault } from './support/fake-azure-key-vault.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import { hostPath } from './support/kube/kubelet.js';
import { OperatorGround } from './support/operator-ground.js';
import { auditCredentials } from './support/credential-audit.js';

noteDoubleOnly('Azure Key Vault and an egress proxy behind fakes');

/**
 * Issue 15 with Azure Key Vault, the production way: the operator builds the adapter from the
 * tenant's settings alone (no test agent), so it reaches the vault by its name through the
 * HTTPS_PROXY of its environment, as from a cluster behind an egress proxy, and trusts the vault's
 * CA through the settings' caFile. The fake vault and Entra ID speak the documented protocol
 * (test/fake-azure-key-vault.spec.ts); the SDKs are the real ones.
 */
const TENANT = '3f1c8a52-7d2e-4b7a-9c1e-5a6b7c8d9e0f';
const CLIENT = '6a0e4b7c-1d2f-4e3a-8b9c-0d1e2f3a4b5c';
const FEDERATED_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.kiln-service-account.signature';
// An Azure read is four requests (the vault's challenge, OpenID configuration, token, read).
const EXTERNAL = { KILN_EXTERNAL_TIMEOUT_MS: '2000', KILN_EXTERNAL_ATTEMPTS: '2' };
/** The proxy variables as the jest process had them, put back after the suite. */
const environment = { HTTPS_PROXY: process.env['HTTPS_PROXY'], NO_PROXY: process.env['NO_PROXY'] };

let ground: OperatorGround;
let azure: FakeAzureKeyVault;
let proxy: ConnectProxy;
let files: string | undefined;

// Secret values and kiln's federated token: shown to no one.
const audit = auditCredentials((found) => ground.showTo(found));
audit.register(FEDERATED_TOKEN);

/** A value no fixture holds, long enough to be masked. */
const secretValue = (): string => audit.register(randomBytes(18).toString('base64url'));

beforeAll(async () => {
  [ground, azure] = await Promise.all([
    OperatorGround.start('operator-azure-key-vault', { apiEnv: EXTERNAL }),
    FakeAzureKeyVault.start({
      tenantId: TENANT,
      clientId: CLIENT,
      federatedToken: FEDERATED_TOKEN,
    }),
  ]);
  // The proxy, not the operator, resolves the vault's name: nothing leaves the machine.
  proxy = await ConnectProxy.start({
    [`${FAKE_VAULT_HOST}:${azure.port}`]: `127.0.0.1:${azure.port}`,
  });
  files = mkdtempSync(join(tmpdir(), 'kiln-azure-operator-'));
  // A process edge, not kiln configuration: the Azure SDK reads HTTPS_PROXY and NO_PROXY from
  // process.env itself, and this suite's operator runs in the jest process, so they are set on
  // it before the operator starts and restored after. NO_PROXY keeps local traffic (kiln's API,
  // the API server double, the fake's Entra ID by address) off the proxy.
  process.env['HTTPS_PROXY'] = proxy.url;
  process.env['NO_PROXY'] = '127.0.0.1,localhost';
  await ground.startOperator({ env: EXTERNAL });
});

afterAll(async () => {
  await Promise.all([ground?.close(), azure?.stop(), proxy?.stop()]);
  for (const [name, value] of Object.entries(environment)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  if (files !== undefined) rmSync(files, { recursive: true, force: true });
});

/** What `kiln settings secret-manager set` writes, on the suite's database. */
const integrations = (): IntegrationsService =>
  new IntegrationsService(new IntegrationsRepository(ground.api.dataSource));

/** A file the tenant's settings name (a mounted Kubernetes Secret in a real deployment). */
function file(name: string, text: string): string {
  const path = join(files!, name);
  writeFileSync(path, text);
  return path;
}

/**
 * The tenant's Key Vault settings: workload identity with `federatedToken`, in a file of its own so
 * that every call makes new settings and so a new adapter (no token signed in by an earlier test),
 * and the fake's CA as caFile. The authority is the fake's by address, which NO_PROXY names: MSAL
 * accepts only an OpenID configuration whose issuer has the authority's origin, and the fake
 * states its issuer by address.
 */
async function useAzure(
  overrides: { federatedToken?: string; caFile?: string } = {},
): Promise<void> {
  const { federatedToken = FEDERATED_TOKEN, caFile = file('azure-ca.pem', azure.ca) } = overrides;
  const tokenFile = `azure-identity-token-${randomBytes(4).toString('hex')}`;
  await integrations().setSecretManager(ground.seeded.tenantA, 'azure_keyvault', {
    vaultUrl: azure.vaultUrl,
    tenantId: TENANT,
    clientId: CLIENT,
    federatedTokenFile: file(tokenFile, `${federatedToken}\n`),
    authorityHost: azure.authorityHost,
    caFile,
  });
}

/** A builder that prints what a careless Dockerfile step would: the mounted secret. */
function printingBuilder(): void {
  ground.cluster.kubelet.script(BUILDKIT_IMAGE, {
    run: async (context) => {
      const value = await readFile(
        hostPath(context, `${BUILD_SECRETS_DIR}/build-secret.npm_token`),
        'utf8',
      );
      return { lines: [`npm token: ${value}`, 'pushed'] };
    },
  });
}

/** A buildx build with `secrets` from Azure Key Vault, created and started through the API. */
async function started(secrets: Record<string, string>): Promise<string> {
  const manifest = wizardManifest('buildx');
  Object.assign(manifest['build_config'] as Record<string, unknown>, {
    secret_manager_type: 'azure_keyvault',
    secrets,
    registry_repository: 'registry.example.com/team/app',
  });
  return ground.startedWizard(manifest);
}

describe('Azure Key Vault references through the operator', () => {
  it('a buildx secret from Key Vault, read through the egress proxy, reaches the builder through the build’s Secret only, masked in the log', async () => {
    await useAzure();
    const value = secretValue();
    azure.put('npm-token', value);
    printingBuilder();

    const id = await started({ npm_token: 'azure:npm-token' });
    const build = await ground.ended(id);
    expect({ status: build.status, error: build.error_message }).toEqual({
      status: 'success',
      error: null,
    });

    const secret = ground.buildSecret(id)!;
    expect(Buffer.from(secret.data!['build-secret.npm_token']!, 'base64').toString()).toBe(value);
    const lines = await ground.storedLines(id);
    expect(lines.map((l) => l.message)).toContain('npm token: ***');
    const encoded = Buffer.from(value).toString('base64');
    for (const text of [ground.clusterTextBesides(id), await ground.databaseText()]) {
      expect(text).not.toContain(value);
      expect(text).not.toContain(encoded);
    }
    // The vault by its name through the proxy (the operator cannot resolve it); Entra ID, by an
    // address NO_PROXY names, directly. Both trusted the fake's CA only through caFile.
    expect(new Set(proxy.connects)).toEqual(new Set([`${FAKE_VAULT_HOST}:${azure.port}`]));
    const hosts = (endpoint: 'vault' | 'token'): Set<string | undefined> =>
      new Set(azure.requestsTo(endpoint).map((r) => r.headers.host));
    expect(hosts('vault')).toEqual(new Set([`${FAKE_VAULT_HOST}:${azure.port}`]));
    expect(hosts('token')).toEqual(new Set([`127.0.0.1:${azure.port}`]));
  });

  it('a reference to a secret the vault does not hold fails the build with SecretUnavailable, naming it', async () => {
    await useAzure();

    const id = await started({ npm_token: 'azure:no-such-secret' });

    const build = await ground.failedWith(id, 'SecretUnavailable');
    expect(build.error_message).toContain(
      'manifest.build_config.secrets.npm_token: azure:no-such-secret could not be resolved',
    );
    expect(build.error_message).toContain(`${azure.vaultUrl} has no secret no-such-secret`);
    expect(ground.jobOf(id)).toBeUndefined();
    expect(ground.buildSecret(id)).toBeUndefined();
  });

  it('a federated token Entra ID does not accept fails the build with SecretUnavailable: Azure refused kiln’s workload identity', async () => {
    const wrong = 'a-token-of-another-service-account';
    await useAzure({ federatedToken: wrong });
    azure.put('npm-token', secretValue());

    const id = await started({ npm_token: 'azure:npm-token' });

    const build = await ground.failedWith(id, 'SecretUnavailable');
    expect(build.error_message).toContain('azure:npm-token could not be resolved');
    expect(build.error_message).toContain("Azure refused kiln's workload identity");
    expect(build.error_message).not.toContain(wrong);
    expect(ground.jobOf(id)).toBeUndefined();
  });

  it.each([
    ['does not exist', (): string => join(files!, 'no-such-ca.pem'), 'cannot read the CA file'],
    [
      'holds no certificate',
      (): string => file('not-a-ca.pem', 'not a certificate\n'),
      'holds no PEM certificate',
    ],
  ])(
    'a caFile that %s fails the build with SecretUnavailable naming the file',
    async (_, caFile, says) => {
      const path = caFile();
      await useAzure({ caFile: path });

      const id = await started({ npm_token: 'azure:npm-token' });

      const build = await ground.failedWith(id, 'SecretUnavailable');
      expect(build.error_message).toContain('azure:npm-token could not be resolved');
      expect(build.error_message).toContain(says);
      expect(build.error_message).toContain(path);
      expect(ground.jobOf(id)).toBeUndefined();
    },
  );
});
