import { notYetOnKubernetes } from './job.js';
import { type BuildMethod, NO_EXCLUSIVE_FIELDS } from './method.js';
import { MANIFEST_MESSAGES } from './types.js';

const PAKETO_BIONIC_BUILDER = /^(.+)\/builder:(base|full|tiny)$/;

/**
 * Paketo (Cloud Native Buildpacks): a builder image, optional buildpacks and platform env. The
 * builder is stored as chosen; `paketoBuilderImage` maps the deprecated names when it runs.
 */
export const paketo: BuildMethod = {
  name: 'paketo',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    const builder = draft.config.paketo_config?.builder;
    if (builder === undefined || builder === '') {
      details['manifest.build_config.paketo_config.builder'] ??=
        MANIFEST_MESSAGES.paketoBuilderRequired;
    }
  },
  localPlan(spec) {
    const config = spec.config.paketo_config ?? {};
    const requested = config.builder ?? '';
    return {
      kind: 'pack',
      builder: paketoBuilderImage(requested).image,
      requestedBuilder: requested,
      buildpacks: config.buildpacks ?? [],
      env: { ...spec.env, ...(config.env ?? {}), ...(config.build_args ?? {}) },
    };
  },
  jobSpec: () => notYetOnKubernetes('paketo'),
};

/**
 * The builder image a paketo build runs. The wizard offers the deprecated bionic builders
 * `<ns>/builder:base|full|tiny`; they map to the maintained `<ns>/builder-jammy-<tag>:latest`
 * (`mapped: true`, so the caller can say so in the build log). Anything else is used as given.
 */
export function paketoBuilderImage(builder: string): { image: string; mapped: boolean } {
  const match = PAKETO_BIONIC_BUILDER.exec(builder);
  if (match === null) return { image: builder, mapped: false };
  const [, namespace, tag] = match;
  return { image: `${namespace}/builder-jammy-${tag}:latest`, mapped: true };
}
