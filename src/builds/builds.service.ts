import { Inject, Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { Admission, type QueueView } from '../admission/admission.js';
import type { TenantContext } from '../auth/tenant-context.js';
import {
  type SpecContext,
  specDigest,
  specOfManifest,
  specOfReference,
} from '../manifest/build-spec.js';
import { validateManifestAsync } from '../build-methods/manifest.js';
import { ForbiddenError, InvalidRequestError, UnavailableError } from '../common/errors.js';
import { stableJson } from '../common/stable-json.js';
import { LOGGER } from '../common/logger.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import { KilnConfig } from '../config/config.js';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import type { BuildPage, BuildTrigger, NewBuild } from '../lifecycle/builds.repository.js';
import { ProjectsRepository } from '../projects/projects.repository.js';
import { BuildRunner } from '../runners/build-runner.js';
import type { CreateBuildRequest } from './dto/create-build.dto.js';
import type { ListBuildsQueryDto } from './dto/list-builds.dto.js';

/** The tenant a use case acts in: a caller's TenantContext, or a trigger's tenant. */
type TenantScope = Pick<TenantContext, 'tenantId'>;

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** A build a trigger asks for (docs/adr/0053-triggers.md): what to build, and from which push. */
export interface TriggeredBuildRequest {
  readonly tenantId: string;
  readonly projectId: string;
  /** Who made the trigger: the build's creator. */
  readonly createdBy: string | null;
  readonly what:
    | { readonly form: 'reference'; readonly buildArgs: Readonly<Record<string, string>> | null }
    | { readonly form: 'manifest'; readonly manifest: Readonly<Record<string, unknown>> };
  /** The branch (or tag) to clone and the commit to build. */
  readonly branch: string;
  readonly commit: string;
  readonly author: { readonly name: string; readonly email: string } | null;
  readonly trigger: BuildTrigger;
}

export interface CreateOutcome {
  readonly form: CreateBuildRequest['form'];
  readonly build: BuildEntity;
  readonly replayed: boolean;
}

/** The builds API's use cases. Every method takes the caller's tenant explicitly. */
@Injectable()
export class BuildsService {
  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly runner: BuildRunner,
    private readonly projects: ProjectsRepository,
    private readonly config: KilnConfig,
    private readonly sealer: SecretSealer,
    private readonly admission: Admission,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async create(
    tenant: TenantContext,
    request: CreateBuildRequest,
    idempotencyKey: string | undefined,
  ): Promise<CreateOutcome> {
    if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey)) {
      throw new InvalidRequestError('Idempotency-Key must be 1 to 255 visible ASCII characters', {
        'Idempotency-Key': 'invalid',
      });
    }
    const common = {
      tenantId: tenant.tenantId,
      createdBy: tenant.userId,
      idempotencyKey: idempotencyKey ?? null,
      requestHash: idempotencyKey === undefined ? null : hashRequest(request),
    };
    const projectId = request.body.project_id.toLowerCase();
    if (request.form === 'wizard' && request.body.tenant_id.toLowerCase() !== tenant.tenantId) {
      throw new ForbiddenError('tenant_id does not match X-Tenant-ID');
    }
    const context = await this.specContext(tenant.tenantId, projectId);
    const asked: Omit<NewBuild, 'specDigest'> =
      request.form === 'reference'
        ? {
            ...common,
            projectId,
            gitBranch: request.body.git_branch,
            gitCommit: request.body.git_commit?.toLowerCase() ?? null,
            method: null,
            config: { form: 'reference', build_args: request.body.build_args ?? null },
            spec: specOfReference(
              {
                branch: request.body.git_branch,
                commit: request.body.git_commit?.toLowerCase() ?? null,
                buildArgs: request.body.build_args ?? null,
              },
              context,
            ),
          }
        : {
            ...common,
            projectId,
            ...(await fromWizard(request.body.manifest, context, this.sealer)),
          };
    const created = await this.lifecycle.create(this.digested(asked));
    if (!created.replayed) await this.handToRunner(tenant.tenantId, created.build);
    return { form: request.form, ...created };
  }

  /**
   * A build made by a trigger from a git event. The same rules as POST /builds apply (the
   * manifest's validation, the duplicate rule's 409); the branch and commit come from the event.
   */
  async createForTrigger(request: TriggeredBuildRequest): Promise<BuildEntity> {
    const context = await this.specContext(request.tenantId, request.projectId);
    const { what, branch, commit } = request;
    const built =
      what.form === 'reference'
        ? {
            gitBranch: branch,
            gitCommit: commit,
            method: null,
            config: { form: 'reference' as const, build_args: what.buildArgs },
            spec: specOfReference({ branch, commit, buildArgs: what.buildArgs }, context),
          }
        : await fromWizard(what.manifest, context, this.sealer);
    const asked: Omit<NewBuild, 'specDigest'> = {
      ...built,
      gitBranch: branch,
      gitCommit: commit,
      spec: { ...built.spec, source: { ...built.spec.source, branch, commit } },
      tenantId: request.tenantId,
      projectId: request.projectId,
      createdBy: request.createdBy,
      gitAuthorName: request.author?.name ?? null,
      gitAuthorEmail: request.author?.email ?? null,
      trigger: request.trigger,
    };
    const { build } = await this.lifecycle.create(this.digested(asked));
    await this.handToRunner(request.tenantId, build);
    return build;
  }

  /**
   * What a build's spec is made against: the project's repository and registry, and kiln's.
   * A missing project is the insert's 404; until then it only means no repository or registry.
   */
  private async specContext(tenantId: string, projectId: string): Promise<SpecContext> {
    const project = await this.projects.findInTenant(tenantId, projectId);
    return {
      project: {
        name: project?.name ?? 'project',
        gitRepositoryUrl: project?.gitRepositoryUrl ?? null,
        defaultRegistry: project?.defaultRegistry ?? null,
      },
      defaultRegistry: this.config.localRegistry,
      timeoutSeconds: this.config.buildTimeoutSeconds,
    };
  }

  /** The build with its spec's digest, the duplicate rule's key (secrets by fingerprint). */
  private digested(asked: Omit<NewBuild, 'specDigest'>): NewBuild {
    const fingerprint = (value: string): string => this.sealer.fingerprint(value);
    return { ...asked, specDigest: specDigest(asked.spec, fingerprint) };
  }

  get(tenant: TenantContext, id: string): Promise<BuildEntity> {
    return this.lifecycle.get(tenant.tenantId, id);
  }

  list(tenant: TenantContext, query: ListBuildsQueryDto): Promise<BuildPage> {
    return this.lifecycle.list({
      tenantId: tenant.tenantId,
      status: query.status,
      projectId: query.project_id?.toLowerCase(),
      sortBy: query.sort_by,
      sortOrder: query.sort_order,
      offset: (query.page - 1) * query.limit,
      limit: query.limit,
    });
  }

  /**
   * queued → in_progress, then hands the build to the runner. A runner whose backend is
   * unreachable leaves the build queued again and the caller gets the 503.
   */
  async start(tenant: TenantScope, id: string): Promise<BuildEntity> {
    // A start past the tenant's room to wait is refused before it changes anything (429).
    await this.admission.checkRoom(tenant.tenantId);
    const build = await this.lifecycle.start(tenant.tenantId, id);
    try {
      await this.runner.start(build);
    } catch (error) {
      if (error instanceof UnavailableError) {
        await this.lifecycle
          .unstart(id)
          .catch((undo: unknown) =>
            this.logger.error({ err: undo, build_id: id }, 'could not queue a refused start again'),
          );
        throw error;
      }
      this.logger.error({ err: error, build_id: id }, 'the runner could not start the build');
      try {
        return await this.lifecycle.fail(
          id,
          'InternalError',
          'The build could not be started by the runner',
        );
      } catch {
        // The runner may have reported an outcome already; fall through to the current record.
      }
    }
    return this.lifecycle.get(tenant.tenantId, id);
  }

  /** in_progress → cancelled, then asks the runner to stop the run. */
  async cancel(tenant: TenantScope, id: string, reason: string | undefined): Promise<BuildEntity> {
    const build = await this.lifecycle.cancel(tenant.tenantId, id, reason ?? null);
    try {
      await this.runner.cancel(build);
    } catch (error) {
      // The build is cancelled in the record; the runner retries stopping it (reconcile).
      this.logger.error(
        { err: error, build_id: id },
        'the runner could not stop a cancelled build',
      );
    }
    return build;
  }

  async retry(tenant: TenantContext, id: string): Promise<BuildEntity> {
    const build = await this.lifecycle.retry(tenant.tenantId, id, tenant.userId);
    await this.handToRunner(tenant.tenantId, build);
    return build;
  }

  /** The runner prepares a new build; nothing is left of one it refused (its number stays unused). */
  private async handToRunner(tenantId: string, build: BuildEntity): Promise<void> {
    try {
      await this.runner.create(build);
    } catch (error) {
      await this.lifecycle
        .remove(tenantId, build.id)
        .catch((cleanup: unknown) =>
          this.logger.error(
            { err: cleanup, build_id: build.id },
            'could not delete a build the runner refused to create',
          ),
        );
      throw error;
    }
  }

  async status(
    tenant: TenantContext,
    id: string,
  ): Promise<{ build: BuildEntity; medianDurationMs: number | undefined; queue?: QueueView }> {
    const build = await this.lifecycle.get(tenant.tenantId, id);
    if (build.status !== 'in_progress') return { build, medianDurationMs: undefined };
    const [medianDurationMs, queues] = await Promise.all([
      this.lifecycle.medianSuccessDurationMs(build.projectId),
      this.queues([build]),
    ]);
    return { build, medianDurationMs, queue: queues.get(build.id) };
  }

  /**
   * What a build this process has just started waits for, read only where the runner recorded it
   * with admission before the start returned (the local runner); a Kubernetes build is recorded
   * by the operator after the answer: its status tells.
   */
  async startedQueue(build: BuildEntity): Promise<QueueView | undefined> {
    if (!this.runner.admitsOnStart) return undefined;
    return (await this.queues([build])).get(build.id);
  }

  /** What each started build of `builds` waits for, if it waits (the `queue` of its answer). */
  queues(builds: readonly BuildEntity[]): Promise<Map<string, QueueView>> {
    return this.admission.queueOf(builds.filter((build) => build.status === 'in_progress'));
  }

  /** Pins (keep) or unpins a build: retention never deletes a pinned one. */
  setKeep(tenant: TenantContext, id: string, keep: boolean): Promise<BuildEntity> {
    return this.lifecycle.setKeep(tenant.tenantId, id, keep);
  }

  /** Deletes a build that is not running, then what the runner keeps for it. */
  async remove(tenant: TenantContext, id: string): Promise<void> {
    const build = await this.lifecycle.remove(tenant.tenantId, id);
    try {
      await this.runner.remove(build);
    } catch (error) {
      this.logger.error(
        { err: error, build_id: id },
        'the runner could not remove the resources of a deleted build',
      );
    }
  }
}

/** Validates the manifest against the project's defaults and captures what will run. */
async function fromWizard(
  input: unknown,
  context: SpecContext,
  sealer: SecretSealer,
): Promise<Pick<NewBuild, 'gitBranch' | 'gitCommit' | 'method' | 'config' | 'spec'>> {
  const defaultRegistry = context.project.defaultRegistry ?? context.defaultRegistry;
  const result = await validateManifestAsync(input, { defaultRegistry });
  if (!result.ok) throw InvalidRequestError.listing('Invalid build manifest', result.details);
  // buildx secret values are stored sealed, in the manifest snapshot and the spec alike.
  const { secrets } = result.manifest.build_config;
  if (secrets !== undefined) result.manifest.build_config.secrets = sealer.sealAll(secrets);
  return {
    gitBranch: null,
    gitCommit: null,
    method: result.manifest.type,
    config: { form: 'wizard', manifest: result.manifest },
    spec: specOfManifest(result.manifest, context),
  };
}

/** A stable digest of what was asked, to tell an idempotent replay from a reused key. */
function hashRequest(request: CreateBuildRequest): string {
  return createHash('sha256').update(stableJson(request)).digest('hex');
}
