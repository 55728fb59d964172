import { type Command, Option } from 'commander';
import { unwrap } from '../api/client.js';
import { UsageError } from '../exit-codes.js';
import {
  type BuildFlags,
  type CreateBody,
  manifestFromFile,
  manifestFlagsGiven,
  manifestFromFlags,
  wantsManifest,
} from '../manifest.js';
import type { Session } from '../session.js';
import { collect, projectIdOf } from './common.js';

/** What `build create` and `build run` take: the reference form's flags, or a manifest's. */
export function addBuildOptions(command: Command): Command {
  return command
    .option('-p, --project <project>', 'the project (id or name)')
    .option('--branch <branch>', 'reference form: the branch of the project repository to build')
    .option('--commit <sha>', 'reference form: the commit (7-40 hex digits)')
    .option('--build-arg <KEY=value>', 'a build argument (repeat)', collect, [])
    .option('-f, --file <file|->', 'manifest form: the manifest (JSON or YAML; spec §2.7)')
    .addOption(
      new Option('--method <method>', 'manifest form: the build method').choices([
        'kaniko',
        'buildx',
        'container',
        'paketo',
        'packer',
      ]),
    )
    .option('--name <name>', "manifest form: the build's name")
    .option('--description <text>', 'manifest form: a description')
    .option('--dockerfile <file|->', 'kaniko, buildx: the Dockerfile (its contents are sent)')
    .option('--context <path>', 'the build context in the repository (default .)')
    .option('-t, --tag <tag>', 'an image tag, or a full image reference (repeat)', collect, [])
    .option('--base-image <image>', 'container: the base image')
    .option('--instruction <line>', 'container: a Dockerfile instruction (repeat)', collect, [])
    .option('--env <KEY=value>', 'a build-time environment variable (repeat)', collect, [])
    .option('--label <KEY=value>', "the manifest's metadata (repeat)", collect, [])
    .option('--target <stage>', 'the multi-stage target')
    .option('--platform <os/arch>', 'buildx: a platform (repeat)', collect, [])
    .option('--registry-repository <repository>', 'where the image is pushed')
    .option('--registry-type <type>', 'harbor, quay, artifactory or s3', 'harbor')
    .option('--secret-manager <type>', 'vault, aws_secretsmanager or azure_keyvault', 'vault')
    .option('--sbom-tool <tool>', 'syft, grype or trivy', 'syft')
    .option('--scan-tool <tool>', 'trivy, clair, grype or snyk', 'trivy')
    .option('--cache', 'enable the build cache')
    .option('--cache-repo <repository>', 'the cache repository')
    .option('--cache-to <spec>', 'buildx: --cache-to')
    .option('--cache-from <spec>', 'buildx: --cache-from (repeat)', collect, [])
    .option('--secret <id=reference>', 'buildx: a build secret (repeat)', collect, [])
    .option('--builder <image>', 'paketo: the builder')
    .option('--buildpack <buildpack>', 'paketo: a buildpack (repeat)', collect, [])
    .option('--packer-template <file|->', 'packer: the template (its contents are sent)')
    .option('--var <KEY=value>', 'packer: a variable (repeat)', collect, [])
    .option('--fail-on <severity>', 'the scan policy: fail at findings of this severity or worse')
    .option('--ignore <id>', 'the scan policy: a finding to ignore (repeat)', collect, []);
}

/** The POST /builds body the flags describe. */
export async function createBody(session: Session, flags: BuildFlags): Promise<CreateBody> {
  if (!wantsManifest(flags)) {
    if (flags.branch === undefined) {
      throw new UsageError(
        'say what to build: --branch (the project repository), or a manifest with -f or --method',
      );
    }
    const projectId = await requiredProject(session, flags.project);
    const buildArgs = Object.fromEntries(
      flags.buildArg.map((pair) => {
        const at = pair.indexOf('=');
        if (at <= 0) throw new UsageError(`--build-arg ${pair}: expected KEY=value`);
        return [pair.slice(0, at), pair.slice(at + 1)];
      }),
    );
    return {
      form: 'reference',
      body: {
        project_id: projectId,
        git_branch: flags.branch,
        ...(flags.commit === undefined ? {} : { git_commit: flags.commit }),
        ...(flags.buildArg.length === 0 ? {} : { build_args: buildArgs }),
      },
    };
  }
  if (flags.branch !== undefined || flags.commit !== undefined) {
    throw new UsageError('--branch and --commit are for the reference form, not with a manifest');
  }
  let manifest: Record<string, unknown>;
  let projectRef = flags.project;
  if (flags.file !== undefined) {
    if (manifestFlagsGiven(flags).length > 0 || flags.buildArg.length > 0) {
      throw new UsageError('give the manifest with -f or with flags, not both');
    }
    const read = await manifestFromFile(flags.file);
    manifest = read.manifest;
    projectRef ??= read.projectId;
  } else {
    manifest = await manifestFromFlags(flags);
  }
  return {
    form: 'wizard',
    body: {
      tenant_id: await session.tenantId(),
      project_id: await requiredProject(session, projectRef),
      manifest,
    },
  };
}

async function requiredProject(session: Session, ref: string | undefined): Promise<string> {
  if (ref === undefined) throw new UsageError('--project is required');
  return projectIdOf(session, ref);
}

/** POST /builds: the created build (the wizard form's answer is unwrapped from `data`). */
export async function createBuild(session: Session, create: CreateBody) {
  const answer = await unwrap(
    session.client().POST('/api/v1/builds', {
      params: { header: await session.tenantHeader() },
      body: create.body,
    }),
  );
  return 'data' in answer ? answer.data : answer;
}
