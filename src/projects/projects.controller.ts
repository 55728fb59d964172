import { Controller, Get } from '@nestjs/common';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { type ProjectResponse, ProjectsService, toProjectResponse } from './projects.service.js';

@Controller('projects')
export class ProjectsController {
  constructor(private readonly projects: ProjectsService) {}

  /** The tenant's projects, for choosing where a build goes. */
  @Get()
  @RequirePermission('build:list')
  async list(@CurrentTenant() tenant: TenantContext): Promise<{ projects: ProjectResponse[] }> {
    return { projects: (await this.projects.list(tenant.tenantId)).map(toProjectResponse) };
  }
}
