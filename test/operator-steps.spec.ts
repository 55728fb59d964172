import type { V1Container, V1Job, V1Secret } from '@kubernetes/client-node';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { IMAGE_PLACEHOLDER } from '../src/manifest/tool-commands.js';
import {
  BUILDKIT_IMAGE,
  KANIKO_IMAGE,
  SBOM_TOOL_IMAGES,
  SCAN_TOOL_IMAGES,
} from '../src/build-methods/images.js';
import { BUILD_SECRETS_DIR, OUT_DIR } from '../src/build-methods/job.js';
import { PACKER_IMAGE } from '../src/build-methods/packer.js';
import { paketoBuilderImage } from '../src/build-methods/paketo.js';
import { STEP_SCRIPT } from '../src/build-methods/steps.js';
import { BuildReconciler } from '../src/operator/builds/build-reconciler.js';
import { runStep } from '../src/steps/run-step.js';
import { wizardManifest } from './support/builds.js';
import { jsonOf } from './support/http.js';
import { noteDoubleOnly } from './support/kube/cluster-target.js';
import {
  type ContainerRunContext,
  type ContainerScript,
  hostPath,
} from './support/kube/kubelet.js';
import {
  type BuildRecord,
  NS,
  OperatorGround,
  type StoredLine,
  until,
} from './support/operator-ground.js';

noteDoubleOnly('the steps after the image');

const fixture = (name: string): string =>
  readFileSync(join(__dirname, '../src/artifacts/fixtures', name), 'utf8');

/** syft's SPDX 2.3 output and trivy's report (LOW in bash without a fix, CRITICAL in libidn2-0). */
const SPDX = fixture('sbom-syft.spdx.json');
const TRIVY = fixture('trivy-debian-buster.json');
const POLICY_FINDING = 'CVE-2019-18224';
/** The same trivy report with the libidn2-0 finding at HIGH: what a `fail_on: high` policy counts. */
const TRIVY_HIGH = JSON.stringify(
  (() => {
    const report = JSON.parse(TRIVY);
    for (const result of report.Results)
      for (const vulnerability of result.Vulnerabilities ?? [])
        if (vulnerability.VulnerabilityID === POLICY_FINDING) vulnerability.Severity = 'HIGH';
    return report;
  })(),
);

/** The API's KILN_ARTIFACT_MAX_BYTES here: above both fixtures, below OVERSIZED_SPDX. */
const CAP = 8 * 1024;
/**
 * The syft fixture with its first package repeated until the document is about three caps: over
 * the cap, under the upload limit (UPLOAD_LIMIT_FACTOR caps).
 */
const OVERSIZED_SPDX = (() => {
  const document = JSON.parse(SPDX);
  const [first] = document.packages;
  document.packages = Array.from({ length: 30 }, (_, i) => ({
    ...first,
    SPDXID: `SPDXRef-Package-copy-${i}`,
  }));
  return JSON.stringify(document, null, 2);
})();

const STEP_IMAGE = `registry.example.com/kiln/kiln@sha256:${'5'.repeat(64)}`;
const STEP_CONTAINERS = ['image-ref', 'sbom', 'scan', 'upload'] as const;
const TOOL_IMAGES = { syft: SBOM_TOOL_IMAGES.syft!, trivy: SCAN_TOOL_IMAGES.trivy! };
const PAKETO_BUILDER = 'paketobuildpacks/builder:base';

type Method = 'kaniko' | 'buildx' | 'container' | 'paketo';
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

function write(context: ContainerRunContext, path: string, text: string): void {
  const file = hostPath(context, path);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, text);
}

/** Every value of `<name>=value` in argv (`--destination=…`, `-tag=…`). */
const flags = (args: readonly string[], name: string): string[] =>
  args.filter((arg) => arg.startsWith(`${name}=`)).map((arg) => arg.slice(name.length + 1));

function flag(args: readonly string[], name: string): string {
  const [value] = flags(args, name);
  if (value === undefined) throw new Error(`the builder got no ${name}`);
  return value;
}

/**
 * What each builder writes about its push under OUT_DIR, from its own arguments, as the real one
 * does: kaniko `--image-name-with-digest-file` (one `<destination>@<digest>` line each),
 * BuildKit `--metadata-file` (`containerimage.digest`, `image.name`), the CNB lifecycle
 * `-report` (report.toml `[image]`).
 */
const PUSH_REPORTS = {
  kaniko: (context: ContainerRunContext, digest: string): void => {
    const destinations = flags(context.args, '--destination');
    if (destinations.length === 0) throw new Error('kaniko got no --destination');
    // Without the flag (no steps to read it) kaniko writes no such file.
    for (const file of flags(context.args, '--image-name-with-digest-file'))
      write(
        context,
        file,
        destinations.map((destination) => `${destination}@${digest}\n`).join(''),
      );
  },
  buildkit: (context: ContainerRunContext, digest: string): void => {
    const output = flag(context.args, '--output');
    const name = /"name=([^"]*)"|name=([^,]*)/.exec(output);
    if (name === null) throw new Error(`no image name in --output=${output}`);
    write(
      context,
      flag(context.args, '--metadata-file'),
      JSON.stringify({ 'containerimage.digest': digest, 'image.name': name[1] ?? name[2] }),
    );
  },
  cnb: (context: ContainerRunContext, digest: string): void => {
    const tags = [context.args.at(-1) ?? '', ...flags(context.args, '-tag')];
    write(
      context,
      flag(context.args, '-report'),
      `[image]\n  tags = [${tags.map((tag) => JSON.stringify(tag)).join(', ')}]\n  digest = "${digest}"\n  manifest-size = 1234\n\n[build]\n`,
    );
  },
};

/**
 * The scripted world of one test: the builders push a fresh digest each and say so where the
 * steps read it; the SBOM and scan tools check they were given that image and write their
 * document; kiln's own step image runs the real step program, whose upload goes over HTTP to
 * the real API.
 */
interface World {
  /** The repository the build pushes to (its manifest's registry_repository). */
  readonly repository: string;
  readonly sbom?: string;
  readonly scan?: string;
  /** Lines the builder prints before it pushes (besides the one naming the digest). */
  readonly builderLines?: (context: ContainerRunContext) => string[];
  /** Changes the upload container's environment (a wrong token). */
  readonly uploadEnv?: (env: Record<string, string>) => Record<string, string>;
  /** What becomes of the termination message the image-ref step wrote (a garbled one). */
  readonly imageRefMessage?: (written: string) => string;
}

/** The suite's cluster, API and database (beforeAll). */
let ground: OperatorGround;

/** The image each pod's builder reported it pushed: `<repository>@sha256:…`. */
const pushed = new Map<string, string>();

function builder(world: World, report: (context: ContainerRunContext, digest: string) => void) {
  return {
    lines: ['building the image', 'pushing the image'],
    run: guarded((context) => {
      const digest = `sha256:${randomBytes(32).toString('hex')}`;
      const printed = world.builderLines?.(context) ?? [];
      report(context, digest);
      pushed.set(context.pod, `${world.repository}@${digest}`);
      return { lines: [...printed, `pushed ${digest}`] };
    }),
  } satisfies ContainerScript;
}

/**
 * An SBOM or scan tool's image. In a real pod STEP_SCRIPT puts the reference the image-ref step
 * wrote in place of `@IMAGE@`; here that is emulated, and the reference must be the builder's.
 */
function tool(kind: 'sbom' | 'scan', document: string): ContainerScript {
  return {
    run: guarded((context) => {
      const { command } = context;
      if (command[1] !== '-c' || command[2] !== STEP_SCRIPT)
        throw new Error(`the ${kind} step does not run kiln's step script`);
      const reference = readFileSync(hostPath(context, `${OUT_DIR}/image`), 'utf8').trim();
      const expected = pushed.get(context.pod);
      if (reference !== expected)
        return {
          lines: [`fake ${kind} tool: ${reference} is not the pushed image ${expected}`],
          exitCode: 64,
        };
      const argv = context.args.map((arg) =>
        arg.endsWith(IMAGE_PLACEHOLDER) ? arg.slice(0, -IMAGE_PLACEHOLDER.length) + reference : arg,
      );
      const output =
        kind === 'sbom'
          ? argv.find((arg) => arg.startsWith('spdx-json='))?.slice('spdx-json='.length)
          : argv[argv.indexOf('--output') + 1];
      const target = kind === 'sbom' ? `registry:${reference}` : reference;
      if (!argv.includes(target) || output === undefined)
        throw new Error(`unexpected ${kind} arguments: ${argv.join(' ')}`);
      write(context, output, document);
      return { lines: [`kiln: ${kind === 'sbom' ? 'SBOM' : 'scan'} step: ${argv.join(' ')}`] };
    }),
  };
}

/**
 * kiln's own step image: the real step program, its lines printed, its exit code the container's.
 * The paths it is given are the container's, reached through the kubelet's mounts (the image-ref
 * step's termination message file among them).
 */
function kilnSteps(world: World): ContainerScript {
  return {
    run: guarded(async (context) => {
      const lines: string[] = [];
      const env =
        context.container === 'upload' && world.uploadEnv !== undefined
          ? world.uploadEnv({ ...context.env })
          : context.env;
      const messagePath = env['KILN_TERMINATION_MESSAGE_PATH'];
      const messageFile = messagePath === undefined ? undefined : hostPath(context, messagePath);
      // packer-manifest is given the template's and packer's paths in the pod; it mounts no OUT_DIR.
      const [step, ...rest] = context.args;
      const args =
        step === 'packer-manifest'
          ? [step, ...rest.map((path) => hostPath(context, path))]
          : context.args;
      const exitCode = await runStep(args, {
        env: {
          ...env,
          ...(context.mounts[OUT_DIR] === undefined
            ? {}
            : { KILN_STEP_OUT_DIR: hostPath(context, OUT_DIR) }),
          ...(messageFile === undefined ? {} : { KILN_TERMINATION_MESSAGE_PATH: messageFile }),
        },
        print: (line) => lines.push(line),
      });
      if (messageFile !== undefined && world.imageRefMessage !== undefined)
        writeFileSync(messageFile, world.imageRefMessage(readFileSync(messageFile, 'utf8')));
      return { lines, exitCode };
    }),
  };
}

describe('the steps after the image, through the operator', () => {
  beforeAll(async () => {
    ground = await OperatorGround.start('operator-steps', {
      apiEnv: { KILN_ARTIFACT_MAX_BYTES: String(CAP) },
    });
  });

  afterEach(() => {
    jest.restoreAllMocks();
    return ground.reset();
  });

  afterAll(() => ground.close());

  /** An operator that runs the steps: kiln's image, and the API as the pods reach it. */
  const stepsOperator = () =>
    ground.startOperator({
      env: { KILN_STEP_IMAGE: STEP_IMAGE, KILN_UPLOAD_URL: ground.api.baseUrl },
    });

  function script(world: World): void {
    const kubelet = ground.cluster.kubelet;
    kubelet.script(KANIKO_IMAGE, builder(world, PUSH_REPORTS.kaniko));
    kubelet.script(BUILDKIT_IMAGE, builder(world, PUSH_REPORTS.buildkit));
    kubelet.script(paketoBuilderImage(PAKETO_BUILDER).image, builder(world, PUSH_REPORTS.cnb));
    kubelet.script(TOOL_IMAGES.syft, tool('sbom', world.sbom ?? SPDX));
    kubelet.script(TOOL_IMAGES.trivy, tool('scan', world.scan ?? TRIVY));
    kubelet.script(STEP_IMAGE, kilnSteps(world));
  }

  /** A wizard build of `method` pushing to `repository`, created and started through the API. */
  async function started(
    method: Method | 'packer',
    buildConfig: Record<string, unknown> = {},
    repository?: string,
  ): Promise<string> {
    const manifest = wizardManifest(method);
    Object.assign(
      manifest['build_config'] as Record<string, unknown>,
      {
        ...(method === 'paketo'
          ? { paketo_config: { builder: PAKETO_BUILDER, buildpacks: [] } }
          : {}),
        ...(method === 'packer'
          ? // The wizard's docker builder needs a daemon a build pod does not have.
            {
              packer_template: JSON.stringify({
                builders: [{ type: 'null', communicator: 'none' }],
              }),
            }
          : {}),
      },
      buildConfig,
      repository === undefined ? {} : { registry_repository: repository },
    );
    const created = await ground.admin.request('POST', '/builds', {
      tenant_id: ground.seeded.tenantA,
      project_id: ground.seeded.projectA,
      manifest,
    });
    expect(created.status).toBe(201);
    const id = (await jsonOf(created)).data.id as string;
    expect((await ground.admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
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

  const get = (id: string, what: 'sbom' | 'scan') =>
    ground.admin.request('GET', `/builds/${id}/${what}`);

  /** The stored lines of these containers, in stored order. */
  const linesOf = (lines: StoredLine[], ...containers: string[]) =>
    lines.filter((l) => containers.includes(l.metadata?.['container'] ?? ''));

  /** The containers of the stored lines, each run of one container once. */
  const containerOrder = (lines: StoredLine[]): string[] =>
    lines
      .map((l) => l.metadata?.['container'] ?? '')
      .filter((name, i, all) => i === 0 || all[i - 1] !== name);

  const secretOf = (id: string): V1Secret | undefined =>
    ground.cluster.object('v1', 'secrets', NS, `kiln-${id}`) as V1Secret | undefined;

  const names = (containers: V1Container[] | undefined) => (containers ?? []).map((c) => c.name);

  const TRIVY_FINDINGS = [
    {
      id: 'CVE-2019-18224',
      package: 'libidn2-0',
      version: '2.0.5-1',
      fixed_version: '2.0.5-1+deb10u1',
      severity: 'critical',
    },
    {
      id: 'CVE-2019-18276',
      package: 'bash',
      version: '5.0-4',
      fixed_version: null,
      severity: 'low',
    },
  ];

  it.each<Method>(['kaniko', 'buildx', 'container', 'paketo'])(
    'a %s build runs its builder, then image-ref, SBOM, scan and upload against the pushed digest, and succeeds',
    async (method) => {
      const repository = `registry.example.com/team/${method}`;
      script({ repository });
      await stepsOperator();

      const id = await started(method, {}, repository);
      const build = await endedAs(id, 'success');
      const job = ground.jobOf(id)!.spec!.template.spec!;
      expect(names(job.initContainers)).toEqual(['source', 'build', 'image-ref', 'sbom', 'scan']);
      expect(names(job.containers)).toEqual(['upload']);

      const sbom = await get(id, 'sbom');
      expect(sbom.status).toBe(200);
      expect(await jsonOf(sbom)).toMatchObject({
        build_id: id,
        tool: 'syft',
        format: 'spdx-json',
        truncated: false,
        received_bytes: Buffer.byteLength(SPDX),
        document: JSON.parse(SPDX),
        partial: null,
      });
      const scan = await get(id, 'scan');
      expect(scan.status).toBe(200);
      expect(await jsonOf(scan)).toMatchObject({
        build_id: id,
        tool: 'trivy',
        findings: TRIVY_FINDINGS,
        summary: { critical: 1, high: 0, medium: 0, low: 1, negligible: 0, unknown: 0 },
        policy: null,
      });

      const lines = await ground.storedLines(id);
      const steps = linesOf(lines, 'build', ...STEP_CONTAINERS);
      expect(containerOrder(steps)).toEqual(['build', ...STEP_CONTAINERS]);
      // The builder's lines; then the image-ref step's, naming `<repository>@<the digest pushed>`.
      const image = pushed.get(ground.podOf(id)?.metadata?.name ?? '');
      expect(image).toBeDefined();
      expect(linesOf(lines, 'build').map((l) => l.message)).toEqual([
        'building the image',
        'pushing the image',
        `pushed ${image?.split('@')[1]}`,
      ]);
      expect(linesOf(lines, 'image-ref').map((l) => l.message)).toEqual([
        `kiln: the pushed image is ${image}`,
      ]);
      // What was pushed, as the image-ref step told the operator: the digest, and each tag.
      const digest = image?.split('@')[1];
      expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(build).toMatchObject({
        image_digest: digest,
        images: ['latest', 'v1'].map((tag) => `${repository}:${tag}@${digest}`),
      });
      expect(linesOf(lines, 'upload').map((l) => l.message)).toEqual([
        `kiln: uploaded the sbom (${Buffer.byteLength(SPDX)} bytes)`,
        `kiln: uploaded the scan (${Buffer.byteLength(TRIVY)} bytes)`,
      ]);
    },
  );

  it.each<[string, (written: string) => string, string]>([
    ['no', () => '', 'the image-ref step left no termination message'],
    [
      'a garbled',
      (written) => written.slice(1),
      'the image-ref step’s termination message is not JSON',
    ],
  ])(
    'a build whose image-ref step leaves %s termination message succeeds, with no digest and a WARN line',
    async (_which, imageRefMessage, problem) => {
      const repository = 'registry.example.com/team/unreported';
      script({ repository, imageRefMessage });
      await stepsOperator();

      const id = await started('kaniko', {}, repository);
      const build = await endedAs(id, 'success');
      expect(build).toMatchObject({ image_digest: null, images: [] });
      const kiln = linesOf(await ground.storedLines(id), 'kiln').map((l) => l.message);
      expect(kiln).toContain(
        `WARN: [kiln] could not learn the pushed image's digest (${problem}); the build records none`,
      );
      // The steps ran against the pushed image all the same.
      expect((await get(id, 'sbom')).status).toBe(200);
    },
  );

  /**
   * packer as its manifest post-processor works: reads the template from the ConfigMap's mount,
   * and writes one build per builder of this run, appended to the `output` (packer's default
   * file when none) in packer's working directory, as packer 1.6.6 formats it.
   */
  const fakePacker: ContainerScript = {
    lines: ['==> null: Running builder'],
    run: guarded((context) => {
      if (context.container !== 'build') return { lines: [] };
      const template = JSON.parse(
        readFileSync(hostPath(context, '/kiln/dockerfile/template.json'), 'utf8'),
      ) as {
        builders: Array<{ type: string }>;
        'post-processors'?: Array<{ type: string; output?: string }>;
      };
      const manifest = (template['post-processors'] ?? []).find((p) => p.type === 'manifest');
      if (manifest === undefined) return { lines: ['==> Builds finished.'] };
      const run = randomBytes(16).toString('hex');
      const builds = template.builders.map((builder) => ({
        name: builder.type,
        builder_type: builder.type,
        build_time: 1795869700,
        files: null,
        artifact_id: builder.type === 'null' ? 'Null' : 'File',
        packer_run_uuid: run,
        custom_data: null,
      }));
      const file = `/workspace/source/${manifest.output ?? 'packer-manifest.json'}`;
      const written = JSON.stringify({ builds, last_run_uuid: run }, null, 2);
      write(context, file, written);
      packerManifests.set(context.pod, Buffer.from(written));
      return { lines: ['==> null: Running post-processor: manifest'] };
    }),
  };
  /** What the fake packer wrote as its manifest, by pod. */
  const packerManifests = new Map<string, Buffer>();

  /**
   * What the recorded success of build `id` was handed of packer's manifest: the reconciler's
   * `succeed`, where the build's provenance reads what packer made.
   */
  const packerHandedTo = (
    succeed: jest.SpiedFunction<(...args: unknown[]) => unknown>,
    id: string,
  ): unknown => succeed.mock.calls.find(([record]) => (record as { id: string }).id === id)?.[3];
  const spyOnSucceed = () =>
    jest.spyOn(
      BuildReconciler.prototype as unknown as { succeed: (...args: unknown[]) => unknown },
      'succeed',
    );

  it('a packer build pushes no image: packer-manifest follows packer and hands the success what the manifest lists', async () => {
    ground.cluster.kubelet.script(PACKER_IMAGE, fakePacker);
    script({ repository: 'registry.example.com/team/unused' });
    const succeed = spyOnSucceed();
    await stepsOperator();

    const id = await started('packer', {
      packer_template: JSON.stringify({
        builders: [{ type: 'null', communicator: 'none' }],
        'post-processors': [{ type: 'manifest', output: 'out/manifest.json' }],
      }),
    });
    await endedAs(id, 'success');
    const pod = ground.jobOf(id)!.spec!.template.spec!;
    expect(names(pod.initContainers)).toEqual(['source', 'packer-validate', 'build']);
    expect(names(pod.containers)).toEqual(['packer-manifest']);
    const manifest = packerManifests.get(ground.podOf(id)?.metadata?.name ?? '');
    expect(manifest).toBeDefined();
    const digest = `sha256:${createHash('sha256').update(manifest!).digest('hex')}`;
    const lines = await ground.storedLines(id);
    expect(linesOf(lines, 'packer-manifest').map((l) => l.message)).toEqual([
      `kiln: packer's manifest out/manifest.json names 1 artifact (${digest})`,
    ]);
    expect(packerHandedTo(succeed, id)).toEqual({
      kind: 'artifacts',
      artifacts: {
        manifestDigest: digest,
        artifacts: [{ name: 'null', builderType: 'null', artifactId: 'Null' }],
      },
    });
    const kiln = linesOf(lines, 'kiln').map((l) => l.message);
    expect(kiln).toContain(
      '[kiln] the SBOM (syft) and scan (trivy) steps are skipped: this build pushes no image to describe or scan',
    );
    expect(kiln.filter((line) => /manifest/.test(line))).toEqual([]);
    expect((await get(id, 'sbom')).status).toBe(404);
    expect((await get(id, 'scan')).status).toBe(404);
  });

  it('a packer build whose template has no manifest post-processor says so once, at the end of its log', async () => {
    ground.cluster.kubelet.script(PACKER_IMAGE, fakePacker);
    script({ repository: 'registry.example.com/team/unused' });
    const succeed = spyOnSucceed();
    await stepsOperator();

    const id = await started('packer');
    await endedAs(id, 'success');
    const lines = await ground.storedLines(id);
    const note =
      '[kiln] the template has no manifest post-processor; provenance names no artifacts';
    expect(lines.filter((l) => l.message === note)).toHaveLength(1);
    // After every line of the pod: the operator says it once the build's log is stored.
    const last = lines.findLastIndex((l) => l.metadata?.['container'] !== 'kiln');
    expect(lines.findIndex((l) => l.message === note)).toBeGreaterThan(last);
    expect(linesOf(lines, 'packer-manifest')).toEqual([]);
    expect(packerHandedTo(succeed, id)).toEqual({
      kind: 'none',
      reason: 'the template has no manifest post-processor; provenance names no artifacts',
    });
  });

  it('a HIGH finding fails a build whose scan policy is fail_on high: PolicyViolation, the image stays pushed', async () => {
    const repository = 'registry.example.com/team/policy';
    script({ repository, scan: TRIVY_HIGH });
    await stepsOperator();

    const id = await started('kaniko', { scan_policy: { fail_on: 'high' } }, repository);
    const build = await endedAs(id, 'failed');
    expect(await ground.column(id, 'failure_reason')).toBe('PolicyViolation');
    expect(build.error_message).toContain(`${POLICY_FINDING} (libidn2-0 2.0.5-1)`);
    expect(build.error_message).toMatch(/image was pushed and stays in the registry/);
    // What it pushed is on the build, so users can find the image and remove it.
    const image = pushed.get(ground.podOf(id)?.metadata?.name ?? '');
    const digest = image?.split('@')[1];
    expect(digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(build).toMatchObject({
      image_digest: digest,
      images: ['latest', 'v1'].map((tag) => `${repository}:${tag}@${digest}`),
    });
    const scan = await jsonOf(await get(id, 'scan'));
    expect(scan.summary).toMatchObject({ high: 1, low: 1 });
    expect(scan.policy).toMatchObject({
      fail_on: 'high',
      ignore: [],
      violated: true,
      summary: expect.stringContaining(POLICY_FINDING),
    });
  });

  it('the same finding on the policy’s ignore list lets the build succeed', async () => {
    const repository = 'registry.example.com/team/policy';
    script({ repository, scan: TRIVY_HIGH });
    await stepsOperator();

    const id = await started(
      'kaniko',
      { scan_policy: { fail_on: 'high', ignore: [POLICY_FINDING] } },
      repository,
    );
    await endedAs(id, 'success');
    expect(await ground.column(id, 'failure_reason')).toBeNull();
    expect((await jsonOf(await get(id, 'scan'))).policy).toMatchObject({
      fail_on: 'high',
      ignore: [POLICY_FINDING],
      violated: false,
      summary: null,
    });
  });

  it.each<[string, number]>([
    ['garbage', 401],
    ['another build’s', 403],
  ])(
    'an upload with %s SBOM token is refused (%i): the build fails and no SBOM is stored',
    async (_which, status) => {
      const repository = 'registry.example.com/team/tokens';
      let token = `kiln-upload.${randomBytes(32).toString('base64url')}`;
      await stepsOperator();
      if (status === 403) {
        script({ repository });
        const other = await started('kaniko', {}, repository);
        await endedAs(other, 'success');
        const data = secretOf(other)?.data?.['upload-token.sbom'];
        token = Buffer.from(data ?? '', 'base64').toString('utf8');
        expect(token).toMatch(/^kiln-upload\./);
      }
      script({
        repository,
        uploadEnv: (env) => ({ ...env, KILN_UPLOAD_TOKEN_SBOM: token }),
      });

      const id = await started('kaniko', {}, repository);
      const build = await endedAs(id, 'failed');
      expect(await ground.column(id, 'failure_reason')).toBe('BuildFailed');
      expect(build.error_message).toMatch(/container upload exited with code 1/);
      const upload = linesOf(await ground.storedLines(id), 'upload').map((l) => l.message);
      expect(upload).toContainEqual(
        expect.stringMatching(new RegExp(`^kiln: the sbom was refused: kiln answered ${status}`)),
      );
      expect((await get(id, 'sbom')).status).toBe(404);
      // The scan's own token was right: only the refused kind is missing.
      expect((await get(id, 'scan')).status).toBe(200);
    },
  );

  it('an SBOM over KILN_ARTIFACT_MAX_BYTES is stored truncated with a note, and the build succeeds', async () => {
    const repository = 'registry.example.com/team/large';
    script({ repository, sbom: OVERSIZED_SPDX });
    await stepsOperator();

    const id = await started('kaniko', {}, repository);
    await endedAs(id, 'success');
    const size = Buffer.byteLength(OVERSIZED_SPDX);
    expect(size).toBeGreaterThan(CAP);
    expect(await jsonOf(await get(id, 'sbom'))).toMatchObject({
      tool: 'syft',
      format: 'spdx-json',
      truncated: true,
      received_bytes: size,
      document: null,
      partial: OVERSIZED_SPDX.slice(0, CAP),
      note: expect.stringMatching(/KILN_ARTIFACT_MAX_BYTES/),
    });
    const kiln = linesOf(await ground.storedLines(id), 'kiln').map((l) => l.message);
    expect(kiln).toContain(
      `WARN: [kiln] the syft SBOM was ${size} bytes; kiln keeps ${CAP} (KILN_ARTIFACT_MAX_BYTES), so it is stored truncated`,
    );
  });

  it('a buildx secret reaches the builder only through the build’s Secret and is masked in the log', async () => {
    const repository = 'registry.example.com/team/secrets';
    const secret = randomBytes(18).toString('base64url');
    const encoded = Buffer.from(secret).toString('base64');
    expect(secret).toHaveLength(24);
    script({
      repository,
      // What a careless Dockerfile step does: print the mounted secret, plain and in base64.
      builderLines: (context) => {
        const value = readFileSync(
          hostPath(context, `${BUILD_SECRETS_DIR}/build-secret.npm_token`),
          'utf8',
        );
        return [
          `npm token: ${value}`,
          `npm token (base64): ${Buffer.from(value).toString('base64')}`,
        ];
      },
    });
    await stepsOperator();

    const id = await started('buildx', { secrets: { npm_token: secret } }, repository);
    await until('the Job to own the build’s Secret', () =>
      secretOf(id)?.metadata?.ownerReferences?.some((o) => o.kind === 'Job'),
    );
    await endedAs(id, 'success');
    const job = ground.jobOf(id) as V1Job;
    const stored = secretOf(id)!;
    expect(stored.metadata?.ownerReferences).toEqual([
      expect.objectContaining({
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: `kiln-${id}`,
        uid: job.metadata?.uid,
        controller: true,
      }),
    ]);
    const value = (key: string) => Buffer.from(stored.data?.[key] ?? '', 'base64').toString('utf8');
    expect(value('build-secret.npm_token')).toBe(secret);
    const tokens = [value('upload-token.sbom'), value('upload-token.scan')];
    for (const token of tokens) expect(token).toMatch(/^kiln-upload\./);

    // Everywhere in the cluster but the build's own Secret: neither the secret nor a token.
    expect(ground.cluster.object('v1', 'configmaps', NS, `kiln-${id}`)).toBeDefined();
    const others = [
      ...ground.cluster.objects('kiln.dev/v1alpha1', 'builds', NS),
      ...ground.cluster.objects('batch/v1', 'jobs', NS),
      ...ground.cluster.objects('v1', 'pods', NS),
      ...ground.cluster.objects('v1', 'configmaps', NS),
      ...ground.cluster.objects('v1', 'events', NS),
      ...ground.cluster
        .objects('v1', 'secrets', NS)
        .filter((s) => s.metadata.name !== `kiln-${id}`),
    ].map((object) => JSON.stringify(object));
    for (const text of others) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(encoded);
      for (const token of tokens) expect(text).not.toContain(token);
    }
    const upload = job.spec!.template.spec!.containers.find((c) => c.name === 'upload')!;
    expect(upload.env?.filter((e) => e.name.startsWith('KILN_UPLOAD_TOKEN_'))).toEqual(
      ['sbom', 'scan'].map((kind) => ({
        name: `KILN_UPLOAD_TOKEN_${kind.toUpperCase()}`,
        valueFrom: { secretKeyRef: { name: `kiln-${id}`, key: `upload-token.${kind}` } },
      })),
    );

    const lines = await ground.storedLines(id);
    for (const line of lines) {
      expect(line.message).not.toContain(secret);
      expect(line.message).not.toContain(encoded);
    }
    expect(linesOf(lines, 'build').map((l) => l.message)).toEqual(
      expect.arrayContaining(['npm token: ***', 'npm token (base64): ***']),
    );
  });

  it('without KILN_STEP_IMAGE the build succeeds and one log line says the steps are off', async () => {
    const repository = 'registry.example.com/team/off';
    script({ repository });
    await ground.startOperator();

    const id = await started('kaniko', {}, repository);
    const build = await endedAs(id, 'success');
    // No image-ref step: kiln learns no digest, and there is nothing to warn about, but no
    // provenance either: a statement needs a subject (docs/provenance.md).
    expect(build).toMatchObject({
      image_digest: null,
      images: [],
      provenance: expect.stringMatching(/^failed: could not be made: the build left no image/),
    });
    const stored = await ground.storedLines(id);
    expect(
      stored.filter((l) => /digest/.test(l.message) && !/\[kiln\] provenance/.test(l.message)),
    ).toEqual([]);
    const off = stored.filter((l) => /steps are off/.test(l.message));
    expect(off.map((l) => l.message)).toEqual([
      '[kiln] the SBOM (syft) and scan (trivy) steps are off: the operator has no KILN_STEP_IMAGE',
    ]);
    const pod = ground.jobOf(id)!.spec!.template.spec!;
    expect(names(pod.initContainers)).toEqual(['source']);
    expect(names(pod.containers)).toEqual(['build']);
    expect(pod.containers[0]?.args?.join(' ')).not.toContain('--image-name-with-digest-file');
    expect(secretOf(id)).toBeUndefined();
    expect((await get(id, 'sbom')).status).toBe(404);
    expect((await get(id, 'scan')).status).toBe(404);
  });
});
