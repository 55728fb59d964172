import { type BuildSpec, type SpecContext, specOfManifest } from '../../src/manifest/build-spec.js';
import { validateManifest } from '../../src/build-methods/manifest.js';
import type { MethodName } from '../../src/manifest/types.js';

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

/**
 * The spec kiln stores for a wizard manifest, through the same validation the API runs: a minimal
 * valid manifest of `type` (tag v1, environment CI=true, the tool choices filled in), with
 * `buildConfig` merged into its build_config and `extra` over its top-level fields.
 */
export function manifestSpec(
  context: SpecContext,
  type: MethodName,
  buildConfig: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): BuildSpec {
  const result = validateManifest(
    {
      name: 'app',
      type,
      base_image: '',
      instructions: [],
      environment: { CI: 'true' },
      tags: ['v1'],
      build_config: {
        sbom_tool: 'syft',
        scan_tool: 'trivy',
        registry_type: 'harbor',
        secret_manager_type: 'vault',
        build_type: type,
        ...buildConfig,
      },
      ...extra,
    },
    { defaultRegistry: context.project.defaultRegistry ?? context.defaultRegistry },
  );
  if (!result.ok) throw new Error(`manifest refused: ${JSON.stringify(result.details)}`);
  return specOfManifest(result.manifest, context);
}
