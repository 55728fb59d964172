import type { BuildSpec } from '../manifest/build-spec.js';
import { buildx } from './buildx.js';
import { container } from './container.js';
import { kaniko } from './kaniko.js';
import type { BuildMethod, LocalPlan } from './method.js';
import { packer } from './packer.js';
import { paketo } from './paketo.js';
import type { BuildConfig, MethodName } from '../manifest/types.js';

/** The one table keyed by method: nothing else in kiln switches on a method name. */
export const BUILD_METHODS: Readonly<Record<MethodName, BuildMethod>> = {
  kaniko,
  buildx,
  container,
  paketo,
  packer,
};

/** What the local runner does for a build (pure). */
export function localPlanOf(spec: BuildSpec): LocalPlan {
  return BUILD_METHODS[spec.method].localPlan(spec);
}

/** The method that owns an exclusive build_config field, if any. */
export function exclusiveOwner(field: keyof BuildConfig): MethodName | undefined {
  return Object.values(BUILD_METHODS).find((method) => method.exclusiveFields.includes(field))
    ?.name;
}
