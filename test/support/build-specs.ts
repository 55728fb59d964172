import type { BuildSpec } from '../../src/build-methods/build-spec.js';

/** A reference-form spec (the repository's Dockerfile) for tests that create builds directly. */
export function referenceSpec(overrides: Partial<BuildSpec> = {}): BuildSpec {
  return {
    version: 1,
    form: 'reference',
    method: 'kaniko',
    config: {},
    source: { repository: null, branch: null, commit: null, context: '.' },
    output: { repository: null, tags: [], registryType: null },
    sbomTool: null,
    scanTool: null,
    secretManager: null,
    env: {},
    buildArgs: {},
    timeoutSeconds: 3600,
    ...overrides,
  };
}
