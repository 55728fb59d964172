import { Injectable } from '@nestjs/common';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BuildFailure, failureMessage } from '../build-failure.js';
import { packerArgs } from '../build-plan.js';
import {
  packerArtifactsLine,
  packerNote,
  readPackerManifest,
} from '../../../steps/packer-manifest.js';
import type { BuildRun } from '../build-run.js';
import type { PlanExecutor, Pushed, Workspace } from './executor.js';

type PackerPlan = Parameters<PlanExecutor<'packer'>['run']>[1];

/**
 * packer builds: the template written into the checkout, then `packer [init] validate build`
 * (init for HCL2 templates only). A packer build pushes no image kiln knows of; what it made is
 * read from the file the template's manifest post-processor wrote into the checkout, for the
 * build's provenance. A manifest that cannot be read is a WARN line, never a failure.
 */
@Injectable()
export class PackerExecutor implements PlanExecutor<'packer'> {
  async run(run: BuildRun, plan: PackerPlan, { source }: Workspace): Promise<Pushed> {
    await writeFile(join(source, plan.templateFile), plan.template);
    // `packer init` installs an HCL2 template's plugins; JSON templates have none to install.
    const commands: Array<'init' | 'validate' | 'build'> =
      plan.templateFile === 'template.pkr.hcl'
        ? ['init', 'validate', 'build']
        : ['validate', 'build'];
    for (const command of commands) {
      const result = await run.runTool({
        tool: 'packer',
        args: packerArgs(command, plan),
        container: 'packer',
        cwd: source,
        format: 'packer',
        // References in environment resolved at start (packer is the one method that takes them).
        declared: { ...plan.env, ...run.access?.env },
      });
      if (run.cancelled) break;
      if (result.code !== 0) {
        throw new BuildFailure(
          command === 'build' ? 'BuildFailed' : 'InvalidSpec',
          `packer ${command} failed: ${failureMessage(result.tail, result.code)}`,
        );
      }
    }
    const none = 'a packer build pushes no image kiln knows of';
    if (run.stopped) return { none };
    const read = await readPackerManifest(plan.template, {
      templateFile: plan.templateFile,
      workingDir: source,
      within: source,
    });
    if (read.note !== undefined) await run.say(read.note);
    if (read.kind === 'artifacts') {
      await run.say(packerArtifactsLine(read.file, read.artifacts));
      return { none, packer: read.artifacts };
    }
    const note = packerNote(read);
    if (note !== undefined) await run.say(note.text, note.level);
    return { none };
  }
}
