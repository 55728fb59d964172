import { Body, Controller, Get, Param, Patch, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { TenancyService } from '../auth/tenancy.service.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import {
  InstallationPreviewQueryDto,
  PreviewQueryDto,
  RetentionChangeDto,
  RetentionPreviewDto,
  RetentionSettingsDto,
} from './retention.dto.js';
import type { DoomedBuild, RetentionRule } from './retention.repository.js';
import { Retention, type TenantPolicyView } from './retention.service.js';

/**
 * Retention for installation administrators (`system:admin`): a tenant's own policy, and what a
 * pass would delete across the installation or in one tenant.
 */
@ApiTags('admin')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller()
export class RetentionAdminController {
  constructor(
    private readonly tenancy: TenancyService,
    private readonly retention: Retention,
  ) {}

  @Get('tenants/:id/retention')
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: "Read a tenant's retention policy",
    description:
      "Its own days and keep-last (null: the installation's) and what applies (`system:admin`).",
  })
  @ApiErrors(
    200,
    { type: RetentionSettingsDto, description: 'The policy' },
    [400, 401, 403, 404, 429],
  )
  async get(@Param('id', UuidParamPipe) id: string): Promise<RetentionSettingsDto> {
    const tenant = await this.tenancy.resolveTenant(id);
    return toSettings(await this.retention.tenantPolicy(tenant.id));
  }

  @Patch('tenants/:id/retention')
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: "Change a tenant's retention policy",
    description:
      "Sets the tenant's own days since completion and keep-last per project (`system:admin`): null inherits KILN_RETENTION_DAYS / KILN_RETENTION_KEEP_LAST again, 0 turns the rule off for the tenant. The next pass applies them.",
  })
  @ApiErrors(
    200,
    { type: RetentionSettingsDto, description: 'The policy now' },
    [400, 401, 403, 404, 429],
  )
  async change(
    @Param('id', UuidParamPipe) id: string,
    @Body() body: RetentionChangeDto,
  ): Promise<RetentionSettingsDto> {
    return toSettings(
      await this.retention.setTenantPolicy(id, { days: body.days, keepLast: body.keep_last }),
    );
  }

  @Get('retention/preview')
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'What retention would delete now, across the installation or in one tenant',
    description:
      'A dry run (`system:admin`): how many finished builds a pass would delete now, by rule, and the first `limit` of them in the order a pass takes them. Nothing is deleted.',
  })
  @ApiErrors(
    200,
    { type: RetentionPreviewDto, description: 'The dry run' },
    [400, 401, 403, 404, 429],
  )
  async preview(@Query() query: InstallationPreviewQueryDto): Promise<RetentionPreviewDto> {
    const tenantId =
      query.tenant_id === undefined
        ? undefined
        : (await this.tenancy.resolveTenant(query.tenant_id)).id;
    return toPreview(tenantId, await this.retention.preview(tenantId, query.limit));
  }
}

/** Retention for a tenant's admins (`settings:manage`): the policy that applies, and a dry run. */
@ApiTags('settings')
@ApiTenantScoped()
@Controller('settings/retention')
export class RetentionSettingsController {
  constructor(private readonly retention: Retention) {}

  @Get()
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Read the tenant's retention policy",
    description:
      "The tenant's own days and keep-last (null: the installation's) and what applies (`settings:manage`). Installation administrators set them (PATCH /tenants/{id}/retention).",
  })
  @ApiErrors(200, { type: RetentionSettingsDto, description: 'The policy' }, [400, 401, 403, 429])
  async get(@CurrentTenant() tenant: TenantContext): Promise<RetentionSettingsDto> {
    return toSettings(await this.retention.tenantPolicy(tenant.tenantId));
  }

  @Get('preview')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: 'What retention would delete now in the tenant',
    description:
      "A dry run over the tenant's builds (`settings:manage`): counts by rule and the first `limit` builds a pass would delete now, oldest first. Nothing is deleted.",
  })
  @ApiErrors(200, { type: RetentionPreviewDto, description: 'The dry run' }, [400, 401, 403, 429])
  async preview(
    @CurrentTenant() tenant: TenantContext,
    @Query() query: PreviewQueryDto,
  ): Promise<RetentionPreviewDto> {
    return toPreview(tenant.tenantId, await this.retention.preview(tenant.tenantId, query.limit));
  }
}

function toSettings(policy: TenantPolicyView): RetentionSettingsDto {
  return {
    tenant_id: policy.tenantId,
    days: policy.days,
    keep_last: policy.keepLast,
    effective: { days: policy.effective.days, keep_last: policy.effective.keepLast },
  };
}

function toPreview(
  tenantId: string | undefined,
  preview: { counts: Record<RetentionRule, number>; builds: DoomedBuild[] },
): RetentionPreviewDto {
  return {
    tenant_id: tenantId ?? null,
    total: preview.counts.age + preview.counts.count,
    by_rule: { ...preview.counts },
    builds: preview.builds.map((build) => ({
      id: build.id,
      tenant_id: build.tenantId,
      project_id: build.projectId,
      build_number: build.buildNumber,
      completed_at: build.completedAt === null ? null : build.completedAt.toISOString(),
      rule: build.rule,
    })),
  };
}
