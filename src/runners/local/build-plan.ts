import type { LocalPlan } from '../../build-methods/method.js';

/** The CLI a plan runs besides buildah, if any. */
export function toolOf(plan: LocalPlan): 'pack' | 'packer' | undefined {
  return plan.kind === 'dockerfile' ? undefined : plan.kind;
}

/** `pack build` arguments (pure); `image` is where the result goes, `publish` pushes it there. */
export function packArgs(
  plan: Extract<LocalPlan, { kind: 'pack' }>,
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
  plan: Extract<LocalPlan, { kind: 'packer' }>,
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
