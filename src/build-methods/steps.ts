import { posix } from 'node:path';

import type {
  V1Container,
  V1EnvVar,
  V1SecurityContext,
  V1VolumeMount,
} from '@kubernetes/client-node';

import type { PushedImageFormat } from '../manifest/formats.js';
import type { OciLayoutFormat } from '../manifest/formats.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { SbomTool, ScanTool } from '../manifest/types.js';
import {
  type ScanSettings,
  sbomTool,
  scanTool,
  STEP_SHELLS,
  type StepTool,
  type Tool,
} from './step-tools.js';

// How each tool runs belongs to step-tools.ts; the local runner and the tests import it from here.
export { type ScanSettings, sbomTool, scanTool, STEP_SHELLS, type StepTool } from './step-tools.js';

/**
 * The steps after the image inside a build's pod (docs/adr/0019-build-steps-and-artifacts.md).
 * Pure, like every method's jobSpec: `jobOf` asks `stepsOf` for them once the method's builder is
 * known. In order, as init containers after the builder (init containers run one after another,
 * and a later one starts only when the one before it succeeded):
 *
 * 1. `image-ref` (kiln's image): reads what the builder wrote about the image it pushed and writes
 *    `name@sha256:…` to OUT_DIR/image, and the digest with every pushed reference to its
 *    termination message (TERMINATION_MESSAGE_PATH), where the operator reads them.
 * 2. `sbom` (the chosen SBOM tool's image): writes OUT_DIR/sbom.json against that digest.
 * 3. `scan` (the chosen scanner's image): writes OUT_DIR/scan.json against that digest.
 *
 * and then, as the pod's one container, `upload` (kiln's image): PUTs both files to kiln with the
 * build's upload tokens, read from the build's Secret. A tool that fails is said in the log and
 * its file is not uploaded; it does not fail the build (a scan policy does, when it is set and no
 * scan was stored). An upload kiln refuses, or one that cannot reach kiln, fails the build.
 *
 * A `registry_type: s3` build pushes nothing: its builder writes the image as an OCI image layout
 * under OUT_DIR, and the pod's one container is `s3-upload` (kiln's image), which uploads it to
 * the tenant's bucket and reports the digest and `s3://` address as image-ref does. The SBOM and
 * scan steps read the image from a registry, so they do not run for such a build.
 *
 * A packer build pushes nothing either: its pod's one container after packer is
 * `packer-manifest` (kiln's image), which reads the file the template's manifest post-processor
 * wrote and tells the operator what it lists, for the build's provenance.
 */

/** The shared directory of the steps (an emptyDir): builder output, image, sbom.json, scan.json. */
export const OUT_DIR = '/kiln/out';
export const OUT_VOLUME = 'kiln-out';
/** Step containers' writable scratch (HOME, TMPDIR, tool caches such as trivy's database). */
export const STEP_TMP_VOLUME = 'step-tmp';
/** Where a step's registry credentials (the builder's Secret) are mounted. */
export const STEP_DOCKER_CONFIG = '/kiln/docker';

/** The `image-ref` step's termination message file (Kubernetes' default, set explicitly). */
export const TERMINATION_MESSAGE_PATH = '/dev/termination-log';

export const STEP_CONTAINERS = {
  imageRef: 'image-ref',
  sbom: 'sbom',
  scan: 'scan',
  upload: 'upload',
  s3Upload: 's3-upload',
  packerManifest: 'packer-manifest',
} as const;

/** Keys of the build's Secret the upload step reads its tokens from. */
export const UPLOAD_TOKEN_PREFIX = 'upload-token.';
export const UPLOAD_TOKEN_KEYS = {
  sbom: `${UPLOAD_TOKEN_PREFIX}sbom`,
  scan: `${UPLOAD_TOKEN_PREFIX}scan`,
} as const;

/**
 * The script the SBOM and scan containers run with `/bin/sh -c`: a constant. The tool's argv
 * follows as positional parameters; an argument ending in `@IMAGE@` gets the pushed reference
 * (read from a file the image-ref step wrote) in its place, as one argument, never as text of the
 * script. The tool's exit code is kept in the log; the step itself always succeeds.
 */
export const STEP_SCRIPT = [
  'set -u',
  'out="$KILN_STEP_OUTPUT"',
  `if [ ! -s ${OUT_DIR}/image ]; then`,
  `  printf 'kiln: no pushed image is known: the %s step is skipped\\n' "$KILN_STEP_NAME"`,
  '  exit 0',
  'fi',
  `ref="$(cat ${OUT_DIR}/image)"`,
  'for arg do',
  '  shift',
  '  case "$arg" in',
  '    *@IMAGE@) set -- "$@" "${arg%@IMAGE@}$ref" ;;',
  '    *) set -- "$@" "$arg" ;;',
  '  esac',
  'done',
  'rm -f "$out"',
  `printf 'kiln: %s step: %s\\n' "$KILN_STEP_NAME" "$*"`,
  'if [ -n "${KILN_STEP_STDOUT:-}" ]; then "$@" > "$out"; else "$@"; fi',
  'status=$?',
  'if [ "$status" -ne 0 ] && [ "$status" -ne "${KILN_STEP_OK_EXIT:-0}" ]; then',
  `  printf 'kiln: the %s step failed (exit %s); nothing from it is uploaded\\n' "$KILN_STEP_NAME" "$status"`,
  '  rm -f "$out"',
  'fi',
  'exit 0',
].join('\n');

/** What the operator configures for the steps (KILN_STEP_*; see src/config). */
export interface StepSettings extends ScanSettings {
  /** kiln's own image (node, dist/steps/step-main.js), pinned by digest; none: no steps. */
  readonly kilnImage?: string;
  /** kiln's API as the build pods reach it (`http://kiln-api.kiln.svc:8080`); none: no steps. */
  readonly uploadUrl?: string;
  /**
   * Each tool's image, pinned by digest, with the shell STEP_SHELLS names. A tool without one
   * (no citable pin of an image with a shell) is skipped with a note until the operator sets it.
   */
  readonly sbomImages: Readonly<Partial<Record<SbomTool, string>>>;
  readonly scanImages: Readonly<Partial<Record<ScanTool, string>>>;
}

/** What the steps add to a build's pod, or why there are none. */
export type StepsPlan =
  | {
      readonly kind: 'steps';
      readonly initContainers: readonly V1Container[];
      readonly containers: readonly V1Container[];
      /** Keys of the build's Secret the steps read (the reconciler fills them). */
      readonly secretKeys: readonly string[];
      readonly notes: readonly string[];
    }
  | { readonly kind: 'none'; readonly notes: readonly string[] }
  /** The build cannot run as a Job (permanent, as JobTranslation's `unsupported`). */
  | { readonly kind: 'unsupported'; readonly reason: string };

/**
 * Non-root, no capabilities, read-only root filesystem: PSS restricted. kiln's own containers of
 * every build pod run so: the steps here and `source` (job.ts SOURCE_SECURITY_CONTEXT).
 */
export const STEP_SECURITY_CONTEXT: V1SecurityContext = {
  runAsUser: 65532,
  runAsGroup: 65532,
  runAsNonRoot: true,
  privileged: false,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

/** Where a builder writes what it pushed (JobPlan.pushedImage), a file under OUT_DIR. */
export interface PushedImage {
  readonly format: PushedImageFormat;
  readonly file: string;
}

/**
 * Where a builder writes the image instead of pushing it (JobPlan.ociLayout, registry_type s3):
 * an OCI image layout tarball or directory directly under OUT_DIR.
 */
export interface OciLayoutOutput {
  readonly format: OciLayoutFormat;
  readonly path: string;
}

/** What the packer-manifest step reads (JobPlan.packerManifest), as jobOf completes it. */
export interface PackerManifestInput {
  /** The template, as the step reads it (the build's ConfigMap, mounted). */
  readonly template: string;
  /** packer's working directory: a relative manifest `output` is resolved against it. */
  readonly workingDir: string;
  /**
   * The builder's mounts of volumes other than Secrets, read-only: wherever packer could write
   * its manifest, the step can read it, and it sees no credential.
   */
  readonly mounts: readonly V1VolumeMount[];
}

/**
 * Where an s3 build's image goes (the tenant's S3 settings, as BuildAccess resolved them). Never
 * the keys themselves: `credentials` says the build's Secret holds them (S3_CREDENTIAL_KEYS);
 * without, the pod signs in as its own identity (IRSA on its service account).
 */
export interface S3UploadTarget {
  readonly bucket: string;
  readonly prefix?: string;
  readonly region: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  readonly credentials: boolean;
}

/** Keys of the build's Secret the s3-upload step reads its access key from. */
export const S3_CREDENTIAL_KEYS = {
  accessKeyId: 's3.access-key-id',
  secretAccessKey: 's3.secret-access-key',
} as const;

export interface StepInputs {
  readonly spec: BuildSpec;
  readonly buildId: string;
  readonly projectId: string;
  readonly buildNumber: number;
  readonly settings: StepSettings;
  /** Set when the builder pushes an image and says where it wrote what it pushed. */
  readonly pushed: PushedImage | undefined;
  /** Set when the builder writes the image as an OCI layout for S3 instead of pushing it. */
  readonly ociLayout: OciLayoutOutput | undefined;
  /** Where that layout goes. */
  readonly s3: S3UploadTarget | undefined;
  /** Set for a packer build: where the packer-manifest step finds the template and the manifest. */
  readonly packerManifest?: PackerManifestInput | undefined;
  /** The build's Secret (per-build tokens); none: the steps cannot upload. */
  readonly buildSecretName: string | undefined;
  /** The registry credentials Secret, mounted for the tools to pull the pushed image. */
  readonly credentialsSecretVolume: string | undefined;
  /** Registries reached over plain HTTP or unverified TLS. */
  readonly insecureRegistries: readonly string[];
  readonly resources: V1Container['resources'];
  readonly imagePullPolicy: V1Container['imagePullPolicy'];
}

/**
 * Whether a build gets steps once its builder pushes: it names a tool and the operator can run
 * them. A builder that reports its push only for the steps (kaniko's digest file) asks this.
 */
export function stepsConfigured(spec: BuildSpec, settings: StepSettings): boolean {
  return (
    (spec.sbomTool !== null || spec.scanTool !== null) &&
    settings.kilnImage !== undefined &&
    settings.uploadUrl !== undefined
  );
}

/** The SBOM and scan steps a build names (`SBOM (syft) and scan (trivy)`); undefined: none. */
function toolsNamed(spec: BuildSpec): string | undefined {
  const what = [
    spec.sbomTool === null ? undefined : `SBOM (${spec.sbomTool})`,
    spec.scanTool === null ? undefined : `scan (${spec.scanTool})`,
  ].filter((part) => part !== undefined);
  return what.length === 0 ? undefined : what.join(' and ');
}

const OUT_MOUNT: V1VolumeMount = { name: OUT_VOLUME, mountPath: OUT_DIR };

/** A step run by kiln's own image: `node dist/steps/step-main.js <args>` (run-step.ts). */
function kilnStep(
  inputs: StepInputs,
  kilnImage: string,
  name: string,
  args: string[],
  env: V1EnvVar[],
): V1Container {
  return {
    name,
    image: kilnImage,
    imagePullPolicy: inputs.imagePullPolicy,
    command: ['/nodejs/bin/node', 'dist/steps/step-main.js'],
    args,
    workingDir: '/app',
    env: [{ name: 'KILN_STEP_OUT_DIR', value: OUT_DIR }, ...env],
    resources: inputs.resources,
    securityContext: STEP_SECURITY_CONTEXT,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [OUT_MOUNT],
  };
}

/** The SBOM or scan step: the tool in its own image, run by STEP_SCRIPT. */
function toolStep(
  inputs: StepInputs,
  name: 'sbom' | 'scan',
  label: string,
  which: Tool,
  image: string,
  tool: StepTool,
  extraEnv: V1EnvVar[],
): V1Container {
  return {
    name,
    image,
    imagePullPolicy: inputs.imagePullPolicy,
    command: [STEP_SHELLS[which].shell, '-c', STEP_SCRIPT, `kiln-${name}`],
    args: [...tool.argv],
    env: [
      { name: 'KILN_STEP_NAME', value: label },
      { name: 'KILN_STEP_OUTPUT', value: `${OUT_DIR}/${name}.json` },
      ...(tool.stdout ? [{ name: 'KILN_STEP_STDOUT', value: 'true' }] : []),
      ...(tool.okExit === undefined
        ? []
        : [{ name: 'KILN_STEP_OK_EXIT', value: String(tool.okExit) }]),
      { name: 'HOME', value: '/tmp' },
      { name: 'TMPDIR', value: '/tmp' },
      { name: 'XDG_CACHE_HOME', value: '/tmp/cache' },
      { name: 'DOCKER_CONFIG', value: STEP_DOCKER_CONFIG },
      ...Object.entries(tool.env ?? {}).map(([key, value]) => ({ name: key, value })),
      ...extraEnv,
    ],
    resources: inputs.resources,
    securityContext: STEP_SECURITY_CONTEXT,
    terminationMessagePolicy: 'FallbackToLogsOnError',
    volumeMounts: [
      OUT_MOUNT,
      { name: STEP_TMP_VOLUME, mountPath: '/tmp' },
      ...(inputs.credentialsSecretVolume === undefined
        ? []
        : [
            { name: inputs.credentialsSecretVolume, mountPath: STEP_DOCKER_CONFIG, readOnly: true },
          ]),
    ],
  };
}

/** The steps of a build whose builder pushes an image (see the module comment). */
export function stepsOf(inputs: StepInputs): StepsPlan {
  const { spec, settings } = inputs;
  if (inputs.ociLayout !== undefined) return s3Steps(inputs, inputs.ociLayout);
  if (inputs.packerManifest !== undefined) return packerSteps(inputs, inputs.packerManifest);
  const what = toolsNamed(spec);
  if (what === undefined) return { kind: 'none', notes: [] };
  const kilnImage = settings.kilnImage;
  if (kilnImage === undefined || settings.uploadUrl === undefined) {
    return {
      kind: 'none',
      notes: [
        `the ${what} steps are off: the operator has no ${kilnImage === undefined ? 'KILN_STEP_IMAGE' : 'KILN_UPLOAD_URL'}`,
      ],
    };
  }
  if (inputs.pushed === undefined) {
    return {
      kind: 'none',
      notes: [`the ${what} steps are skipped: this build pushes no image to describe or scan`],
    };
  }
  if (inputs.buildSecretName === undefined) {
    return { kind: 'none', notes: [`the ${what} steps are off: the build has no Secret`] };
  }
  const notes: string[] = [];
  const pushed = inputs.pushed;
  const insecure = inputs.insecureRegistries.length > 0;
  const initContainers: V1Container[] = [
    {
      ...kilnStep(
        inputs,
        kilnImage,
        STEP_CONTAINERS.imageRef,
        ['image-ref', pushed.format, posix.basename(pushed.file)],
        [{ name: 'KILN_TERMINATION_MESSAGE_PATH', value: TERMINATION_MESSAGE_PATH }],
      ),
      terminationMessagePath: TERMINATION_MESSAGE_PATH,
    },
  ];
  const secretKeys: string[] = [];
  const uploadEnv: V1EnvVar[] = [
    { name: 'KILN_UPLOAD_URL', value: settings.uploadUrl },
    { name: 'KILN_BUILD_ID', value: inputs.buildId },
  ];
  const tokenEnv = (kind: 'sbom' | 'scan'): V1EnvVar => {
    secretKeys.push(UPLOAD_TOKEN_KEYS[kind]);
    return {
      name: `KILN_UPLOAD_TOKEN_${kind.toUpperCase()}`,
      valueFrom: { secretKeyRef: { name: inputs.buildSecretName, key: UPLOAD_TOKEN_KEYS[kind] } },
    };
  };
  const missingImage = (tool: Tool, kind: string): string =>
    `the ${kind} step is skipped: no ${tool} image is configured (KILN_STEP_IMAGE_${tool.toUpperCase()}, pinned by digest)`;
  if (spec.sbomTool !== null) {
    const image = settings.sbomImages[spec.sbomTool];
    if (image === undefined) {
      notes.push(missingImage(spec.sbomTool, 'SBOM'));
    } else {
      initContainers.push(
        toolStep(
          inputs,
          'sbom',
          'SBOM',
          spec.sbomTool,
          image,
          sbomTool(spec.sbomTool, insecure, `${OUT_DIR}/sbom.json`),
          [],
        ),
      );
      uploadEnv.push(tokenEnv('sbom'));
    }
  }
  if (spec.scanTool !== null) {
    const tool = scanTool(spec.scanTool, insecure, settings, `${OUT_DIR}/scan.json`);
    const image = settings.scanImages[spec.scanTool];
    if ('skip' in tool) {
      notes.push(tool.skip);
    } else if (image === undefined) {
      notes.push(missingImage(spec.scanTool, 'scan'));
    } else {
      const snyk =
        spec.scanTool === 'snyk' && settings.snykToken !== undefined
          ? [
              {
                name: 'SNYK_TOKEN',
                valueFrom: {
                  secretKeyRef: { name: settings.snykToken.secret, key: settings.snykToken.key },
                },
              },
            ]
          : [];
      initContainers.push(toolStep(inputs, 'scan', 'scan', spec.scanTool, image, tool, snyk));
      uploadEnv.push(tokenEnv('scan'));
    }
  }
  if (initContainers.length === 1) return { kind: 'none', notes };
  return {
    kind: 'steps',
    initContainers,
    containers: [kilnStep(inputs, kilnImage, STEP_CONTAINERS.upload, ['upload'], uploadEnv)],
    secretKeys,
    notes,
  };
}

/**
 * The step of a registry_type s3 build: `s3-upload` (kiln's image) as the pod's one container,
 * after the builder. It reads the layout the builder wrote, uploads it with the tenant's settings
 * (plain env) and keys (the build's Secret, through secretKeyRef; none: the pod's own identity),
 * and writes the digest and `s3://` address to its termination message for the operator. Needs
 * kiln's image: without it the image could not leave the pod, so the build cannot run.
 */
function s3Steps(inputs: StepInputs, layout: OciLayoutOutput): StepsPlan {
  const { s3, settings } = inputs;
  if (s3 === undefined) {
    return {
      kind: 'unsupported',
      reason: 'the image is written for S3, but the build has no S3 target',
    };
  }
  if (settings.kilnImage === undefined) {
    return {
      kind: 'unsupported',
      reason:
        'registry_type s3 needs kiln’s step image to upload the image: the operator has no KILN_STEP_IMAGE',
    };
  }
  const secret = inputs.buildSecretName;
  if (s3.credentials && secret === undefined) {
    return { kind: 'unsupported', reason: 'the S3 keys have no build Secret to come from' };
  }
  const fromSecret = (name: string, key: string): V1EnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: secret, key } },
  });
  const optional = (name: string, value: string | undefined): V1EnvVar[] =>
    value === undefined ? [] : [{ name, value }];
  const env: V1EnvVar[] = [
    { name: 'KILN_S3_BUCKET', value: s3.bucket },
    ...optional('KILN_S3_PREFIX', s3.prefix),
    { name: 'KILN_S3_REGION', value: s3.region },
    ...optional('KILN_S3_ENDPOINT', s3.endpoint),
    ...optional('KILN_S3_FORCE_PATH_STYLE', s3.forcePathStyle === true ? 'true' : undefined),
    { name: 'KILN_PROJECT_ID', value: inputs.projectId },
    { name: 'KILN_BUILD_NUMBER', value: String(inputs.buildNumber) },
    { name: 'KILN_TERMINATION_MESSAGE_PATH', value: TERMINATION_MESSAGE_PATH },
    // The SDK looks for ~/.aws files; the root filesystem is read-only, /tmp is an emptyDir.
    { name: 'HOME', value: '/tmp' },
    { name: 'TMPDIR', value: '/tmp' },
    ...(s3.credentials
      ? [
          fromSecret('AWS_ACCESS_KEY_ID', S3_CREDENTIAL_KEYS.accessKeyId),
          fromSecret('AWS_SECRET_ACCESS_KEY', S3_CREDENTIAL_KEYS.secretAccessKey),
        ]
      : []),
  ];
  const step = kilnStep(
    inputs,
    settings.kilnImage,
    STEP_CONTAINERS.s3Upload,
    ['s3-upload', layout.format, posix.basename(layout.path)],
    env,
  );
  const where = `s3://${s3.bucket}/${s3.prefix === undefined ? '' : `${s3.prefix.replace(/\/+$/, '')}/`}`;
  const notes = [
    `registry_type s3: the image is written as an OCI image layout and uploaded to ${where} by the s3-upload step, not pushed to a registry`,
  ];
  const what = toolsNamed(inputs.spec);
  if (what !== undefined) {
    notes.push(
      `the ${what} steps do not run for registry_type s3: they read the image from a registry, and this one goes to S3`,
    );
  }
  return {
    kind: 'steps',
    initContainers: [],
    containers: [
      {
        ...step,
        terminationMessagePath: TERMINATION_MESSAGE_PATH,
        volumeMounts: [...(step.volumeMounts ?? []), { name: STEP_TMP_VOLUME, mountPath: '/tmp' }],
      },
    ],
    secretKeys: s3.credentials
      ? [S3_CREDENTIAL_KEYS.accessKeyId, S3_CREDENTIAL_KEYS.secretAccessKey]
      : [],
    notes,
  };
}

/**
 * The step of a packer build: `packer-manifest` (kiln's image) as the pod's one container, after
 * packer. It reads the template and the manifest through read-only mounts and writes what the
 * manifest lists to its termination message for the operator (src/steps/run-step.ts). It never
 * fails the build; without kiln's image it does not run and the build's provenance names no
 * artifacts. The SBOM and scan steps read a pushed image, which a packer build has not.
 */
function packerSteps(inputs: StepInputs, manifest: PackerManifestInput): StepsPlan {
  const what = toolsNamed(inputs.spec);
  const notes =
    what === undefined
      ? []
      : [`the ${what} steps are skipped: this build pushes no image to describe or scan`];
  const kilnImage = inputs.settings.kilnImage;
  if (kilnImage === undefined) {
    return {
      kind: 'none',
      notes: [
        ...notes,
        "packer's manifest is not read: the operator has no KILN_STEP_IMAGE, so provenance names no artifacts",
      ],
    };
  }
  const step = kilnStep(
    inputs,
    kilnImage,
    STEP_CONTAINERS.packerManifest,
    ['packer-manifest', manifest.template, manifest.workingDir],
    [{ name: 'KILN_TERMINATION_MESSAGE_PATH', value: TERMINATION_MESSAGE_PATH }],
  );
  return {
    kind: 'steps',
    initContainers: [],
    containers: [
      {
        ...step,
        terminationMessagePath: TERMINATION_MESSAGE_PATH,
        volumeMounts: manifest.mounts.map((mount) => ({ ...mount })),
      },
    ],
    secretKeys: [],
    notes,
  };
}
