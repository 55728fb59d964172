import { Injectable } from '@nestjs/common';
import { failureMessage, BuildFailure } from '../build-failure.js';
import { packArgs } from '../build-plan.js';
import type { BuildRun } from '../build-run.js';
import {
  insideSource,
  NOTHING_PUSHED,
  type PlanExecutor,
  type Pushed,
  type Workspace,
} from './executor.js';

type PackPlan = Parameters<PlanExecutor<'pack'>['run']>[1];

/**
 * paketo builds: `pack build`, published to the first push target when there is one. kiln does
 * not learn the digest pack publishes, so the steps after the image do not run.
 */
@Injectable()
export class PackExecutor implements PlanExecutor<'pack'> {
  async run(run: BuildRun, plan: PackPlan, { source, targets }: Workspace): Promise<Pushed> {
    const { build } = run;
    if (plan.builder !== plan.requestedBuilder) {
      await run.say(`builder ${plan.requestedBuilder} is deprecated; using ${plan.builder}`);
    }
    const path = insideSource(source, build.spec.source.context);
    // Without a registry, pack leaves the image with the container engine it talks to.
    const [image = `kiln/${build.id}:build`, ...more] = targets;
    const result = await run.runTool({
      tool: 'pack',
      args: packArgs(plan, image, path, targets.length > 0),
      container: 'pack',
      cwd: source,
      format: 'pack',
      declared: plan.env,
    });
    if (result.code !== 0 && !run.cancelled)
      throw new BuildFailure('BuildFailed', failureMessage(result.tail, result.code));
    if (targets.length === 0 || run.cancelled) return { none: NOTHING_PUSHED };
    await run.say(`pushed ${image}`);
    for (const tag of more)
      await run.say(`${tag} was not pushed: pack publishes one name per build`);
    return { none: 'kiln does not learn the digest of the image pack publishes' };
  }
}
