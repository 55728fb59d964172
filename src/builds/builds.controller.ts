import {
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Post,
  Put,
  Query,
  Res,
} from '@nestjs/common';
import {
  ApiBody,
  ApiExtraModels,
  ApiHeader,
  ApiNoContentResponse,
  ApiOperation,
  ApiTags,
  getSchemaPath,
} from '../common/openapi-decorators.js';
import type { Response } from 'express';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import type { BuildEntity } from '../lifecycle/build.entity.js';
import {
  toBuildResponse,
  toBuildStatus,
  toBuildSummary,
  toCreateResponse,
} from './build.mapper.js';
import { BuildsService } from './builds.service.js';
import { CreateBuildBodyPipe } from './create-build.pipe.js';
import {
  BuildDto,
  BuildListDto,
  BuildStatusDto,
  BuildSummaryDto,
  WizardBuildEnvelopeDto,
} from './dto/build-response.dto.js';
import { CancelBuildDto } from './dto/cancel-build.dto.js';
import {
  type CreateBuildRequest,
  ReferenceCreateBuildDto,
  WizardCreateBuildDto,
} from './dto/create-build.dto.js';
import { ListBuildsQueryDto } from './dto/list-builds.dto.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';

@ApiTags('builds')
@ApiTenantScoped()
@ApiExtraModels(
  ReferenceCreateBuildDto,
  WizardCreateBuildDto,
  BuildSummaryDto,
  WizardBuildEnvelopeDto,
)
@Controller('builds')
export class BuildsController {
  constructor(private readonly builds: BuildsService) {}

  @Post()
  @HttpCode(201)
  @RequirePermission('build:create')
  @ApiOperation({
    summary: 'Create a build (reference form or wizard form)',
    description:
      'Creates a build in `queued` with the next build_number of its project (`build:create`). A body with `manifest`/`tenant_id` is the wizard form and is answered `{ "data": Build }`; the reference form is answered with the Build itself. An `Idempotency-Key` replays the original build for the same body (header `Idempotent-Replayed: true`) and gives 409 for a different one. 409 also when a queued or running build of the project has the same configuration (method, its config, source, output, environment, build args; not names or metadata).',
  })
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description: 'Makes a retried request create the build once',
  })
  @ApiBody({
    schema: {
      oneOf: [
        { $ref: getSchemaPath(ReferenceCreateBuildDto) },
        { $ref: getSchemaPath(WizardCreateBuildDto) },
      ],
    },
  })
  @ApiErrors(
    201,
    {
      description: 'The created build (a subset of Build)',
      schema: {
        oneOf: [
          { $ref: getSchemaPath(BuildSummaryDto) },
          { $ref: getSchemaPath(WizardBuildEnvelopeDto) },
        ],
      },
    },
    [400, 401, 403, 404, 409, 429],
  )
  async create(
    @CurrentTenant() tenant: TenantContext,
    @Body(CreateBuildBodyPipe) request: CreateBuildRequest,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) response: Response,
  ): Promise<BuildSummaryDto | WizardBuildEnvelopeDto> {
    const outcome = await this.builds.create(tenant, request, idempotencyKey);
    if (outcome.replayed) response.setHeader('Idempotent-Replayed', 'true');
    return toCreateResponse(outcome.form, outcome.build);
  }

  @Get()
  @RequirePermission('build:list')
  @ApiOperation({
    summary: "List the tenant's builds, one page",
    description:
      'Builds of the tenant in X-Tenant-ID (`build:list`), filtered by status and project, sorted by sort_by and sort_order, one page of `limit` builds.',
  })
  @ApiErrors(200, { type: BuildListDto, description: 'One page of builds' }, [400, 401, 403, 429])
  async list(
    @CurrentTenant() tenant: TenantContext,
    @Query() query: ListBuildsQueryDto,
  ): Promise<BuildListDto> {
    const { builds, total, hasMore } = await this.builds.list(tenant, query);
    const queues = await this.builds.queues(builds);
    return {
      builds: builds.map((build) => toBuildResponse(build, queues.get(build.id))),
      total_count: total,
      page: query.page,
      limit: query.limit,
      has_more: hasMore,
    };
  }

  @Get(':id')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: 'Read a build',
    description: 'Every field of one build of the tenant (`build:read`).',
  })
  @ApiErrors(200, { type: BuildDto, description: 'The build' }, [400, 401, 403, 404, 429])
  async get(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildDto> {
    return this.withQueue(await this.builds.get(tenant, id));
  }

  @Delete(':id')
  @HttpCode(204)
  @RequirePermission('build:delete')
  @ApiOperation({
    summary: 'Delete a build that is not running, its logs and its runner resources',
    description:
      'Deletes the build, its log lines and what its runner keeps for it (`build:delete`). A running build cannot be deleted: 409, cancel it first.',
  })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 409, 429], {
    409: 'The build is running; cancel it first',
  })
  async remove(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<void> {
    await this.builds.remove(tenant, id);
  }

  @Put(':id/keep')
  @HttpCode(200)
  @RequirePermission('build:delete')
  @ApiOperation({
    summary: 'Pin a build: retention never deletes it',
    description:
      "Sets the build's `keep` (`build:delete`: a pin decides whether the build may be deleted). The retention policy (days since completion, the last N builds of a project) passes over a pinned build; DELETE /builds/{id} still deletes it. Repeating it changes nothing.",
  })
  @ApiErrors(
    200,
    { type: BuildDto, description: 'The build, keep: true' },
    [400, 401, 403, 404, 429],
  )
  async pin(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildDto> {
    return this.withQueue(await this.builds.setKeep(tenant, id, true));
  }

  @Delete(':id/keep')
  @HttpCode(200)
  @RequirePermission('build:delete')
  @ApiOperation({
    summary: 'Unpin a build: retention may delete it again',
    description:
      "Clears the build's `keep` (`build:delete`); the next retention pass deletes it if the policy says so. Repeating it changes nothing.",
  })
  @ApiErrors(
    200,
    { type: BuildDto, description: 'The build, keep: false' },
    [400, 401, 403, 404, 429],
  )
  async unpin(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildDto> {
    return this.withQueue(await this.builds.setKeep(tenant, id, false));
  }

  @Post(':id/start')
  @HttpCode(200)
  @RequirePermission('build:create')
  @ApiOperation({
    summary: 'Start a queued build',
    description:
      'Moves a `queued` build to `in_progress` and hands it to the runner (`build:create`); it runs once admitted (the installation, tenant and project limits on running builds), and `queue` says where it stands meanwhile (in this answer when the runner is local; with Kubernetes the operator enqueues it after this answer, and GET /builds/{id}/status tells). 409 when the build is not queued; 429 also when the tenant already has KILN_TENANT_MAX_QUEUED builds waiting to run; 503 when the runner cannot be reached (the build stays queued).',
  })
  @ApiErrors(
    200,
    { type: BuildDto, description: 'The build, in_progress' },
    [400, 401, 403, 404, 409, 429],
    {
      409: 'The build is not queued',
      429: 'Rate limited, or the tenant already has KILN_TENANT_MAX_QUEUED builds waiting to run: wait until X-RateLimit-Reset; Retry-After gives the delay',
    },
  )
  async start(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildDto> {
    const build = await this.builds.start(tenant, id);
    return toBuildResponse(build, await this.builds.startedQueue(build));
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @RequirePermission('build:cancel')
  @ApiOperation({
    summary: 'Cancel a running build',
    description:
      'Moves an `in_progress` build to `cancelled` and stops its run (`build:cancel`); an optional reason is recorded with it. 409 when the build is not in progress.',
  })
  @ApiBody({ type: CancelBuildDto, required: false })
  @ApiErrors(
    200,
    { type: BuildDto, description: 'The build, cancelled' },
    [400, 401, 403, 404, 409, 429],
    { 409: 'The build is not in progress' },
  )
  async cancel(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Body() body: CancelBuildDto,
  ): Promise<BuildDto> {
    return toBuildResponse(await this.builds.cancel(tenant, id, body.reason));
  }

  @Post(':id/retry')
  @HttpCode(200)
  @RequirePermission('build:create')
  @ApiOperation({
    summary: 'Retry a failed build: a new queued build with the same configuration',
    description:
      'Creates a new `queued` build with the configuration of a `failed` one, a new id and the next build_number (`build:create`); the original stays failed. 409 when the build is not failed or already has a queued or running retry.',
  })
  @ApiErrors(
    200,
    { type: BuildSummaryDto, description: 'The new build (a subset of Build)' },
    [400, 401, 403, 404, 409, 429],
    { 409: 'The build is not failed, or its retry is already queued or running' },
  )
  async retry(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildSummaryDto> {
    return toBuildSummary(await this.builds.retry(tenant, id));
  }

  @Get(':id/status')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: 'Status and progress of a build',
    description:
      "The build's status, step progress and error (`build:read`). estimated_completion is the start time plus the median run time of the project's recent successful builds while it runs, and its completion time once it has ended.",
  })
  @ApiErrors(
    200,
    { type: BuildStatusDto, description: 'Status and progress' },
    [400, 401, 403, 404, 429],
  )
  async status(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<BuildStatusDto> {
    const { build, medianDurationMs, queue } = await this.builds.status(tenant, id);
    return toBuildStatus(build, medianDurationMs, queue);
  }

  /** The build, with where it stands if it waits to run. */
  private async withQueue(build: BuildEntity): Promise<BuildDto> {
    const queues = await this.builds.queues([build]);
    return toBuildResponse(build, queues.get(build.id));
  }
}
