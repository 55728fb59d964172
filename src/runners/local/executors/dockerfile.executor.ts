import { Inject, Injectable } from '@nestjs/common';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { arch } from 'node:os';
import { join } from 'node:path';
import type { DockerfilePlan } from '../../../build-methods/method.js';
import type { BuildAccessGrant, S3ImageTarget } from '../../../integrations/build-access.js';
import { KilnConfig } from '../../../config/config.js';
import { OciLayoutError, ociLayoutDigest } from '../../../registries/oci-layout.js';
import {
  RegistryUnauthorizedError,
  RegistryUnavailableError,
} from '../../../registries/registry.js';
import { s3ImageKey } from '../../../registries/s3-upload.js';
import { pushedImages, referenceOf } from '../../../steps/pushed-image.js';
import { BuildFailure, failureMessage } from '../build-failure.js';
import type { BuildRun } from '../build-run.js';
import { LayerCacheReport } from '../layer-cache-report.js';
import { LayerCaches } from '../layer-caches.js';
import {
  CANCELLED,
  insideSource,
  NOTHING_PUSHED,
  type PlanExecutor,
  type Pushed,
  type Workspace,
} from './executor.js';
import { S3_STORES, type S3Stores } from './s3-stores.js';

/** The name a build's image has in its store until the build is deleted. */
export function buildImageName(buildId: string): string {
  return `localhost/kiln/${buildId}:build`;
}

/** The one platform the local runner builds for. */
export const HOST_PLATFORM = `linux/${arch() === 'x64' ? 'amd64' : arch()}`;

/**
 * Dockerfile builds (kaniko, buildx, container, and reference-form builds of the repository's
 * Dockerfile): `buildah bud` with chroot isolation, `--layers` in the project's layer cache
 * (docs/adr/0055-local-layer-cache.md) or, with `cache: false` or KILN_LOCAL_CACHE_MAX_BYTES=0,
 * without layers in a store of the build's own; then `buildah push` to every target (the first with `--digestfile`, so the steps read the image by digest),
 * or, for registry_type s3, the image saved as an OCI layout and uploaded to the tenant's bucket.
 */
@Injectable()
export class DockerfileExecutor implements PlanExecutor<'dockerfile'> {
  constructor(
    private readonly config: KilnConfig,
    @Inject(S3_STORES) private readonly s3Stores: S3Stores,
    private readonly caches: LayerCaches,
  ) {}

  async run(run: BuildRun, plan: DockerfilePlan, { source, targets }: Workspace): Promise<Pushed> {
    const foreign = plan.platforms.filter((platform) => platform !== HOST_PLATFORM);
    if (foreign.length > 0) {
      throw new BuildFailure(
        'InvalidSpec',
        `the local runner builds for ${HOST_PLATFORM} only; ${foreign.join(', ')} need the Kubernetes runner`,
      );
    }
    if (plan.dockerfile !== undefined)
      await writeFile(join(source, '.kiln.Dockerfile'), plan.dockerfile);
    // Unique per build, so that builds of one project sharing its cache never take each other's.
    const image = buildImageName(run.build.id);
    const layers = await this.layerCache(run, plan);
    const bud = await this.budArgs(run, plan, source, image, layers);
    const authFile = await this.registryAuthFile(run.dir, run.access);
    const report = new LayerCacheReport();
    const built = await run.runTool({
      tool: 'buildah',
      args: bud,
      container: 'build',
      cwd: source,
      ...(layers ? { watch: (line: string) => report.see(line) } : {}),
    });
    if (run.cancelled) return CANCELLED;
    if (built.code !== 0)
      throw new BuildFailure('BuildFailed', failureMessage(built.tail, built.code));
    if (layers) await run.say(report.summary());
    if (run.access?.s3 !== undefined) return this.storeInS3(run, image, run.access.s3);
    if (targets.length === 0) {
      await run.say(`built ${image}; no registry configured, so the image stays on this machine`);
      return { none: NOTHING_PUSHED };
    }
    return this.push(run, image, targets, authFile);
  }

  /**
   * Takes the project's layer cache for the build when it may use one, saying in the log either
   * way; whether bud runs with `--layers`.
   */
  private async layerCache(run: BuildRun, plan: DockerfilePlan): Promise<boolean> {
    if (!plan.layerCache) {
      await run.say(
        'layer cache: off (the manifest says cache: false); every step runs, and no layer is reused or kept for later builds',
      );
      return false;
    }
    if (!this.caches.enabled) {
      await run.say(
        'layer cache: off on this machine (KILN_LOCAL_CACHE_MAX_BYTES=0); every step runs',
      );
      return false;
    }
    run.cache = await this.caches.acquire(run.build.tenantId, run.build.projectId);
    await run.say("layer cache: on; steps this project's earlier builds ran are reused");
    return true;
  }

  private async budArgs(
    run: BuildRun,
    plan: DockerfilePlan,
    source: string,
    image: string,
    layers: boolean,
  ): Promise<string[]> {
    const context = insideSource(source, run.build.spec.source.context);
    const secretArgs = await this.secretFiles(run.dir, run.access);
    return [
      ...run.storage,
      'bud',
      '--isolation',
      'chroot',
      // With layers, intermediate containers go even when the build fails: the cache is shared.
      ...(layers ? ['--layers=true', '--force-rm'] : ['--layers=false']),
      '--file',
      plan.dockerfile !== undefined
        ? join(source, '.kiln.Dockerfile')
        : join(source, plan.dockerfilePath),
      '--tag',
      image,
      ...Object.entries(plan.buildArgs).flatMap(([name, value]) => [
        '--build-arg',
        `${name}=${value}`,
      ]),
      ...(plan.target === undefined ? [] : ['--target', plan.target]),
      ...secretArgs,
      // Base images from an insecure registry (pulled by bud) need the same exemption as pushes.
      ...(this.config.localInsecureRegistries.length > 0 ? ['--tls-verify=false'] : []),
      context,
    ];
  }

  /** Pushes to every target; the steps run against the first by digest (a tag may move). */
  private async push(
    run: BuildRun,
    image: string,
    targets: readonly string[],
    authFile: string | undefined,
  ): Promise<Pushed> {
    const digestFile = join(run.dir, 'image.digest');
    await rm(digestFile, { force: true });
    for (const [index, target] of targets.entries()) {
      const registry = target.slice(0, target.indexOf('/'));
      const pushed = await run.runTool({
        tool: 'buildah',
        args: [
          ...run.storage,
          'push',
          ...(this.config.localInsecureRegistries.includes(registry) ? ['--tls-verify=false'] : []),
          ...(authFile === undefined ? [] : ['--authfile', authFile]),
          ...(index === 0 ? ['--digestfile', digestFile] : []),
          image,
          `docker://${target}`,
        ],
        container: 'push',
        cwd: run.dir,
      });
      if (run.cancelled) return CANCELLED;
      if (pushed.code !== 0) {
        throw new BuildFailure(
          'BuildFailed',
          `pushing ${target} failed: ${failureMessage(pushed.tail, pushed.code)}`,
        );
      }
      await run.say(`pushed ${target}`);
    }
    const digest = await readFile(digestFile, 'utf8').catch(() => '');
    // Every target is the same image: buildah's digest of the first is each one's.
    const images = pushedImages(
      'image-ref',
      targets.map((target) => `${target}@${digest.trim()}`).join('\n'),
    );
    return 'problem' in images
      ? { none: 'buildah did not say which digest it pushed' }
      : { reference: referenceOf(images), images };
  }

  /**
   * `registry_type: s3` (docs/adr/0022-registries.md): the image saved as an OCI layout tarball
   * (`buildah push … oci-archive:`), uploaded to the tenant's bucket, its `s3://` address and
   * digest recorded. The SBOM and scan steps, which read registry images, do not run.
   */
  private async storeInS3(run: BuildRun, image: string, target: S3ImageTarget): Promise<Pushed> {
    const archive = join(run.dir, 'image.oci.tar');
    await rm(archive, { force: true });
    const saved = await run.runTool({
      tool: 'buildah',
      args: [...run.storage, 'push', image, `oci-archive:${archive}`],
      container: 'push',
      cwd: run.dir,
    });
    if (run.cancelled) return CANCELLED;
    if (saved.code !== 0) {
      throw new BuildFailure(
        'BuildFailed',
        `saving the image as an OCI layout failed: ${failureMessage(saved.tail, saved.code)}`,
      );
    }
    try {
      const layout = await ociLayoutDigest(archive);
      const key = s3ImageKey({
        ...(target.prefix === undefined ? {} : { prefix: target.prefix }),
        project: run.build.projectId,
        buildNumber: run.build.buildNumber,
        digest: layout.digest,
      });
      const stored = await this.s3Stores(target).upload(archive, { key });
      await run.say(`uploaded ${stored.uri} (${stored.digest}, ${stored.size} bytes)`);
      return {
        none: 'the image went to S3 as an OCI layout, and these steps read registry images',
        images: { digest: stored.digest, images: [stored.uri] },
      };
    } catch (error) {
      if (error instanceof RegistryUnauthorizedError) {
        throw new BuildFailure('RegistryUnauthorized', error.message);
      }
      if (error instanceof RegistryUnavailableError || error instanceof OciLayoutError) {
        throw new BuildFailure('BuildFailed', `storing the image in S3 failed: ${error.message}`);
      }
      throw error;
    } finally {
      await rm(archive, { force: true });
    }
  }

  /**
   * buildx secrets as buildah secret mounts (`RUN --mount=type=secret,id=…`): each value unsealed
   * into a file of its own (mode 0600) under the build's run directory, removed with it; the
   * value never becomes a build argument or a command-line word.
   */
  private async secretFiles(dir: string, access: BuildAccessGrant | undefined): Promise<string[]> {
    const secrets = access?.secrets ?? {};
    if (Object.keys(secrets).length === 0) return [];
    const secretsDir = join(dir, 'run', 'secrets');
    await mkdir(secretsDir, { recursive: true, mode: 0o700 });
    const args: string[] = [];
    for (const [id, value] of Object.entries(secrets)) {
      if (!/^[A-Za-z0-9_.-]{1,200}$/.test(id)) {
        throw new BuildFailure('InvalidSpec', `secret id "${id.slice(0, 64)}" is not a valid name`);
      }
      const file = join(secretsDir, id);
      await writeFile(file, value, { mode: 0o600 });
      args.push('--secret', `id=${id},src=${file}`);
    }
    return args;
  }

  /**
   * The Docker config buildah pushes with: the tenant's registry credentials, resolved for this
   * build, in a file of its own (mode 0600) removed with the build's run directory; else the
   * machine's KILN_LOCAL_AUTHFILE.
   */
  private async registryAuthFile(
    dir: string,
    access: BuildAccessGrant | undefined,
  ): Promise<string | undefined> {
    if (access?.dockerConfig === undefined) return this.config.localAuthFile;
    const runDir = join(dir, 'run');
    await mkdir(runDir, { recursive: true, mode: 0o700 });
    const file = join(runDir, 'auth.json');
    await writeFile(file, access.dockerConfig, { mode: 0o600 });
    return file;
  }
}
