import { Injectable } from '@nestjs/common';
import { mkdir, open, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { ArtifactKind } from '../../../artifacts/artifacts.repository.js';
import {
  BuildArtifacts,
  type ReceivedBody,
  scanPolicyOf,
} from '../../../artifacts/build-artifacts.js';
import {
  sbomTool,
  scanTool,
  type StepSettings,
  type StepTool,
} from '../../../build-methods/steps.js';
import { KilnError } from '../../../common/errors.js';
import { KilnConfig } from '../../../config/config.js';
import { BuildLifecycle } from '../../../lifecycle/build-lifecycle.js';
import { IMAGE_PLACEHOLDER } from '../../../manifest/tool-commands.js';
import { BuildFailure } from '../build-failure.js';
import { type BuildRun, OUTPUT_LIMIT_FACTOR } from '../build-run.js';
import type { ChildEnvironment } from '../child-env.js';
import type { Pushed } from './executor.js';

/** One step: its kind, its CLI, the image it reads and the file its document goes to. */
interface Step {
  readonly kind: ArtifactKind;
  readonly tool: StepTool;
  readonly reference: string;
  readonly out: string;
}

/**
 * The steps after the image (docs/adr/0019-build-steps-and-artifacts.md) on this machine: the
 * build's SBOM tool, then its scanner, each against the pushed digest when its CLI is on PATH.
 * What a tool writes goes to BuildArtifacts; a tool that fails, or a document kiln refuses, is
 * said in the log and does not fail the build. The scan policy gate, asked afterwards, may.
 */
@Injectable()
export class StepsExecutor {
  private readonly settings: StepSettings;

  constructor(
    private readonly config: KilnConfig,
    private readonly artifacts: BuildArtifacts,
    private readonly lifecycle: BuildLifecycle,
  ) {
    this.settings = localStepSettings(config);
  }

  async run(run: BuildRun, pushed: Pushed): Promise<void> {
    const { sbomTool: sbom, scanTool: scan } = run.build.spec;
    if (sbom === null && scan === null) return;
    if ('none' in pushed) {
      const what = [
        sbom === null ? undefined : `SBOM (${sbom})`,
        scan === null ? undefined : `scan (${scan})`,
      ].filter((part) => part !== undefined);
      await run.say(
        `the ${what.join(' and ')} step${what.length > 1 ? 's are' : ' is'} skipped: ${what.length > 1 ? 'they need' : 'it needs'} a pushed image, and ${pushed.none}`,
      );
      return;
    }
    const { reference } = pushed;
    const dir = join(run.dir, 'steps');
    await mkdir(dir, { recursive: true });
    const registry = reference.slice(0, reference.indexOf('/'));
    const insecure = this.config.localInsecureRegistries.includes(registry);
    if (sbom !== null) {
      const out = join(dir, 'sbom.json');
      await this.runStep(run, {
        kind: 'sbom',
        tool: sbomTool(sbom, insecure, out),
        reference,
        out,
      });
    }
    if (scan === null || run.stopped) return;
    if (scan === 'clair' && this.settings.clairUrl === undefined) {
      await run.say('the scan step is skipped: clair needs KILN_CLAIR_URL, which is not set');
      return;
    }
    const out = join(dir, 'scan.json');
    const tool = scanTool(scan, insecure, this.settings, out);
    if ('skip' in tool) await run.say(tool.skip);
    else await this.runStep(run, { kind: 'scan', tool, reference, out });
  }

  /**
   * The scan policy gate, as the operator asks it before a build succeeds: findings past the
   * policy, or no scan to show it holds, fail the build with PolicyViolation (the image stays
   * pushed). Without a policy there is nothing to ask.
   */
  async enforceScanPolicy(run: BuildRun): Promise<void> {
    if (scanPolicyOf(run.build.spec)?.fail_on === undefined) return;
    const record = await this.lifecycle.find(run.build.id);
    if (record === undefined) return; // deleted while it ran: nothing left to decide
    const verdict = await this.artifacts.gate(record);
    if (!verdict.pass) throw new BuildFailure('PolicyViolation', verdict.message);
  }

  /** One step: its CLI against the image, then what it wrote handed to BuildArtifacts. */
  private async runStep(run: BuildRun, { kind, tool, reference, out }: Step): Promise<void> {
    const label = kind === 'sbom' ? 'SBOM' : 'scan';
    const [path = '', ...rest] = tool.argv;
    const command = basename(path);
    const environment: ChildEnvironment = { tool: 'step', settings: tool.env ?? {} };
    if (!(await run.onPath(command, environment))) {
      await run.say(
        `the ${label} step is skipped: ${command} is not installed on this machine (kiln looked on PATH)`,
      );
      return;
    }
    const args = rest.map((arg) =>
      arg.endsWith(IMAGE_PLACEHOLDER) ? arg.slice(0, -IMAGE_PLACEHOLDER.length) + reference : arg,
    );
    await rm(out, { force: true });
    await run.say(`the ${label} step runs ${command} against ${reference}`);
    // A tool that prints its document: the shell sends its stdout to the file, its stderr to the log.
    const [file, argv] =
      tool.stdout === true
        ? ['sh', ['-c', 'exec "$@" > "$0"', out, command, ...args]]
        : [command, args];
    const exit = await run.runChild({
      command: file,
      args: argv,
      container: kind,
      cwd: run.dir,
      environment,
    });
    if (run.stopped) return;
    const failed = exit.outputLimitReached
      ? `${command} printed more than ${OUTPUT_LIMIT_FACTOR} × KILN_LOG_MAX_BYTES_PER_BUILD bytes and was stopped`
      : exit.code !== 0 && exit.code !== tool.okExit
        ? `${command} exited with ${exit.code === null ? `signal ${exit.signal}` : `code ${exit.code}`}`
        : undefined;
    if (failed !== undefined) {
      await run.say(`the ${label} step failed: ${failed}; nothing from it is stored`, 'WARN');
      return;
    }
    await this.store(run, { kind, label, command, out });
  }

  /** What a step wrote, handed to BuildArtifacts; a missing or refused document is said. */
  private async store(
    run: BuildRun,
    step: { kind: ArtifactKind; label: string; command: string; out: string },
  ): Promise<void> {
    const { kind, label, command, out } = step;
    const body = await this.readDocument(out);
    if (body === undefined) {
      await run.say(
        `the ${label} step failed: ${command} wrote no document; nothing from it is stored`,
        'WARN',
      );
      return;
    }
    try {
      await this.artifacts.receive(run.build.id, kind, body);
    } catch (error) {
      // Not a database outage nor a bug: kiln looked at the document and said no.
      if (!(error instanceof KilnError)) throw error;
      await run.say(`kiln did not store the ${label} from ${command}: ${error.message}`, 'WARN');
    }
  }

  /** A step's document, as much as BuildArtifacts reads, and its size; undefined when none. */
  private async readDocument(file: string): Promise<ReceivedBody | undefined> {
    const handle = await open(file, 'r').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (handle === undefined) return undefined;
    try {
      const { size } = await handle.stat();
      if (size === 0) return undefined;
      const buffer = Buffer.alloc(Math.min(size, this.artifacts.maxUploadBytes));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return { bytes: buffer.subarray(0, bytesRead), receivedBytes: size };
    } finally {
      await handle.close();
    }
  }
}

/**
 * The operator's step settings as this machine has them: the CLIs on PATH stand in for the step
 * images; clair needs KILN_CLAIR_URL; snyk reads its token from its own configuration (`snyk
 * auth`), so there is no Secret to name and the token counts as present.
 */
function localStepSettings(config: KilnConfig): StepSettings {
  const { clairUrl } = config.operatorSteps;
  return {
    sbomImages: { syft: 'syft', grype: 'grype', trivy: 'trivy' },
    scanImages: { trivy: 'trivy', clair: 'clairctl', grype: 'grype', snyk: 'snyk' },
    ...(clairUrl === undefined ? {} : { clairUrl }),
    snykToken: { secret: 'snyk-cli-configuration', key: 'token' },
  };
}
