import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import {
  BUILDKIT_IMAGE,
  GIT_IMAGE,
  KANIKO_IMAGE,
  SBOM_TOOL_IMAGES,
  SCAN_TOOL_IMAGES,
} from '../src/build-methods/images.js';
import { OUT_DIR } from '../src/build-methods/job.js';
import { PACKER_IMAGE } from '../src/build-methods/packer.js';
import { SOURCE_SCRIPT } from '../src/build-methods/source-container.js';
import { STEP_SCRIPT } from '../src/build-methods/steps.js';
import { IntegrationsRepository } from '../src/integrations/integrations.repository.js';
import { IntegrationsService } from '../src/integrations/integrations.service.js';
import { IMAGE_PLACEHOLDER } from '../src/manifest/tool-commands.js';
import { SIGSTORE_BUNDLE_V03, verifyBundleWithKey } from '../src/provenance/signing.js';
import { SEALED_PREFIX } from '../src/secrets/secret-sealer.js';
import { runStep } from '../src/steps/run-step.js';
import { SPDX } from './support/artifact-documents.js';
import { wizardManifest } from './support/builds.js';
import { FakeS3 } from './support/fake-s3.js';
import { FakeVault } from './support/fake-vault.js';
import { jsonOf } from './support/http.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import {
  type ContainerRunContext,
  type ContainerScript,
  hostPath,
} from './support/kube/kubelet.js';
import { type BuildRecord, OperatorGround } from './support/operator-ground.js';
import { freePort } from './support/processes.js';
import {
  logDigestFromPages,
  registryBlob,
  registryManifest,
  statementOf,
  statementProblems,
} from './support/provenance.js';
import { LocalRegistry } from './support/registry.js';

noteDoubleOnly('provenance through the operator');

/**
 * Provenance of builds the operator runs (docs/provenance.md, TESTPLAN PROV-01…04), for each of
 * the five methods: the Kubernetes API server double runs each build's pod, whose scripted
 * containers print what the real ones print (the checkout's `kiln: checked out <sha>`) and write
 * what the real builders write about their push; kiln's own step program reads that in the pod,
 * as in production. The pushed images are real OCI images in the real Debian docker-registry (no
 * referrers API: the fallback tag), which is the tenant's Harbor registry over plain HTTP, so the
 * operator attaches the signed statements for real. Statements are checked against the vendored
 * in-toto and SLSA schemas, bundles with @sigstore/verify.
 */

const PUBLIC_URL = 'https://kiln.example.com';
const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;
/** A Paketo builder pinned by digest, so the statement can name it by digest. */
const PAKETO_BUILDER = `paketobuildpacks/builder-jammy-base:0.4.500@sha256:${'7'.repeat(64)}`;
const SYFT_IMAGE = SBOM_TOOL_IMAGES.syft!;
const TRIVY_IMAGE = SCAN_TOOL_IMAGES.trivy!;
const SPDX_TEXT = JSON.stringify(SPDX, null, 2);
const TRIVY_TEXT = readFileSync(
  join(__dirname, '../src/artifacts/fixtures/trivy-debian-buster.json'),
  'utf8',
);
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const SPDX_PREDICATE = 'https://spdx.dev/Document';
const SLSA_PREDICATE = 'https://slsa.dev/provenance/v1';
/** A line a build step prints to claim another commit: only the checkout's line may count. */
const FORGED_COMMIT = 'f'.repeat(40);
const EXTERNAL = { KILN_EXTERNAL_TIMEOUT_MS: '2000', KILN_EXTERNAL_ATTEMPTS: '1' };
const BUCKET = 'kiln-images';
const PREFIX = 'images/ci';
const REGION = 'eu-west-1';

type ImageMethod = 'kaniko' | 'buildx' | 'container' | 'paketo';
const IMAGE_METHODS: readonly ImageMethod[] = ['kaniko', 'buildx', 'container', 'paketo'];
/** The image each method's builder container runs. */
const BUILDER_IMAGE: Record<ImageMethod, string> = {
  kaniko: KANIKO_IMAGE,
  container: KANIKO_IMAGE,
  buildx: BUILDKIT_IMAGE,
  paketo: PAKETO_BUILDER,
};

let ground: OperatorGround;
let registry: LocalRegistry;
let vault: FakeVault;
let s3: FakeS3;
let files: string;

/** What the pods of one build do, by build id (the scripts are shared by every build). */
interface Plan {
  /** The commit its source container prints. */
  readonly commit: string;
  /** `host/path` it pushes to, and the digest its builder reports. */
  readonly repository?: string;
  readonly digest?: string;
  /** Runs while the builder pushes, before it reports the push. */
  readonly whilePushing?: () => Promise<void>;
}
const plans = new Map<string, Plan>();
/** What a build's builder wrote besides its report: an S3 layout's digest, packer's manifest. */
const made = new Map<string, { layoutDigest?: string; packerManifest?: Buffer }>();

const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex');
const hexOf = (digest: string): string => digest.slice('sha256:'.length);
/** The digest part of a pinned image reference. */
const pinOf = (image: string): string => hexOf(image.slice(image.indexOf('@') + 1));

/** The build a pod belongs to: its Job is `kiln-<build id>`, its pod `kiln-<build id>-<suffix>`. */
function planOf(context: ContainerRunContext): Plan & { id: string } {
  const id = /^kiln-([0-9a-f-]{36})-/.exec(context.pod)?.[1];
  const plan = id === undefined ? undefined : plans.get(id);
  if (id === undefined || plan === undefined) throw new Error(`no plan for pod ${context.pod}`);
  return { ...plan, id };
}

type Run = NonNullable<ContainerScript['run']>;

/** A `run` hook that fails its container, loudly, when the test's own code throws. */
const guarded =
  (run: (context: ContainerRunContext) => ReturnType<Run> | Awaited<ReturnType<Run>>): Run =>
  async (context) => {
    try {
      return await run(context);
    } catch (error) {
      return { lines: [`test double: ${(error as Error).message}`], exitCode: 70 };
    }
  };

function write(context: ContainerRunContext, path: string, content: string | Buffer): void {
  const file = hostPath(context, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, content);
}

/** Every value of `<name>=value` in argv. */
const flags = (args: readonly string[], name: string): string[] =>
  args.filter((arg) => arg.startsWith(`${name}=`)).map((arg) => arg.slice(name.length + 1));

function flag(args: readonly string[], name: string): string {
  const [value] = flags(args, name);
  if (value === undefined) throw new Error(`the builder got no ${name}`);
  return value;
}

/**
 * What each builder writes about its push, from its own arguments, as the real one does: kaniko
 * `--image-name-with-digest-file`, BuildKit `--metadata-file`, the CNB lifecycle `-report`.
 */
const PUSH_REPORTS: Record<ImageMethod, (context: ContainerRunContext, digest: string) => void> = {
  kaniko: kanikoReport,
  container: kanikoReport,
  buildx: (context, digest) => {
    const output = flag(context.args, '--output');
    const name = /"name=([^"]*)"|name=([^,]*)/.exec(output);
    if (name === null) throw new Error(`no image name in --output=${output}`);
    write(
      context,
      flag(context.args, '--metadata-file'),
      JSON.stringify({ 'containerimage.digest': digest, 'image.name': name[1] ?? name[2] }),
    );
  },
  paketo: (context, digest) => {
    const tags = [context.args.at(-1) ?? '', ...flags(context.args, '-tag')];
    write(
      context,
      flag(context.args, '-report'),
      `[image]\n  tags = [${tags.map((tag) => JSON.stringify(tag)).join(', ')}]\n  digest = "${digest}"\n  manifest-size = 1234\n\n[build]\n`,
    );
  },
};

function kanikoReport(context: ContainerRunContext, digest: string): void {
  const destinations = flags(context.args, '--destination');
  if (destinations.length === 0) throw new Error('kaniko got no --destination');
  for (const file of flags(context.args, '--image-name-with-digest-file'))
    write(context, file, destinations.map((destination) => `${destination}@${digest}\n`).join(''));
}

/**
 * A builder: pushes what its build's plan says and reports it; kaniko asked not to push
 * (registry_type s3) writes an OCI layout directory instead. Its output claims another commit,
 * as a build step could.
 */
function builder(report: (context: ContainerRunContext, digest: string) => void): ContainerScript {
  return {
    lines: ['building the image', `kiln: checked out ${FORGED_COMMIT}`],
    run: guarded(async (context) => {
      const plan = planOf(context);
      if (context.args.includes('--no-push')) {
        const digest = writeLayout(hostPath(context, flag(context.args, '--oci-layout-path')));
        made.set(plan.id, { layoutDigest: digest });
        return { lines: ['INFO Skipping push to container registry'] };
      }
      if (plan.digest === undefined) throw new Error('the plan names no digest to push');
      await plan.whilePushing?.();
      report(context, plan.digest);
      return { lines: [`pushed ${plan.digest}`] };
    }),
  };
}

/** The `source` container: runs kiln's checkout script and prints what it prints. */
const source: ContainerScript = {
  run: guarded((context) => {
    if (context.command[2] !== SOURCE_SCRIPT)
      throw new Error('the source container does not run kiln’s checkout script');
    const { commit } = planOf(context);
    return { lines: ["Cloning into '/workspace/source'...", `kiln: checked out ${commit}`] };
  }),
};

/**
 * An SBOM or scan tool: checks it was given the pushed image (`@IMAGE@` is what STEP_SCRIPT puts
 * the image-ref step's reference in place of) and writes its document.
 */
function tool(kind: 'sbom' | 'scan', document: string): ContainerScript {
  return {
    run: guarded((context) => {
      if (context.command[2] !== STEP_SCRIPT)
        throw new Error(`the ${kind} step does not run kiln's step script`);
      const plan = planOf(context);
      const reference = readFileSync(hostPath(context, `${OUT_DIR}/image`), 'utf8').trim();
      if (reference !== `${plan.repository}@${plan.digest}`)
        throw new Error(`${reference} is not the pushed image`);
      const argv = context.args.map((arg) =>
        arg.endsWith(IMAGE_PLACEHOLDER) ? arg.slice(0, -IMAGE_PLACEHOLDER.length) + reference : arg,
      );
      const output =
        kind === 'sbom'
          ? argv.find((arg) => arg.startsWith('spdx-json='))?.slice('spdx-json='.length)
          : argv[argv.indexOf('--output') + 1];
      if (output === undefined) throw new Error(`no output in ${argv.join(' ')}`);
      write(context, output, document);
      return { lines: [`fake ${kind} tool: wrote ${output}`] };
    }),
  };
}

/**
 * kiln's own step image: the real step program, its paths the container's reached through the
 * kubelet's mounts (packer-manifest is given the template's and packer's paths).
 */
const kilnSteps: ContainerScript = {
  run: guarded(async (context) => {
    const lines: string[] = [];
    const messagePath = context.env['KILN_TERMINATION_MESSAGE_PATH'];
    const [step, ...rest] = context.args;
    const args =
      step === 'packer-manifest'
        ? [step, ...rest.map((path) => hostPath(context, path))]
        : context.args;
    const exitCode = await runStep(args, {
      env: {
        ...context.env,
        ...(context.mounts[OUT_DIR] === undefined
          ? {}
          : { KILN_STEP_OUT_DIR: hostPath(context, OUT_DIR) }),
        ...(messagePath === undefined
          ? {}
          : { KILN_TERMINATION_MESSAGE_PATH: hostPath(context, messagePath) }),
      },
      print: (line) => lines.push(line),
    });
    return { lines, exitCode };
  }),
};

/**
 * packer with its manifest post-processor: one build per builder of the template, written to the
 * post-processor's `output` in packer's working directory, as packer 1.x formats it.
 */
const packer: ContainerScript = {
  lines: ['==> Running builders'],
  run: guarded((context) => {
    if (context.container !== 'build') return { lines: [] };
    const template = JSON.parse(
      readFileSync(hostPath(context, '/kiln/dockerfile/template.json'), 'utf8'),
    ) as {
      builders: Array<{ type: string; name?: string }>;
      'post-processors'?: Array<{ type: string; output?: string }>;
    };
    const manifest = (template['post-processors'] ?? []).find((p) => p.type === 'manifest');
    if (manifest?.output === undefined) throw new Error('the template has no manifest output');
    const run = randomBytes(16).toString('hex');
    const builds = template.builders.map((b) => ({
      name: b.name ?? b.type,
      builder_type: b.type,
      build_time: 1795869700,
      files: null,
      artifact_id: b.type === 'null' ? 'Null' : 'File',
      packer_run_uuid: run,
      custom_data: null,
    }));
    const written = Buffer.from(JSON.stringify({ builds, last_run_uuid: run }, null, 2));
    write(context, `/workspace/source/${manifest.output}`, written);
    made.set(planOf(context).id, { packerManifest: written });
    return { lines: ['==> Running post-processor: manifest'] };
  }),
};

/**
 * An OCI image layout directory with one small image, as kaniko's `--oci-layout-path` leaves it;
 * its digest is index.json's descriptor's.
 */
function writeLayout(dir: string): string {
  const blob = (content: Buffer | string, mediaType: string) => {
    const hex = sha256(content);
    mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
    writeFileSync(join(dir, 'blobs', 'sha256', hex), content);
    return { mediaType, digest: `sha256:${hex}`, size: Buffer.byteLength(content) };
  };
  const layer = blob(randomBytes(2048), 'application/vnd.oci.image.layer.v1.tar');
  const config = blob(
    JSON.stringify({
      os: 'linux',
      architecture: 'amd64',
      rootfs: { type: 'layers', diff_ids: [layer.digest] },
    }),
    'application/vnd.oci.image.config.v1+json',
  );
  const manifest = blob(
    JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers: [layer] }),
    OCI_MANIFEST,
  );
  writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [manifest] }),
  );
  return manifest.digest;
}

/**
 * Pushes a tiny real OCI image to a plain-HTTP registry as a client does: the layer (a tar of one
 * file) and the config as blobs, then the manifest under `tag`. Its digest.
 */
async function pushImage(address: string, repository: string, tag = 'seed'): Promise<string> {
  const base = `http://${address}/v2/${repository}`;
  const blob = async (bytes: Buffer, mediaType: string) => {
    const digest = `sha256:${sha256(bytes)}`;
    const upload = await fetch(`${base}/blobs/uploads/`, { method: 'POST' });
    if (upload.status !== 202) throw new Error(`blob upload: ${upload.status}`);
    const location = new URL(upload.headers.get('location') ?? '', `http://${address}`);
    location.searchParams.set('digest', digest);
    const put = await fetch(location, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(bytes),
    });
    if (put.status !== 201) throw new Error(`blob ${digest}: ${put.status}`);
    return { mediaType, digest, size: bytes.length };
  };
  const dir = mkdtempSync(join(files, 'layer-'));
  writeFileSync(
    join(dir, 'hello.txt'),
    `hello from ${repository} ${randomBytes(8).toString('hex')}\n`,
  );
  const tar = execFileSync('tar', ['-C', dir, '-cf', '-', 'hello.txt']);
  rmSync(dir, { recursive: true });
  const layer = await blob(tar, 'application/vnd.oci.image.layer.v1.tar');
  const config = await blob(
    Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: {},
        rootfs: { type: 'layers', diff_ids: [layer.digest] },
      }),
    ),
    'application/vnd.oci.image.config.v1+json',
  );
  const manifest = Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers: [layer] }),
  );
  const put = await fetch(`${base}/manifests/${tag}`, {
    method: 'PUT',
    headers: { 'content-type': OCI_MANIFEST },
    body: new Uint8Array(manifest),
  });
  if (put.status !== 201) throw new Error(`manifest: ${put.status} ${await put.text()}`);
  return `sha256:${sha256(manifest)}`;
}

/** What `kiln settings registry set` and `secret-manager set` write, on the suite's database. */
const integrations = (): IntegrationsService =>
  new IntegrationsService(new IntegrationsRepository(ground.api.dataSource));

/** The tenant's Harbor registry: `address` over plain HTTP, no credentials (anonymous push). */
const harborAt = (address: string) =>
  integrations().setRegistry(ground.seeded.tenantA, 'harbor', { address, insecure: true });

beforeAll(async () => {
  [ground, registry, vault, s3] = await Promise.all([
    OperatorGround.start('provenance-operator'),
    LocalRegistry.start(),
    FakeVault.start(),
    FakeS3.start({ region: REGION, buckets: [BUCKET] }),
  ]);
  files = mkdtempSync(join(ground.dir, 'files-'));
  const kubelet = ground.cluster.kubelet;
  kubelet.script(GIT_IMAGE, source);
  kubelet.script(KANIKO_IMAGE, builder(PUSH_REPORTS.kaniko));
  kubelet.script(BUILDKIT_IMAGE, builder(PUSH_REPORTS.buildx));
  kubelet.script(PAKETO_BUILDER, builder(PUSH_REPORTS.paketo));
  kubelet.script(PACKER_IMAGE, packer);
  kubelet.script(SYFT_IMAGE, tool('sbom', SPDX_TEXT));
  kubelet.script(TRIVY_IMAGE, tool('scan', TRIVY_TEXT));
  kubelet.script(STEP_IMAGE, kilnSteps);

  // Vault holds the S3 keys and the secrets PROV-04's build refers to.
  const token = `hvs.${randomBytes(12).toString('hex')}`;
  vault.addToken(token, { policies: ['kv/'] });
  const tokenFile = join(files, 'vault-token');
  writeFileSync(tokenFile, token);
  await integrations().setSecretManager(ground.seeded.tenantA, 'vault', {
    address: vault.url,
    auth: { method: 'token', tokenFile },
  });
  await harborAt(registry.address);

  // One operator for the whole suite: it runs the steps, and reaches the API as the pods do.
  await ground.startOperator({
    env: {
      ...EXTERNAL,
      KILN_STEP_IMAGE: STEP_IMAGE,
      KILN_UPLOAD_URL: ground.api.baseUrl,
      KILN_PUBLIC_URL: PUBLIC_URL,
    },
  });
}, 60_000);

afterAll(async () => {
  await Promise.all([ground?.close(), registry?.stop(), vault?.stop(), s3?.stop()]);
});

/** A wizard build of `method` with `buildConfig` on top of the wizard's defaults. */
function manifestFor(
  method: ImageMethod | 'packer',
  buildConfig: Record<string, unknown>,
): Record<string, unknown> {
  const manifest = wizardManifest(method);
  Object.assign(
    manifest['build_config'] as Record<string, unknown>,
    method === 'paketo' ? { paketo_config: { builder: PAKETO_BUILDER, buildpacks: [] } } : {},
    buildConfig,
  );
  return manifest;
}

/** A build of tenant A's project created through the API, its pods' plan set, then started. */
async function started(manifest: Record<string, unknown>, plan: Omit<Plan, 'commit'> = {}) {
  const created = await ground.admin.request('POST', '/builds', {
    tenant_id: ground.seeded.tenantA,
    project_id: ground.seeded.projectA,
    manifest,
  });
  if (created.status !== 201)
    throw new Error(`POST /builds answered ${created.status}: ${await created.text()}`);
  const id = (await jsonOf(created)).data.id as string;
  const commit = randomBytes(20).toString('hex');
  plans.set(id, { ...plan, commit });
  expect((await ground.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
  return { id, commit };
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

async function provenanceOf(id: string): Promise<any> {
  const response = await ground.admin.request('GET', `/builds/${id}/provenance`);
  expect(response.status).toBe(200);
  return jsonOf(response);
}

async function pemOf(keyId: string): Promise<string> {
  const response = await ground.admin.request('GET', `/signing-keys/${keyId}/pem`);
  expect(response.status).toBe(200);
  return response.text();
}

const kilnMessages = async (id: string): Promise<string[]> =>
  (await ground.storedLines(id))
    .filter((line) => line.metadata?.['container'] === 'kiln')
    .map((line) => line.message);

/** One image build through the operator, pushing a real image, and what it left. */
interface ImageRun {
  /** The commit its source container printed. */
  readonly commit: string;
  /** `host/path` of the image, and its path alone (the registry's repository name). */
  readonly repository: string;
  readonly path: string;
  readonly digest: string;
  readonly build: BuildRecord;
  readonly provenance: any;
}

/**
 * A `method` build pushing to `path` in the suite's registry: a fresh image pushed there first,
 * or the image `digest` names (a second build of the same image).
 */
async function imageBuild(method: ImageMethod, path: string, digest?: string): Promise<ImageRun> {
  const pushed = digest ?? (await pushImage(registry.address, path));
  const repository = `${registry.address}/${path}`;
  const { id, commit } = await started(manifestFor(method, { registry_repository: repository }), {
    repository,
    digest: pushed,
  });
  const build = await endedAs(id, 'success');
  return { commit, repository, path, digest: pushed, build, provenance: await provenanceOf(id) };
}

describe.each(IMAGE_METHODS)('provenance of a %s build through the operator', (method) => {
  let run: ImageRun;
  let pem: string;

  beforeAll(async () => {
    run = await imageBuild(method, `team/${method}`);
    pem = await pemOf(run.provenance.key_id);
  }, 60_000);

  it('succeeds with its provenance attached, a statement valid against the in-toto and SLSA v1 schemas (PROV-01)', () => {
    const { build, provenance } = run;
    expect({ status: build.status, provenance: build.provenance }).toEqual({
      status: 'success',
      provenance: 'attached',
    });
    expect(provenance.state).toBe('attached');
    const { statement } = provenance;
    expect(statementProblems(statement)).toEqual([]);
    expect(statement.predicateType).toBe(SLSA_PREDICATE);
    const { buildDefinition, runDetails } = statement.predicate;
    expect(buildDefinition.buildType).toBe(`https://kiln.dev/buildtypes/${method}/v1`);
    expect(runDetails.builder.id).toBe(`${PUBLIC_URL}/builders/${method}`);
    expect(runDetails.metadata).toMatchObject({ invocationId: build.id });
    expect(new Date(runDetails.metadata.finishedOn).getTime()).toBe(
      new Date(build.completed_at).getTime(),
    );
    expect(buildDefinition.internalParameters).toMatchObject({
      runner: 'kubernetes',
      namespace: ground.jobOf(build.id)?.metadata?.namespace,
    });
  });

  it('its subject is the digest the image-ref step reported, under every tag pushed', async () => {
    const { build, provenance, repository, digest } = run;
    const reported = (await ground.storedLines(build.id))
      .filter((line) => line.metadata?.['container'] === 'image-ref')
      .map((line) => line.message);
    expect(reported).toEqual([`kiln: the pushed image is ${repository}@${digest}`]);
    expect(build.image_digest).toBe(digest);
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect([...provenance.statement.subject].sort(byName)).toEqual(
      ['latest', 'v1'].map((tag) => ({
        name: `${repository}:${tag}`,
        digest: { sha256: hexOf(digest) },
      })),
    );
  });

  it('names the builder and step images by digest, and the commit the source container printed', () => {
    const { provenance, commit } = run;
    const dependencies = provenance.statement.predicate.buildDefinition.resolvedDependencies;
    expect(dependencies).toContainEqual({
      name: 'source',
      uri: `git+https://git.example.com/a/web.git@${commit}`,
      digest: { gitCommit: commit },
    });
    // The builder printed another commit: only the checkout's line counts.
    expect(JSON.stringify(dependencies)).not.toContain(FORGED_COMMIT);
    expect(dependencies).toContainEqual(
      expect.objectContaining({
        name: 'build',
        digest: { sha256: pinOf(BUILDER_IMAGE[method]) },
      }),
    );
    for (const image of [GIT_IMAGE, STEP_IMAGE, SYFT_IMAGE, TRIVY_IMAGE]) {
      expect(dependencies).toContainEqual(
        expect.objectContaining({ digest: { sha256: pinOf(image) } }),
      );
    }
  });

  it('is in the registry as a referrer of the image under the fallback tag, its layer the stored bundle', async () => {
    const { provenance, repository, path, digest } = run;
    expect(provenance.attachments).toEqual(
      ['provenance', 'sbom'].map((kind) => ({
        kind,
        subject: `${repository}@${digest}`,
        digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
        via: 'fallback-tag',
      })),
    );
    expect((await fetch(`http://${registry.address}/v2/${path}/referrers/${digest}`)).status).toBe(
      404,
    );
    const index = await registryManifest(registry.address, path, `sha256-${hexOf(digest)}`);
    expect(index.status).toBe(200);
    expect(index.json.mediaType).toBe(OCI_INDEX);
    expect(index.json.manifests.map((entry: any) => [entry.digest, entry.artifactType])).toEqual(
      provenance.attachments.map((a: any) => [a.digest, SIGSTORE_BUNDLE_V03]),
    );

    const bundles = { provenance: provenance.bundle, sbom: provenance.sbom_bundle };
    const predicates = { provenance: SLSA_PREDICATE, sbom: SPDX_PREDICATE };
    for (const attachment of provenance.attachments as Array<{
      kind: 'provenance' | 'sbom';
      digest: string;
    }>) {
      const referrer = await registryManifest(registry.address, path, attachment.digest);
      expect(referrer.digest).toBe(attachment.digest);
      expect(referrer.json).toMatchObject({
        mediaType: OCI_MANIFEST,
        artifactType: SIGSTORE_BUNDLE_V03,
        subject: { mediaType: OCI_MANIFEST, digest },
        annotations: {
          'dev.sigstore.bundle.content': 'dsse-envelope',
          'dev.sigstore.bundle.predicateType': predicates[attachment.kind],
        },
      });
      const [layer, ...others] = referrer.json.layers;
      expect(others).toEqual([]);
      expect(layer.mediaType).toBe(SIGSTORE_BUNDLE_V03);
      const bytes = await registryBlob(registry.address, path, layer.digest);
      expect(`sha256:${sha256(bytes)}`).toBe(layer.digest);
      expect(JSON.parse(bytes.toString('utf8'))).toEqual(bundles[attachment.kind]);
    }
  });

  it('attaches its SBOM as a signed in-toto attestation of the image, and names the SBOM and scan by digest', async () => {
    const { build, provenance, digest } = run;
    const sbom = statementOf(provenance.sbom_bundle);
    expect(statementProblems(sbom)).toEqual([]);
    expect(sbom.predicateType).toBe(SPDX_PREDICATE);
    expect(sbom.predicate).toEqual(SPDX);
    expect(sbom.subject.map((subject: any) => subject.digest)).toEqual([
      { sha256: hexOf(digest) },
      { sha256: hexOf(digest) },
    ]);
    expect(verifyBundleWithKey(provenance.sbom_bundle, pem)).toEqual(sbom);

    // The scan as kiln stored it: the normalised findings GET /builds/{id}/scan serves.
    const [scan] = await ground.api.dataSource.query(
      "SELECT content FROM build_artifacts WHERE build_id = $1 AND kind = 'scan'",
      [build.id],
    );
    const byproducts = provenance.statement.predicate.runDetails.byproducts;
    expect(byproducts).toEqual(
      expect.arrayContaining([
        {
          name: 'sbom.spdx-json',
          uri: `${PUBLIC_URL}/api/v1/builds/${build.id}/sbom`,
          mediaType: 'application/spdx+json',
          digest: { sha256: sha256(SPDX_TEXT) },
        },
        {
          name: 'scan',
          uri: `${PUBLIC_URL}/api/v1/builds/${build.id}/scan`,
          mediaType: 'application/json',
          digest: { sha256: sha256(gunzipSync(scan.content as Buffer)) },
        },
      ]),
    );
  });

  it('verifies with the published key, and a changed payload does not (PROV-02)', () => {
    const { provenance } = run;
    expect(verifyBundleWithKey(provenance.bundle, pem)).toEqual(provenance.statement);
    const tampered = structuredClone(provenance.bundle);
    const statement = statementOf(tampered);
    statement.subject[0].digest.sha256 = 'e'.repeat(64);
    tampered.dsseEnvelope.payload = Buffer.from(JSON.stringify(statement)).toString('base64');
    expect(() => verifyBundleWithKey(tampered, pem)).toThrow();
  });

  it("its log digest equals one recomputed from the log's pages, and kiln's attach lines follow it (PROV-03)", async () => {
    const { build, provenance } = run;
    const log = provenance.statement.predicate.runDetails.byproducts.find(
      (byproduct: any) => byproduct.name === 'build-log',
    );
    expect(log).toMatchObject({
      uri: `${PUBLIC_URL}/api/v1/builds/${build.id}/logs`,
      annotations: { lines: provenance.log.lines },
    });
    expect(provenance.log.digest).toBe(`sha256:${log.digest.sha256}`);
    expect(await logDigestFromPages(ground.admin, build.id, provenance.log.lines)).toBe(
      log.digest.sha256,
    );
    const all = await jsonOf(
      await ground.admin.request('GET', `/builds/${build.id}/logs?limit=1000`),
    );
    const covered = all.logs.slice(0, provenance.log.lines).map((l: any) => l.message);
    // Every line of the pod is covered: the checkout's, the builder's, the steps'.
    expect(covered).toEqual(
      expect.arrayContaining([`kiln: checked out ${run.commit}`, `pushed ${run.digest}`]),
    );
    const after = all.logs.slice(provenance.log.lines).map((l: any) => l.message);
    expect(after.filter((m: string) => /attached to/.test(m))).toEqual([
      expect.stringMatching(/^INFO: \[kiln\] signed provenance attached to /),
      expect.stringMatching(/^INFO: \[kiln\] the SBOM attestation attached to /),
    ]);
  });
});

describe('provenance of a packer build through the operator', () => {
  it('names one subject per artifact of its manifest post-processor, with the manifest’s digest, and is stored only', async () => {
    const manifest = manifestFor('packer', {
      packer_template: JSON.stringify({
        builders: [
          { type: 'null', name: 'vm', communicator: 'none' },
          { type: 'file', name: 'notes', content: 'hello', target: 'notes.txt' },
        ],
        'post-processors': [{ type: 'manifest', output: 'out/manifest.json' }],
      }),
    });
    const { id, commit } = await started(manifest);
    const build = await endedAs(id, 'success');
    expect(build.provenance).toBe('stored-only');

    const written = made.get(id)?.packerManifest;
    expect(written).toBeDefined();
    const digest = `sha256:${sha256(written!)}`;
    const stepLines = (await ground.storedLines(id))
      .filter((line) => line.metadata?.['container'] === 'packer-manifest')
      .map((line) => line.message);
    expect(stepLines).toEqual([
      `kiln: packer's manifest out/manifest.json names 2 artifacts (${digest})`,
    ]);

    const provenance = await provenanceOf(id);
    const { statement } = provenance;
    expect(statementProblems(statement)).toEqual([]);
    expect(statement.predicate.buildDefinition.buildType).toBe(
      'https://kiln.dev/buildtypes/packer/v1',
    );
    expect(statement.subject).toEqual([
      { name: 'null:Null', digest: { sha256: hexOf(digest) }, annotations: { packerBuild: 'vm' } },
      {
        name: 'file:File',
        digest: { sha256: hexOf(digest) },
        annotations: { packerBuild: 'notes' },
      },
    ]);
    const dependencies = statement.predicate.buildDefinition.resolvedDependencies;
    expect(dependencies).toContainEqual(
      expect.objectContaining({ name: 'source', digest: { gitCommit: commit } }),
    );
    expect(dependencies).toContainEqual(
      expect.objectContaining({ name: 'packer-validate', digest: { sha256: pinOf(PACKER_IMAGE) } }),
    );
    expect(provenance.attachments).toEqual([]);
    expect(await kilnMessages(id)).toContainEqual(
      expect.stringMatching(
        /^INFO: \[kiln\] signed provenance stored .*a packer build pushes no image to attach it to$/,
      ),
    );
  });
});

describe('referrers of one image built twice', () => {
  it('a second build of the same image adds its referrers to the fallback tag and keeps the first build’s', async () => {
    const first = await imageBuild('kaniko', 'team/twice');
    const tag = `sha256-${hexOf(first.digest)}`;
    const before = await registryManifest(registry.address, first.path, tag);
    expect(before.json.manifests).toHaveLength(2);

    const second = await imageBuild('kaniko', 'team/twice', first.digest);
    expect(second.build.image_digest).toBe(first.digest);
    expect(second.provenance.state).toBe('attached');
    const after = await registryManifest(registry.address, first.path, tag);
    const digests = [first, second].flatMap((run) =>
      run.provenance.attachments.map((a: any) => a.digest as string),
    );
    expect(new Set(digests).size).toBe(4);
    expect(after.json.manifests.map((entry: any) => entry.digest)).toEqual(digests);
    // The first build's entries are kept as they were.
    expect(after.json.manifests.slice(0, 2)).toEqual(before.json.manifests);
  });
});

describe('secrets in an operator build’s provenance', () => {
  it('holds no plain, sealed or resolved secret value; secret references stay as written (PROV-04)', async () => {
    const plain = `npm-${randomBytes(12).toString('hex')}`;
    const ghToken = `ghp_${randomBytes(12).toString('hex')}`;
    vault.put('kv', 'ci/gh', { token: ghToken });
    const GH_REFERENCE = 'vault:kv/data/ci/gh#token';

    const path = 'team/secrets';
    const digest = await pushImage(registry.address, path);
    const repository = `${registry.address}/${path}`;
    const manifest = manifestFor('buildx', {
      registry_repository: repository,
      secrets: { npm_token: plain, gh_token: GH_REFERENCE },
      build_args: { VERSION: '1.2.3' },
    });
    const { id } = await started(manifest, { repository, digest });
    const build = await endedAs(id, 'success');
    expect(build.provenance).toBe('attached');
    // The references were resolved for the build: its Secret holds their values.
    const secret = ground.buildSecret(id);
    expect(
      Object.values(secret?.data ?? {}).map((value) => Buffer.from(value, 'base64').toString()),
    ).toEqual(expect.arrayContaining([plain, ghToken]));

    const [row] = await ground.api.dataSource.query(
      'SELECT spec, config FROM builds WHERE id = $1',
      [id],
    );
    const sealed = [
      ...Object.values(row.spec.config.secrets as Record<string, string>),
      ...Object.values(row.config.manifest.build_config.secrets as Record<string, string>),
    ];
    expect(sealed).toHaveLength(4);
    for (const value of sealed) expect(value.startsWith(SEALED_PREFIX)).toBe(true);

    const provenance = await provenanceOf(id);
    const texts = [
      JSON.stringify(provenance.statement),
      JSON.stringify(provenance.bundle),
      JSON.stringify(statementOf(provenance.sbom_bundle)),
      JSON.stringify(provenance.sbom_bundle),
    ];
    for (const attachment of provenance.attachments) {
      const referrer = await registryManifest(registry.address, path, attachment.digest);
      const layer = await registryBlob(registry.address, path, referrer.json.layers[0].digest);
      texts.push(layer.toString('utf8'), JSON.stringify(statementOf(JSON.parse(layer.toString()))));
    }
    for (const text of texts) {
      for (const value of [plain, ghToken, ...sealed]) expect(text).not.toContain(value);
      expect(text).not.toContain(SEALED_PREFIX);
    }
    const external = provenance.statement.predicate.buildDefinition.externalParameters;
    expect(external.manifest.build_config.secrets).toEqual({
      npm_token: '[redacted]',
      gh_token: GH_REFERENCE,
    });
    // What is no secret stays as submitted.
    expect(external.manifest.build_config.build_args).toEqual({ VERSION: '1.2.3' });
  });
});

describe('provenance that cannot be attached', () => {
  afterEach(async () => {
    await harborAt(registry.address);
    expect(
      (await ground.admin.request('PUT', '/settings/provenance', { provenance: 'optional' }))
        .status,
    ).toBe(200);
  });

  it('a registry that went down during the build: the build succeeds, a WARN [kiln] line says why, and the statement is still served', async () => {
    const doomed = await LocalRegistry.start();
    ground.onReset(() => doomed.stop());
    const path = 'team/down';
    const digest = await pushImage(doomed.address, path);
    const repository = `${doomed.address}/${path}`;
    await harborAt(doomed.address);

    const { id } = await started(manifestFor('kaniko', { registry_repository: repository }), {
      repository,
      digest,
      whilePushing: () => doomed.stop(),
    });
    const build = await endedAs(id, 'success');
    expect(build.provenance).toMatch(/^failed: could not be attached: /);
    expect(build.provenance).toContain(`${repository}@${digest}: `);
    expect(await kilnMessages(id)).toContainEqual(
      `WARN: [kiln] provenance ${build.provenance.slice('failed: '.length)}; the build succeeds without it`,
    );

    const provenance = await provenanceOf(id);
    expect(provenance.state).toBe(build.provenance);
    expect(provenance.attachments).toEqual([]);
    expect(statementProblems(provenance.statement)).toEqual([]);
    expect(provenance.statement.subject).toContainEqual({
      name: `${repository}:latest`,
      digest: { sha256: hexOf(digest) },
    });
  });

  it('with provenance required, a registry that cannot be reached fails the build with ProvenanceFailed; its images stay listed', async () => {
    expect(
      (await ground.admin.request('PUT', '/settings/provenance', { provenance: 'required' }))
        .status,
    ).toBe(200);
    // Nothing listens there: the pre-flight says so and the build goes on; the attach fails.
    const closed = `127.0.0.1:${await freePort()}`;
    await harborAt(closed);
    const repository = `${closed}/team/required`;
    const digest = `sha256:${randomBytes(32).toString('hex')}`;

    const { id } = await started(manifestFor('kaniko', { registry_repository: repository }), {
      repository,
      digest,
    });
    const build = await ground.failedWith(id, 'ProvenanceFailed');
    expect(build.provenance).toBeNull();
    expect(build.error_message).toMatch(/^provenance could not be attached: /);
    expect(build.error_message).toMatch(/the tenant requires provenance, so the build fails/);
    expect(build).toMatchObject({
      image_digest: digest,
      images: ['latest', 'v1'].map((tag) => `${repository}:${tag}@${digest}`),
    });
    expect(await kilnMessages(id)).toContainEqual(
      expect.stringMatching(/^ERROR: \[kiln\] provenance could not be attached: /),
    );

    await ground.expectMirrored(id, 'failed');
    expect(ground.resource(id)?.status).toMatchObject({
      state: 'failed',
      failureReason: 'ProvenanceFailed',
      conditions: [
        {
          type: 'Succeeded',
          status: 'False',
          reason: 'ProvenanceFailed',
          message: build.error_message,
        },
      ],
    });
  });
});

describe('provenance of an S3 build through the operator', () => {
  it('names the s3:// object and its digest, and is stored only: there is no registry to attach to', async () => {
    const keys = {
      accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
      secretAccessKey: randomBytes(30).toString('base64url'),
    };
    s3.addUser({ ...keys, buckets: [BUCKET] });
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

    const { id } = await started(manifestFor('kaniko', { registry_type: 's3' }));
    const build = await endedAs(id, 'success');
    expect(build.provenance).toBe('stored-only');
    const digest = made.get(id)?.layoutDigest;
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const key = `${PREFIX}/${ground.seeded.projectA}/${build.build_number}-${digest!.slice(7, 19)}.oci.tar`;
    const address = `s3://${BUCKET}/${key}`;
    expect(build).toMatchObject({ image_digest: digest, images: [address] });
    expect(s3.object(BUCKET, key)).toBeDefined();

    const provenance = await provenanceOf(id);
    expect(statementProblems(provenance.statement)).toEqual([]);
    expect(provenance.statement.subject).toEqual([
      { name: address, uri: address, digest: { sha256: hexOf(digest!) } },
    ]);
    expect(provenance.attachments).toEqual([]);
    expect(await kilnMessages(id)).toContainEqual(
      expect.stringMatching(
        /^INFO: \[kiln\] signed provenance stored .*an S3 layout is not in a registry$/,
      ),
    );
  });
});
