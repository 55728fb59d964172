import { Controller, Get } from '@nestjs/common';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { ProjectListResponse, ProjectsService, toProjectResponse } from './projects.service.js';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';

@ApiTags('projects')
@ApiTenantScoped()
@Controller('projects')
export class ProjectsController {
  constructor(private readonly projects: ProjectsService) {}

  /** The tenant's projects, for choosing where a build goes. */
  @Get()
  @RequirePermission('build:list')
  @ApiOperation({
    summary: "List the tenant's projects",
    description:
      'The projects of the tenant in X-Tenant-ID, for choosing where a build goes (`build:list`).',
  })
  @ApiErrors(
    200,
    { type: ProjectListResponse, description: "The tenant's projects" },
    [400, 401, 403, 429],
  )
  async list(@CurrentTenant() tenant: TenantContext): Promise<ProjectListResponse> {
    return { projects: (await this.projects.list(tenant.tenantId)).map(toProjectResponse) };
  }
}
