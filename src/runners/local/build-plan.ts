import { containerfileFor } from '../../build-methods/container.js';
import type { BuildManifest, BuildMethod } from '../../build-methods/manifest.js';
import type { BuildConfigSnapshot } from '../../lifecycle/build.entity.js';

/** What the local runner does for one build, decided from its snapshot alone (pure). */
export type BuildPlan =
  | {
      readonly kind: 'dockerfile';
      readonly method: BuildMethod | 'repository';
      /** Inline Dockerfile content, or undefined to use the repository's own Dockerfile. */
      readonly dockerfile: string | undefined;
      /** Path of the Dockerfile in the repository when not inline. */
      readonly dockerfilePath: string;
      /** Build context relative to the checkout (or an empty directory without a repository). */
      readonly context: string;
      readonly buildArgs: Readonly<Record<string, string>>;
      readonly target: string | undefined;
      readonly platforms: readonly string[];
      /** Tags as given: full references (`registry/repo:tag`) or bare tags. */
      readonly tags: readonly string[];
      readonly registryRepository: string | undefined;
      readonly needsRepository: boolean;
    }
  | { readonly kind: 'unsupported'; readonly method: BuildMethod; readonly tool: string };

export function planBuild(config: BuildConfigSnapshot): BuildPlan {
  if (config.form === 'reference') {
    return {
      kind: 'dockerfile',
      method: 'repository',
      dockerfile: undefined,
      dockerfilePath: 'Dockerfile',
      context: '.',
      buildArgs: config.build_args ?? {},
      target: undefined,
      platforms: [],
      tags: [],
      registryRepository: undefined,
      needsRepository: true,
    };
  }
  const manifest = config.manifest as unknown as BuildManifest;
  const build = manifest.build_config;
  switch (manifest.type) {
    case 'paketo':
      return { kind: 'unsupported', method: 'paketo', tool: 'pack' };
    case 'packer':
      return { kind: 'unsupported', method: 'packer', tool: 'packer' };
    case 'container':
    case 'kaniko':
    case 'buildx': {
      const inline =
        manifest.type === 'container'
          ? containerfileFor(manifest.base_image, manifest.instructions, manifest.environment)
          : build.dockerfile;
      return {
        kind: 'dockerfile',
        method: manifest.type,
        dockerfile: inline,
        dockerfilePath: 'Dockerfile',
        context: build.build_context === '' ? '.' : build.build_context,
        buildArgs: {
          ...(manifest.type === 'container' ? {} : manifest.environment),
          ...(build.build_args ?? {}),
        },
        target: build.target,
        platforms: build.platforms ?? [],
        tags: manifest.tags,
        registryRepository: build.registry_repository,
        needsRepository: false,
      };
    }
  }
}

/**
 * Where each tag is pushed: a full reference as given; a bare tag under the manifest's registry
 * repository, else under KILN_LOCAL_REGISTRY/<project>. Undefined entries are kept locally only.
 */
export function pushTargets(
  tags: readonly string[],
  registryRepository: string | undefined,
  localRegistry: string | undefined,
  projectName: string,
  buildNumber: number,
): string[] {
  const repository =
    registryRepository ??
    (localRegistry === undefined ? undefined : `${localRegistry}/${slug(projectName)}`);
  const wanted = tags.length === 0 ? [String(buildNumber)] : tags;
  const targets: string[] = [];
  for (const tag of wanted) {
    if (isFullReference(tag)) targets.push(tag);
    else if (repository !== undefined) targets.push(`${repository}:${tag}`);
  }
  return targets;
}

function isFullReference(tag: string): boolean {
  const lastSegment = tag.slice(tag.lastIndexOf('/') + 1);
  return tag.includes('/') && lastSegment.includes(':');
}

function slug(name: string): string {
  return (
    name
      .toLowerCase()
      .replace(/[^a-z0-9._-]+/g, '-')
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '') || 'project'
  );
}
