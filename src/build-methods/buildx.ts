import { nonEmpty, optionalString, stringArray, stringMap } from './fields.js';
import { notYetOnKubernetes } from './job.js';
import { blank, type BuildMethod, dockerfilePlan } from './method.js';
import { MANIFEST_MESSAGES } from './types.js';

const PLATFORM_PATTERN = /^[a-z0-9]+\/[a-z0-9_]+(?:\/[a-z0-9]+)?$/;

/** buildx (BuildKit): an inline Dockerfile, with platforms, registry cache and secret mounts. */
export const buildx: BuildMethod = {
  name: 'buildx',
  exclusiveFields: ['platforms', 'cache_to', 'cache_from', 'secrets'],
  readExclusiveFields(config, path, details) {
    const platforms = stringArray(config.platforms, `${path}.platforms`, details);
    platforms?.forEach((platform, index) => {
      if (!PLATFORM_PATTERN.test(platform)) {
        details[`${path}.platforms.${index}`] =
          `"${platform}" must look like os/arch[/variant], for example linux/amd64 or linux/arm64/v8`;
      }
    });
    return {
      platforms,
      cache_to: nonEmpty(optionalString(config.cache_to, `${path}.cache_to`, details)?.trim()),
      cache_from: stringArray(config.cache_from, `${path}.cache_from`, details),
      secrets: stringMap(config.secrets, `${path}.secrets`, details),
    };
  },
  check(draft, details) {
    if (blank(draft.config.dockerfile)) {
      details['manifest.build_config.dockerfile'] ??= MANIFEST_MESSAGES.buildxDockerfileRequired;
    }
  },
  localPlan: (spec) =>
    dockerfilePlan(spec, spec.config.dockerfile, { ...spec.env, ...spec.buildArgs }),
  jobSpec: () => notYetOnKubernetes('buildx'),
};
