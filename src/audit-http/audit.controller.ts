import { Controller, Get, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { AuditReader } from '../audit/audit-reader.js';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import {
  AuditEventListDto,
  ListAuditQueryDto,
  ListInstallationAuditQueryDto,
} from './dto/audit.dto.js';

const FILTERS =
  'Filters: `actor` (a user id), `action`, `target_id`, `result`, `since` (inclusive) and `until` (exclusive), all optional; pages of `limit` events, newest first.';

/** The audit log of the tenant in X-Tenant-ID, for its admins (`audit:read`). */
@ApiTags('audit')
@ApiTenantScoped()
@Controller('audit')
export class AuditController {
  constructor(private readonly reader: AuditReader) {}

  @Get()
  @RequirePermission('audit:read')
  @ApiOperation({
    summary: "List the tenant's audit events",
    description: `Every state-changing call made in this tenant, succeeded, refused or failed: who, what, on which record, with what outcome, from where (\`audit:read\`, the tenant's admins). ${FILTERS}`,
  })
  @ApiErrors(
    200,
    { type: AuditEventListDto, description: 'One page of events' },
    [400, 401, 403, 429],
  )
  list(
    @CurrentTenant() tenant: TenantContext,
    @Query() query: ListAuditQueryDto,
  ): Promise<AuditEventListDto> {
    return this.reader.list({ ...filtersOf(query), tenantId: tenant.tenantId });
  }
}

/** The whole installation's audit log, for installation administrators (`system:admin`). */
@ApiTags('audit')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('audit/installation')
export class InstallationAuditController {
  constructor(private readonly reader: AuditReader) {}

  @Get()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: "List every tenant's audit events",
    description: `Every audit event of the installation: every tenant's, and those of no tenant (logins, users, tenants, kiln-admin) (\`system:admin\`). \`tenant_id\` narrows it to one tenant, or \`none\` to those of no tenant. ${FILTERS}`,
  })
  @ApiErrors(
    200,
    { type: AuditEventListDto, description: 'One page of events' },
    [400, 401, 403, 429],
  )
  list(@Query() query: ListInstallationAuditQueryDto): Promise<AuditEventListDto> {
    const tenantId =
      query.tenant_id === undefined
        ? undefined
        : query.tenant_id === 'none'
          ? null
          : query.tenant_id.toLowerCase();
    return this.reader.list({ ...filtersOf(query), tenantId });
  }
}

function filtersOf(query: ListAuditQueryDto) {
  return {
    actor: query.actor,
    action: query.action,
    targetId: query.target_id,
    result: query.result,
    since: query.since,
    until: query.until,
    page: query.page,
    limit: query.limit,
  };
}
