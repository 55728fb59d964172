import type { BuildSpec } from '../manifest/build-spec.js';
import { kanikoJob, POD_SECURITY_LEVEL as KANIKO_POD_SECURITY_LEVEL } from './kaniko.js';
import {
  type BuildMethod,
  type DockerfilePlan,
  dockerfilePlan,
  NO_EXCLUSIVE_FIELDS,
} from './method.js';
import { MANIFEST_MESSAGES } from '../manifest/types.js';

/** The generated Containerfile; the environment becomes ARG lines, so only build args are passed. */
const plan = (spec: BuildSpec): DockerfilePlan =>
  dockerfilePlan(
    spec,
    containerfileFor(spec.config.base_image ?? '', spec.config.instructions ?? [], spec.env),
    spec.buildArgs,
  );

/**
 * The `container` method: a Containerfile generated from the manifest's base image and
 * instructions. The wizard's rules ask every non-kaniko method for both, but its manifest has it
 * send `base_image: ""` for paketo and packer: only this method, which builds from them,
 * requires them.
 */
export const container: BuildMethod = {
  name: 'container',
  // kaniko builds it: kaniko's level.
  podSecurityLevel: KANIKO_POD_SECURITY_LEVEL,
  logFormat: 'kaniko',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    if (draft.baseImage === '')
      details['manifest.base_image'] ??= MANIFEST_MESSAGES.baseImageRequired;
    if (draft.instructions.length === 0) {
      details['manifest.instructions'] ??= MANIFEST_MESSAGES.instructionsRequired;
    }
  },
  localPlan: plan,
  /** On Kubernetes kaniko builds the generated Containerfile, from the build's ConfigMap. */
  jobSpec: (spec, context) => kanikoJob(spec, context, plan(spec)),
};

/**
 * One Dockerfile instruction per element. Build-time environment entries become ARG lines with
 * defaults, so RUN steps see them without baking them into the image.
 */
export function containerfileFor(
  baseImage: string,
  instructions: readonly string[],
  environment: Readonly<Record<string, string>> = {},
): string {
  const args = Object.entries(environment).map(
    ([name, value]) => `ARG ${name}=${JSON.stringify(value)}`,
  );
  return [`FROM ${baseImage}`, ...args, ...instructions].join('\n') + '\n';
}
