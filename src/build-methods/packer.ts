import type { V1Container, V1EnvVar, V1SecurityContext } from '@kubernetes/client-node';

import { isSecretReference } from '../manifest/secret-reference.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import { PACKER_IMAGE } from './images.js';
import {
  BUILD_SECRET_ENV_REF,
  BUILDER_CONTAINER,
  ENV_SECRET_PREFIX,
  FILES_DIR,
  type JobContext,
  jobOf,
  type JobTranslation,
  MAX_FILES_BYTES,
  type PodSecurityLevel,
  type ScratchVolume,
  SOURCE_DIR,
  unsupported,
} from './job.js';
import { blank, type BuildMethod, type LocalPlan, NO_EXCLUSIVE_FIELDS } from './method.js';
import {
  builderEntry,
  entryProblems,
  HCL_TEMPLATE_FILE,
  isJsonTemplate,
  JSON_TEMPLATE_FILE,
  readHclTemplate,
  readJsonTemplate,
  type TemplateEntries,
  type TemplateRead,
} from './packer-template.js';
import { type Details, MANIFEST_MESSAGES } from '../manifest/types.js';

const at = (key: string): string => `manifest.build_config.${key}`;

type PackerPlan = Extract<LocalPlan, { kind: 'packer' }>;

/**
 * The Pod Security level a packer build pod meets. Cloud builders (amazon-ebs, azure-arm,
 * googlecompute, vsphere-iso, …) need only the network and credentials, so packer runs non-root,
 * without capabilities, privilege escalation or a writable root filesystem.
 * The `docker` builder needs a Docker daemon and `qemu` needs /dev/kvm: privileged profiles kiln
 * does not offer. A build whose template is known to use them is refused as unsupported (see
 * `packerJob`); one where kiln cannot tell (an HCL2 template with no `builders` given) fails in
 * packer, which names the program or device it cannot find.
 */
export const POD_SECURITY_LEVEL: PodSecurityLevel = 'restricted';

/**
 * Packer: a template (legacy JSON or HCL2) with variables. `builders`, `provisioners` and
 * `post_processors` are kept as sent and checked against the template (packer-template.ts): a JSON
 * template in `check`, an HCL2 template in `checkAsync` (its parser is asynchronous).
 */
export const packer: BuildMethod = {
  name: 'packer',
  podSecurityLevel: POD_SECURITY_LEVEL,
  logFormat: 'packer',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    const template = draft.config.packer_template;
    if (template === undefined || blank(template)) {
      details[at('packer_template')] ??= MANIFEST_MESSAGES.packerTemplateRequired;
    } else if (isJsonTemplate(template)) {
      reportTemplate(readJsonTemplate(template), draft.config, details);
    }
  },
  async checkAsync(draft, details) {
    const template = draft.config.packer_template;
    if (template === undefined || blank(template) || isJsonTemplate(template)) return;
    reportTemplate(await readHclTemplate(template), draft.config, details);
  },
  localPlan: plan,
  jobSpec: packerJob,
};

function plan(spec: BuildSpec): PackerPlan {
  const template = spec.config.packer_template ?? '';
  const variables = Object.fromEntries(
    Object.entries(spec.config.variables ?? {}).map(([name, value]) => [
      name,
      typeof value === 'string' ? value : JSON.stringify(value),
    ]),
  );
  return {
    kind: 'packer',
    template,
    templateFile: isJsonTemplate(template) ? JSON_TEMPLATE_FILE : HCL_TEMPLATE_FILE,
    variables,
    env: { ...spec.env, ...spec.buildArgs },
  };
}

function reportTemplate(read: TemplateRead, config: TemplateEntries, details: Details): void {
  if (!read.ok) {
    details[at('packer_template')] ??= read.problem;
    return;
  }
  for (const [path, problem] of Object.entries(entryProblems(read.declarations, config))) {
    details[path] ??= problem;
  }
}

/** Builders that need privileges the restricted pod does not have, and what each needs. */
const PRIVILEGED_BUILDERS: ReadonlyMap<string, string> = new Map([
  ['docker', 'a Docker daemon'],
  ['qemu', '/dev/kvm'],
]);

/** The image a packer build runs; images.ts pins it with the Job's other images. */
export { PACKER_IMAGE };

/** Non-root, nothing to escalate to, every capability dropped, read-only root: PSS restricted. */
export const PACKER_SECURITY_CONTEXT: V1SecurityContext = {
  runAsUser: 65532,
  runAsGroup: 65532,
  runAsNonRoot: true,
  privileged: false,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** The writable emptyDirs packer needs on a read-only root filesystem. */
const PACKER_VOLUMES = {
  home: { name: 'packer-home', mountPath: '/kiln/packer/home' },
  plugins: { name: 'packer-plugins', mountPath: '/kiln/packer/plugins' },
  tmp: { name: 'packer-tmp', mountPath: '/tmp' },
} as const satisfies Record<string, ScratchVolume>;

/**
 * packer's own settings. The build's variables may not replace them: a build could otherwise
 * move packer's plugins or config onto the read-only root filesystem.
 */
const PACKER_ENV: readonly V1EnvVar[] = [
  { name: 'HOME', value: PACKER_VOLUMES.home.mountPath },
  { name: 'PACKER_CONFIG_DIR', value: PACKER_VOLUMES.home.mountPath },
  { name: 'PACKER_CACHE_DIR', value: `${PACKER_VOLUMES.home.mountPath}/cache` },
  // `packer init` installs here and `validate`/`build` load from here: the emptyDir is shared.
  { name: 'PACKER_PLUGIN_PATH', value: PACKER_VOLUMES.plugins.mountPath },
  { name: 'TMPDIR', value: PACKER_VOLUMES.tmp.mountPath },
  // No calls to HashiCorp's checkpoint service (go-checkpoint), no colour codes in the log.
  { name: 'CHECKPOINT_DISABLE', value: '1' },
  { name: 'PACKER_NO_COLOR', value: '1' },
];

/**
 * Where jobOf would mount the operator's registry credentials: packer pushes no image, so that
 * mount and its volume are removed (see `packerJob`).
 */
const UNUSED_DOCKER_CONFIG = '/kiln/packer/docker';

export const PACKER_NOTES = {
  noImage:
    'packer builds machine images (AMIs and the like), not a container image: nothing is pushed to a registry, and no image is there for the SBOM and scan steps',
  jsonInit:
    'packer init is skipped: it installs plugins for HCL2 templates only, and a legacy JSON template uses the builders packer ships with',
} as const;

/**
 * The Job of a packer build: the template from the build's ConfigMap (mounted at the checkout's
 * root when there is one, as the local runner writes it there); `packer init` (HCL2 only)
 * and `packer validate` as init containers after `source`, then `packer build` as the builder,
 * all in the same image with the same mounts, resources and security context. No shell: each
 * variable is one argv element after `-var`. Packer reads the build's environment and build args
 * from its own environment (as under the local runner); kiln's own settings win over them.
 * After packer, the packer-manifest step (steps.ts) reads what the template's manifest
 * post-processor wrote, for the build's provenance.
 */
export function packerJob(spec: BuildSpec, context: JobContext): JobTranslation {
  const packerPlan = plan(spec);
  const bytes = Buffer.byteLength(packerPlan.template, 'utf8');
  if (bytes > MAX_FILES_BYTES) {
    return unsupported(
      `the packer template is ${bytes} bytes; a build on Kubernetes takes at most ${MAX_FILES_BYTES}`,
    );
  }
  const privileged = privilegedBuilder(spec, packerPlan);
  if (privileged !== undefined) {
    return unsupported(
      `the packer builder "${privileged}" needs ${PRIVILEGED_BUILDERS.get(privileged)}, which a build pod (Pod Security "${POD_SECURITY_LEVEL}") does not have; use a cloud builder, or the local runner`,
    );
  }

  const notes: string[] = [PACKER_NOTES.noImage];
  const hcl2 = packerPlan.templateFile === HCL_TEMPLATE_FILE;
  if (!hcl2) notes.push(PACKER_NOTES.jsonInit);
  const fixed = new Set(PACKER_ENV.map((variable) => variable.name));
  const shadowed = Object.keys(packerPlan.env).filter((name) => fixed.has(name));
  if (shadowed.length > 0) {
    notes.push(`kiln sets ${shadowed.join(', ')} for packer; the build's value is not used`);
  }
  const env: V1EnvVar[] = [
    ...Object.entries(packerPlan.env)
      .filter(([name]) => !fixed.has(name))
      .map(([name, value]): V1EnvVar =>
        // A reference is resolved when the build starts, into the build's own Secret.
        isSecretReference(value)
          ? {
              name,
              valueFrom: {
                secretKeyRef: { name: BUILD_SECRET_ENV_REF, key: `${ENV_SECRET_PREFIX}${name}` },
              },
            }
          : { name, value },
      ),
    ...PACKER_ENV,
  ];

  // With a checkout, the template sits at its root, where the local runner writes it: relative
  // paths and HCL2's path.root resolve against the repository alike under both runners.
  const inCheckout = spec.source.repository !== null;
  const template = `${inCheckout ? SOURCE_DIR : FILES_DIR}/${packerPlan.templateFile}`;
  const vars = Object.entries(packerPlan.variables).flatMap(([name, value]) => [
    '-var',
    `${name}=${value}`,
  ]);
  const workingDir = inCheckout ? SOURCE_DIR : PACKER_VOLUMES.home.mountPath;
  const translation = jobOf(spec, context, {
    builder: {
      image: PACKER_IMAGE,
      command: ['/bin/packer'],
      // -timestamp-ui stays off (its default): the log follower asks the kubelet for timestamps.
      args: ['build', '-color=false', '-on-error=cleanup', ...vars, template],
      env,
      securityContext: PACKER_SECURITY_CONTEXT,
      dockerConfigDir: UNUSED_DOCKER_CONFIG,
    },
    files: { [packerPlan.templateFile]: packerPlan.template },
    fileMounts: inCheckout ? [{ key: packerPlan.templateFile, mountPath: template }] : [],
    notes,
    scratchVolumes: Object.values(PACKER_VOLUMES),
    // The step reads the template from the ConfigMap: in the checkout it is a subPath mount.
    packerManifest: { template: `${FILES_DIR}/${packerPlan.templateFile}`, workingDir },
  });
  if (translation.kind !== 'job') return translation;

  // jobOf builds one builder container (an init container when the packer-manifest step follows
  // it); packer's init and validate steps are copies of it, run before it.
  const pod = translation.job.spec?.template.spec;
  const initContainers = pod?.initContainers ?? [];
  const builder = [...initContainers, ...(pod?.containers ?? [])].find(
    (container) => container.name === BUILDER_CONTAINER,
  );
  if (pod === undefined || builder === undefined) return translation;
  const credentials = builder.volumeMounts?.find(
    (mount) => mount.mountPath === UNUSED_DOCKER_CONFIG,
  );
  if (credentials !== undefined) {
    builder.volumeMounts = builder.volumeMounts?.filter((mount) => mount !== credentials);
    pod.volumes = pod.volumes?.filter((volume) => volume.name !== credentials.name);
  }
  builder.workingDir = workingDir;

  const step = (name: string, args: string[]): V1Container => ({
    ...structuredClone(builder),
    name,
    args,
  });
  const steps = [
    ...(hcl2 ? [step('packer-init', ['init', template])] : []),
    step('packer-validate', ['validate', ...vars, template]),
  ];
  const at = initContainers.indexOf(builder);
  pod.initContainers =
    at === -1
      ? [...initContainers, ...steps]
      : [...initContainers.slice(0, at), ...steps, ...initContainers.slice(at)];
  return translation;
}

/**
 * A builder kiln knows needs privileges: from a JSON template's own builders, or else from the
 * manifest's `builders` (checked against the template when the build was created).
 */
function privilegedBuilder(spec: BuildSpec, packerPlan: PackerPlan): string | undefined {
  const read = isJsonTemplate(packerPlan.template)
    ? readJsonTemplate(packerPlan.template)
    : undefined;
  const types =
    read?.ok === true
      ? read.declarations.builders.map((builder) => builder.type)
      : (spec.config.builders ?? []).flatMap((entry) => builderEntry(entry)?.type ?? []);
  return types.find((type) => PRIVILEGED_BUILDERS.has(type));
}
