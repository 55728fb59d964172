import { blank, type BuildMethod, dockerfilePlan, NO_EXCLUSIVE_FIELDS } from './method.js';
import { MANIFEST_MESSAGES } from './types.js';

const at = (key: string): string => `manifest.build_config.${key}`;

/**
 * kaniko: an inline Dockerfile pushed to a registry repository. A reference-form build (no inline
 * Dockerfile) is a kaniko build of the repository's own Dockerfile.
 */
export const kaniko: BuildMethod = {
  name: 'kaniko',
  ...NO_EXCLUSIVE_FIELDS,
  check(draft, details) {
    if (blank(draft.config.dockerfile)) {
      details[at('dockerfile')] ??= MANIFEST_MESSAGES.kanikoDockerfileRequired;
    }
    if (draft.contextGiven === '')
      details[at('build_context')] = MANIFEST_MESSAGES.kanikoContextRequired;
    if (draft.config.registry_repository === undefined && !draft.repositoryFromElsewhere) {
      details[at('registry_repository')] ??= MANIFEST_MESSAGES.kanikoRegistryRepositoryRequired;
    }
  },
  localPlan: (spec) =>
    dockerfilePlan(spec, spec.config.dockerfile, { ...spec.env, ...spec.buildArgs }),
};
