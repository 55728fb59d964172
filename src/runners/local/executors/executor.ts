import { resolve, sep } from 'node:path';
import type { LocalPlan } from '../../../build-methods/method.js';
import type { PackerArtifacts, PushedImages } from '../../../manifest/formats.js';
import { BuildFailure } from '../build-failure.js';
import type { BuildRun } from '../build-run.js';

/**
 * What a plan pushed: the image by digest (`name@sha256:…`) for the SBOM and scan steps, with
 * every reference pushed (recorded with the build's outcome); or why there is none, with what a
 * packer build made instead when its manifest says.
 */
export type Pushed =
  | { readonly reference: string; readonly images: PushedImages }
  | {
      readonly none: string;
      readonly images?: PushedImages;
      readonly packer?: PackerArtifacts;
    };

export const NOTHING_PUSHED = 'this build pushed none (no registry is configured)';
export const CANCELLED: Pushed = { none: 'the build was cancelled' };

/** Where a plan runs: the checkout, and the references the build pushes to. */
export interface Workspace {
  readonly source: string;
  readonly targets: readonly string[];
}

/**
 * Runs one kind of local plan (docs/adr/0008-local-runner.md) for a build whose source is checked
 * out: its children go through the run (which a cancel or the timeout stops), a failure is thrown
 * as a BuildFailure, and what it pushed is returned. After a cancel it returns without failing.
 */
export interface PlanExecutor<Kind extends LocalPlan['kind']> {
  run(
    run: BuildRun,
    plan: Extract<LocalPlan, { kind: Kind }>,
    workspace: Workspace,
  ): Promise<Pushed>;
}

/** A path inside the checkout, refusing `..` escapes. */
export function insideSource(source: string, relative: string): string {
  const path = resolve(source, relative);
  if (path !== source && !path.startsWith(source + sep)) {
    throw new BuildFailure('InvalidSpec', `build context ${relative} is outside the source`);
  }
  return path;
}
