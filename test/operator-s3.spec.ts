import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BUILDKIT_IMAGE, KANIKO_IMAGE } from '../src/build-methods/images.js';
import { OUT_DIR } from '../src/build-methods/job.js';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { runStep } from '../src/steps/run-step.js';
import { wizardManifest } from './support/builds.js';
import { FakeS3 } from './support/fake-s3.js';
import { FakeVault } from './support/fake-vault.js';
import { auditCredentials } from './support/credential-audit.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import {
  type ContainerRunContext,
  type ContainerScript,
  hostPath,
} from './support/kube/kubelet.js';
import { type BuildRecord, OperatorGround, type StoredLine } from './support/operator-ground.js';

noteDoubleOnly('registry_type s3 behind a fake S3');

/**
 * Issue 15, registry_type s3 on Kubernetes, end to end: the tenant's S3 settings with keys in
 * Vault, resolved when the operator starts the build, into the build's own Secret; the builder
 * writes a real OCI image layout (BuildKit's OCI tarball, kaniko's layout directory); kiln's own
 * step program uploads it to a fake S3 that verifies SigV4 and the multipart checksums, and the
 * operator records the digest and the s3:// address with the success.
 */
const EXTERNAL = { KILN_EXTERNAL_TIMEOUT_MS: '1000', KILN_EXTERNAL_ATTEMPTS: '2' };
const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;
const BUCKET = 'kiln-images';
const PREFIX = 'images/ci';
const REGION = 'eu-west-1';
const INDEX_TYPE = 'application/vnd.oci.image.index.v1+json';
const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';
/** Over one 8 MiB part: the upload goes to S3 in two, each with its SHA-256 checksum. */
const BIG_LAYER_BYTES = 9 * 1024 * 1024;

let ground: OperatorGround;
let vault: FakeVault;
let s3: FakeS3;
let files: string;
/** The S3 keys the fake knows; Vault holds them under kv/s3/ci. */
let keys: { accessKeyId: string; secretAccessKey: string };

/**
 * What each pod's builder wrote: the image's digest and the layout it left, kept here since the
 * kubelet removes the pod's volumes when it ends: the tarball's bytes, or the directory's files
 * (path → SHA-256).
 */
const written = new Map<
  string,
  { digest: string; tarball?: Buffer; tree?: ReadonlyArray<[string, string]> }
>();

// The S3 keys and kiln's Vault token: shown to no one (the build's own Secret holds them).
const audit = auditCredentials((found) => ground.showTo(found));

beforeAll(async () => {
  [ground, vault, s3] = await Promise.all([
    OperatorGround.start('operator-s3', { apiEnv: EXTERNAL }),
    FakeVault.start(),
    FakeS3.start({ region: REGION, buckets: [BUCKET] }),
  ]);
  files = mkdtempSync(join(tmpdir(), 'kiln-operator-s3-'));
  keys = {
    accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(30).toString('base64url'),
  };
  audit.register(keys.secretAccessKey);
  s3.addUser({ ...keys, buckets: [BUCKET] });
  const token = audit.register(`hvs.${randomBytes(12).toString('hex')}`);
  vault.addToken(token, { policies: ['kv/'] });
  const tokenFile = join(files, 'vault-token');
  writeFileSync(tokenFile, token);
  await integrations().setSecretManager(ground.seeded.tenantA, 'vault', {
    address: vault.url,
    auth: { method: 'token', tokenFile },
  });
});

beforeEach(async () => {
  vault.put('kv', 's3/ci', { id: keys.accessKeyId, secret: keys.secretAccessKey });
  await integrations().setRegistry(ground.seeded.tenantA, 's3', {
    bucket: BUCKET,
    prefix: PREFIX,
    region: REGION,
    endpoint: s3.url,
    forcePathStyle: true,
    accessKeyId: 'vault:kv/data/s3/ci#id',
    secretAccessKey: 'vault:kv/data/s3/ci#secret',
  });
});

afterEach(() => ground.reset());

afterAll(async () => {
  await Promise.all([ground?.close(), vault?.stop(), s3?.stop()]);
  rmSync(files, { recursive: true, force: true });
});

/** What `kiln settings secret-manager|registry set` write, on the suite's database. */
const integrations = (): IntegrationsService =>
  new IntegrationsService(new IntegrationsRepository(ground.api.dataSource));

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');

/**
 * Writes an OCI image layout directory as BuildKit and kaniko do: per platform a layer, a config
 * and a manifest; several platforms under one image index. The image's digest is that of
 * index.json's first descriptor: the image index, or the one manifest.
 */
function writeLayout(dir: string, platforms: readonly string[]): string {
  const blob = (content: Buffer | string, mediaType: string) => {
    const hex = sha256(content);
    mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
    writeFileSync(join(dir, 'blobs', 'sha256', hex), content);
    return { mediaType, digest: `sha256:${hex}`, size: Buffer.byteLength(content) };
  };
  const manifests = platforms.map((platform, index) => {
    const [os, architecture] = platform.split('/');
    const layer = blob(
      randomBytes(index === 0 ? BIG_LAYER_BYTES : 4096),
      'application/vnd.oci.image.layer.v1.tar',
    );
    const config = blob(
      JSON.stringify({ os, architecture, rootfs: { type: 'layers', diff_ids: [layer.digest] } }),
      'application/vnd.oci.image.config.v1+json',
    );
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST_TYPE,
      config,
      layers: [layer],
    });
    return { ...blob(manifest, MANIFEST_TYPE), platform: { os, architecture } };
  });
  const image =
    manifests.length === 1
      ? manifests[0]
      : blob(JSON.stringify({ schemaVersion: 2, mediaType: INDEX_TYPE, manifests }), INDEX_TYPE);
  if (image === undefined) throw new Error('a layout needs at least one platform');
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({ schemaVersion: 2, mediaType: INDEX_TYPE, manifests: [image] }),
  );
  return image.digest;
}

/** Every file under `dir`: its path in the layout and its SHA-256, sorted. */
function treeOf(dir: string): Array<[string, string]> {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry): [string, string] => {
      const path = join(entry.parentPath, entry.name);
      return [path.slice(dir.length + 1), sha256(readFileSync(path))];
    })
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The value of `<name>=value` in argv. */
function flag(args: readonly string[], name: string): string {
  const value = args.find((arg) => arg.startsWith(`${name}=`))?.slice(name.length + 1);
  if (value === undefined) throw new Error(`the builder got no ${name}`);
  return value;
}

type Run = NonNullable<ContainerScript['run']>;

/** A `run` hook that fails its container, loudly, when the test's own code throws. */
const guarded =
  (run: (context: ContainerRunContext) => ReturnType<Run>): Run =>
  async (context) => {
    try {
      return await run(context);
    } catch (error) {
      return { lines: [`test double: ${(error as Error).message}`], exitCode: 70 };
    }
  };

/**
 * The builders: BuildKit writes an OCI layout tarball where `--output=type=oci,dest=…` says (a
 * real one, archived by GNU tar), kaniko a layout directory at `--oci-layout-path`. Neither may
 * have been asked to push.
 */
function scriptBuilders(): void {
  ground.cluster.kubelet.script(BUILDKIT_IMAGE, {
    run: guarded((context) => {
      const output = flag(context.args, '--output');
      const dest = /^type=oci,dest=(.+)$/.exec(output)?.[1];
      if (dest === undefined) throw new Error(`not an OCI tarball output: ${output}`);
      if (context.args.some((arg) => arg.includes('push=true'))) throw new Error('asked to push');
      const platforms = flag(context.args, '--opt')
        .replace(/^platform=/, '')
        .split(',');
      const dir = mkdtempSync(join(files, 'buildkit-layout-'));
      const digest = writeLayout(dir, platforms);
      const tarball = hostPath(context, dest);
      mkdirSync(dirname(tarball), { recursive: true });
      execFileSync('tar', ['-C', dir, '-cf', tarball, '.']);
      written.set(context.pod, { digest, tarball: readFileSync(tarball) });
      return Promise.resolve({ lines: [`exporting to oci image format ${digest}`] });
    }),
  });
  ground.cluster.kubelet.script(KANIKO_IMAGE, {
    run: guarded((context) => {
      if (!context.args.includes('--no-push')) throw new Error('kaniko was not given --no-push');
      const dir = hostPath(context, flag(context.args, '--oci-layout-path'));
      mkdirSync(dir, { recursive: true });
      const digest = writeLayout(dir, ['linux/amd64']);
      written.set(context.pod, { digest, tree: treeOf(dir) });
      return Promise.resolve({ lines: ['INFO Skipping push to container registry'] });
    }),
  });
}

/**
 * kiln's own step image: the real step program. The paths it is given are the container's,
 * reached through the kubelet's mounts. Before it runs, a careless debug line prints the secret
 * key it was given: the log must show it masked.
 */
function scriptKilnSteps(): void {
  ground.cluster.kubelet.script(STEP_IMAGE, {
    run: guarded(async (context) => {
      const lines = [`debug: AWS_SECRET_ACCESS_KEY=${context.env['AWS_SECRET_ACCESS_KEY']}`];
      const messagePath = context.env['KILN_TERMINATION_MESSAGE_PATH'];
      const exitCode = await runStep(context.args, {
        env: {
          ...context.env,
          KILN_STEP_OUT_DIR: hostPath(context, OUT_DIR),
          ...(messagePath === undefined
            ? {}
            : { KILN_TERMINATION_MESSAGE_PATH: hostPath(context, messagePath) }),
        },
        print: (line) => lines.push(line),
      });
      return { lines, exitCode };
    }),
  });
}

const stepsOperator = () =>
  ground.startOperator({ env: { ...EXTERNAL, KILN_STEP_IMAGE: STEP_IMAGE } });

/** A wizard build with registry_type s3, created and started through the API. */
async function started(method: 'buildx' | 'kaniko'): Promise<string> {
  const manifest = wizardManifest(method);
  Object.assign(manifest['build_config'] as Record<string, unknown>, {
    registry_type: 's3',
    secret_manager_type: 'vault',
  });
  return ground.startedWizard(manifest);
}

/** The build once it ended `status`; another end fails the test with the build's log. */
async function endedAs(id: string, status: string): Promise<BuildRecord> {
  const build = await ground.ended(id);
  if (build.status !== status) {
    const log = (await ground.storedLines(id)).map(
      (l) => `  ${l.metadata?.['container'] ?? '-'}: ${l.message}`,
    );
    throw new Error(
      `build ${id} ended ${build.status} (${build.error_message}), not ${status}:\n${log.join('\n')}`,
    );
  }
  return build;
}

const linesOf = (lines: StoredLine[], container: string): string[] =>
  lines.filter((l) => l.metadata?.['container'] === container).map((l) => l.message);

/** `<prefix>/<project>/<build number>-<12 hex digits of the digest>.oci.tar` (ADR 0022). */
const keyOf = (build: BuildRecord, digest: string): string =>
  `${PREFIX}/${ground.seeded.projectA}/${build.build_number}-${digest.slice(7, 19)}.oci.tar`;

describe('registry_type s3 through the operator', () => {
  it('a buildx build’s OCI tarball is uploaded to S3, and the build records its digest and s3:// address', async () => {
    scriptBuilders();
    scriptKilnSteps();
    await stepsOperator();

    const id = await started('buildx');
    const build = await endedAs(id, 'success');

    const pod = ground.jobOf(id)!.spec!.template.spec!;
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['source', 'build']);
    expect(pod.containers.map((c) => c.name)).toEqual(['s3-upload']);
    const layout = written.get(ground.podOf(id)?.metadata?.name ?? '');
    expect(layout?.tarball).toBeDefined();
    const key = keyOf(build, layout!.digest);
    expect(build).toMatchObject({
      image_digest: layout!.digest,
      images: [`s3://${BUCKET}/${key}`],
    });

    // The object is the builder's tarball, byte for byte, uploaded in two checksummed parts.
    const tarball = layout!.tarball!;
    const object = s3.object(BUCKET, key);
    expect(object?.body.equals(tarball)).toBe(true);
    expect(object).toMatchObject({
      contentType: 'application/vnd.oci.image.layout.v1+tar',
      metadata: { 'oci-digest': layout!.digest },
      checksumType: 'COMPOSITE',
    });
    expect(s3.pendingUploads(BUCKET)).toEqual([]);
    expect(s3.operations('UploadPart').filter((r) => r.path.endsWith(key))).toHaveLength(2);

    const lines = await ground.storedLines(id);
    expect(linesOf(lines, 's3-upload')).toEqual([
      'debug: AWS_SECRET_ACCESS_KEY=***',
      `kiln: uploaded s3://${BUCKET}/${key} (${layout!.digest}, ${tarball.length} bytes)`,
    ]);
    expect(linesOf(lines, 'kiln')).toEqual(
      expect.arrayContaining([
        `[kiln] registry_type s3: the image is written as an OCI image layout and uploaded to s3://${BUCKET}/${PREFIX}/ by the s3-upload step, not pushed to a registry`,
        '[kiln] the SBOM (syft) and scan (trivy) steps do not run for registry_type s3: they read the image from a registry, and this one goes to S3',
      ]),
    );

    // The keys are in the build's own Secret, read through secretKeyRef; nowhere else.
    const secret = ground.buildSecret(id)!;
    const value = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString();
    expect(value('s3.access-key-id')).toBe(keys.accessKeyId);
    expect(value('s3.secret-access-key')).toBe(keys.secretAccessKey);
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Job', name: `kiln-${id}`, controller: true }),
    ]);
    for (const text of [ground.clusterTextBesides(id), await ground.databaseText()]) {
      for (const key of [keys.accessKeyId, keys.secretAccessKey]) {
        expect(text).not.toContain(key);
        expect(text).not.toContain(Buffer.from(key).toString('base64'));
      }
    }
  });

  it('a kaniko build’s layout directory is archived by the step and uploaded whole', async () => {
    scriptBuilders();
    scriptKilnSteps();
    await stepsOperator();

    const id = await started('kaniko');
    const build = await endedAs(id, 'success');

    const layout = written.get(ground.podOf(id)?.metadata?.name ?? '');
    expect(layout?.tree).toBeDefined();
    const key = keyOf(build, layout!.digest);
    expect(build).toMatchObject({
      image_digest: layout!.digest,
      images: [`s3://${BUCKET}/${key}`],
    });
    // What GNU tar extracts from the stored object is the directory kaniko wrote.
    const stored = join(mkdtempSync(join(files, 'stored-')), 'image.oci.tar');
    writeFileSync(stored, s3.object(BUCKET, key)!.body);
    const extracted = mkdtempSync(join(files, 'extracted-'));
    execFileSync('tar', ['-xf', stored, '-C', extracted]);
    expect(treeOf(extracted)).toEqual(layout!.tree);
  });

  it('keys S3 refuses fail the build with RegistryUnauthorized before any Job', async () => {
    vault.put('kv', 's3/ci', { id: keys.accessKeyId, secret: 'not-the-secret-access-key' });
    await stepsOperator();

    const id = await started('buildx');
    const build = await endedAs(id, 'failed');

    expect(await ground.column(id, 'failure_reason')).toBe('RegistryUnauthorized');
    expect(build.error_message).toContain(`s3://${BUCKET}`);
    expect(build.error_message).not.toContain('not-the-secret-access-key');
    expect(ground.jobOf(id)).toBeUndefined();
    expect(ground.buildSecret(id)).toBeUndefined();
  });

  it('a tenant without S3 settings gets InvalidSpec, saying how to add them', async () => {
    await integrations().removeRegistry(ground.seeded.tenantA, 's3');
    await stepsOperator();

    const id = await started('buildx');
    const build = await endedAs(id, 'failed');

    expect(await ground.column(id, 'failure_reason')).toBe('InvalidSpec');
    expect(build.error_message).toContain('kiln settings registry set s3');
    expect(ground.jobOf(id)).toBeUndefined();
  });

  it('an operator without KILN_STEP_IMAGE cannot upload the image: InvalidSpec, naming it', async () => {
    await ground.startOperator({ env: EXTERNAL });

    const id = await started('buildx');
    const build = await endedAs(id, 'failed');

    expect(await ground.column(id, 'failure_reason')).toBe('InvalidSpec');
    expect(build.error_message).toBe(
      'registry_type s3 needs kiln’s step image to upload the image: the operator has no KILN_STEP_IMAGE',
    );
    expect(ground.jobOf(id)).toBeUndefined();
  });
});
