import { containerfileFor } from '../../build-methods/container.js';
import {
  type BuildManifest,
  type BuildMethod,
  outputRepository,
  paketoBuilderImage,
  repositoryOfReference,
} from '../../build-methods/manifest.js';
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
  | {
      readonly kind: 'pack';
      /** The builder image to run, after mapping the wizard's deprecated names. */
      readonly builder: string;
      readonly requestedBuilder: string;
      readonly buildpacks: readonly string[];
      readonly env: Readonly<Record<string, string>>;
      readonly context: string;
      readonly tags: readonly string[];
      readonly registryRepository: string | undefined;
    }
  | {
      readonly kind: 'packer';
      readonly template: string;
      /** JSON templates go to template.json, HCL2 to template.pkr.hcl (packer picks by name). */
      readonly templateFile: 'template.json' | 'template.pkr.hcl';
      readonly variables: Readonly<Record<string, string>>;
      /** The build's declared environment and build args: packer reads its environment. */
      readonly env: Readonly<Record<string, string>>;
    };

/** The CLI a plan runs besides buildah, if any. */
export function toolOf(plan: BuildPlan): 'pack' | 'packer' | undefined {
  return plan.kind === 'dockerfile' ? undefined : plan.kind;
}

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
    case 'paketo': {
      const paketo = build.paketo_config ?? {};
      const requested = paketo.builder ?? '';
      return {
        kind: 'pack',
        builder: paketoBuilderImage(requested).image,
        requestedBuilder: requested,
        buildpacks: paketo.buildpacks ?? [],
        env: { ...manifest.environment, ...(paketo.env ?? {}), ...(paketo.build_args ?? {}) },
        context: build.build_context === '' ? '.' : build.build_context,
        tags: manifest.tags,
        registryRepository: build.registry_repository,
      };
    }
    case 'packer': {
      const template = build.packer_template ?? '';
      const variables = Object.fromEntries(
        Object.entries(build.variables ?? {}).map(([name, value]) => [
          name,
          typeof value === 'string' ? value : JSON.stringify(value),
        ]),
      );
      return {
        kind: 'packer',
        template,
        templateFile: isJsonObject(template) ? 'template.json' : 'template.pkr.hcl',
        variables,
        env: { ...manifest.environment, ...(build.build_args ?? {}) },
      };
    }
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

function isJsonObject(text: string): boolean {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed);
  } catch {
    return false;
  }
}

/** `pack build` arguments (pure); `image` is where the result goes, `publish` pushes it there. */
export function packArgs(
  plan: Extract<BuildPlan, { kind: 'pack' }>,
  image: string,
  path: string,
  publish: boolean,
): string[] {
  return [
    'build',
    image,
    '--builder',
    plan.builder,
    '--path',
    path,
    ...plan.buildpacks.flatMap((buildpack) => ['--buildpack', buildpack]),
    ...Object.entries(plan.env).flatMap(([name, value]) => ['--env', `${name}=${value}`]),
    ...(publish ? ['--publish'] : []),
  ];
}

/** `packer <command>` arguments for a template in the working directory (pure). */
export function packerArgs(
  command: 'init' | 'validate' | 'build',
  plan: Extract<BuildPlan, { kind: 'packer' }>,
): string[] {
  const vars = Object.entries(plan.variables).flatMap(([name, value]) => [
    '-var',
    `${name}=${value}`,
  ]);
  switch (command) {
    case 'init':
      return ['init', plan.templateFile];
    case 'validate':
      return ['validate', ...vars, plan.templateFile];
    case 'build':
      return ['build', '-color=false', ...vars, plan.templateFile];
  }
}

/**
 * Where each tag is pushed: a full reference as given; a bare tag under the build's output
 * repository (`outputRepository`: the manifest's, a full tag's, or the default registry's). With no
 * repository, bare tags are not pushed and the image stays on this machine.
 */
export function pushTargets(
  tags: readonly string[],
  registryRepository: string | undefined,
  defaultRegistry: string | undefined,
  projectName: string,
  buildNumber: number,
): string[] {
  const repository = outputRepository(registryRepository, tags, defaultRegistry, projectName);
  const wanted = tags.length === 0 ? [String(buildNumber)] : tags;
  const targets: string[] = [];
  for (const tag of wanted) {
    if (repositoryOfReference(tag) !== undefined) targets.push(tag);
    else if (repository !== undefined) targets.push(`${repository}:${tag}`);
  }
  return targets;
}
