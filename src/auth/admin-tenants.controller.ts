import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Query } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiNoContentResponse,
  ApiOperation,
  ApiTags,
} from '../common/openapi-decorators.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors } from '../common/openapi.js';
import { PageQueryDto } from '../common/page-query.dto.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { CreateTenantDto, TenantDto, TenantListDto, TenantNameDto } from './dto/admin.dto.js';
import { RequirePermission } from './require-permission.decorator.js';
import { TenancyService } from './tenancy.service.js';
import { type AuthenticatedUser, CurrentUser } from './tenant-context.js';
import type { TenantEntity } from './tenant.entity.js';

const toTenant = (tenant: TenantEntity): TenantDto => ({
  id: tenant.id,
  name: tenant.name,
  created_at: tenant.createdAt.toISOString(),
});

/**
 * Every tenant of the installation, for installation administrators (`system:admin`, a flag on
 * the user, never a tenant role: docs/adr/0043-admin-api.md). No X-Tenant-ID.
 */
@ApiTags('admin')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('tenants')
export class AdminTenantsController {
  constructor(private readonly tenancy: TenancyService) {}

  @Post()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'Create a tenant',
    description:
      'Creates a tenant (`system:admin`) whose first admin is the user with `admin_email`, else the caller. That admin adds the other members (POST /api/v1/members with the new id as X-Tenant-ID).',
  })
  @ApiErrors(201, { type: TenantDto, description: 'The tenant' }, [400, 401, 403, 404, 409, 429], {
    404: 'No user has the admin_email',
    409: 'A tenant of that name exists',
  })
  async create(
    @CurrentUser() user: AuthenticatedUser,
    @Body() body: CreateTenantDto,
  ): Promise<TenantDto> {
    return toTenant(await this.tenancy.createTenantFor(body.name, user.userId, body.admin_email));
  }

  @Get()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'List every tenant',
    description: 'One page of every tenant of the installation, by name (`system:admin`).',
  })
  @ApiErrors(200, { type: TenantListDto, description: 'One page of tenants' }, [400, 401, 403, 429])
  async list(@Query() query: PageQueryDto): Promise<TenantListDto> {
    const { tenants, total } = await this.tenancy.listTenants(query.page, query.limit);
    return { tenants: tenants.map(toTenant), total, page: query.page, limit: query.limit };
  }

  @Patch(':id')
  @RequirePermission('system:admin')
  @ApiOperation({ summary: 'Rename a tenant', description: '`system:admin`.' })
  @ApiErrors(200, { type: TenantDto, description: 'The tenant' }, [400, 401, 403, 404, 409, 429], {
    409: 'Another tenant has that name',
  })
  async rename(
    @Param('id', UuidParamPipe) id: string,
    @Body() body: TenantNameDto,
  ): Promise<TenantDto> {
    return toTenant(await this.tenancy.renameTenant(id, body.name));
  }

  @Delete(':id')
  @HttpCode(204)
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'Delete a tenant that has no build',
    description:
      'Deletes the tenant with its members, projects and settings (`system:admin`). 409 while it has builds: delete them first, so that their logs and runner resources go through the delete of each build.',
  })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 409, 429], {
    409: 'The tenant still has builds',
  })
  async remove(@Param('id', UuidParamPipe) id: string): Promise<void> {
    await this.tenancy.deleteTenant(id);
  }
}
