import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post, Put } from '@nestjs/common';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import {
  ProjectListResponse,
  ProjectResponse,
  ProjectsService,
  toProjectResponse,
} from './projects.service.js';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { CreateProjectDto, GitCredentialsDto, UpdateProjectDto } from './project.dto.js';
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

  @Post()
  @RequirePermission('project:manage')
  @ApiOperation({
    summary: 'Create a project',
    description:
      'A project of the tenant in X-Tenant-ID (`project:manage`): its repository (no credentials in the URL) and the registry builds that name none push to.',
  })
  @ApiErrors(
    201,
    { type: ProjectResponse, description: 'The project' },
    [400, 401, 403, 409, 429],
    {
      409: 'The tenant has a project of that name',
    },
  )
  async create(
    @CurrentTenant() tenant: TenantContext,
    @Body() body: CreateProjectDto,
  ): Promise<ProjectResponse> {
    return toProjectResponse(
      await this.projects.create(
        tenant.tenantId,
        body.name,
        body.git_repository_url,
        body.default_registry,
      ),
    );
  }

  @Get(':id')
  @RequirePermission('build:list')
  @ApiOperation({ summary: 'Get a project', description: '`build:list`, like the list.' })
  @ApiErrors(200, { type: ProjectResponse, description: 'The project' }, [400, 401, 403, 404, 429])
  async get(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<ProjectResponse> {
    return toProjectResponse(await this.projects.get(tenant.tenantId, id));
  }

  @Patch(':id')
  @RequirePermission('project:manage')
  @ApiOperation({
    summary: 'Change a project',
    description:
      'Changes what the body names (`project:manage`); null removes the repository or the default registry. Builds created before keep the spec they were created with.',
  })
  @ApiErrors(
    200,
    { type: ProjectResponse, description: 'The project' },
    [400, 401, 403, 404, 409, 429],
    { 409: 'Another project of the tenant has that name' },
  )
  async update(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Body() body: UpdateProjectDto,
  ): Promise<ProjectResponse> {
    return toProjectResponse(
      await this.projects.update(tenant.tenantId, id, {
        name: body.name,
        gitRepositoryUrl: body.git_repository_url,
        defaultRegistry: body.default_registry,
      }),
    );
  }

  @Delete(':id')
  @HttpCode(204)
  @RequirePermission('project:manage')
  @ApiOperation({
    summary: 'Delete a project that has no build',
    description:
      'Deletes the project (`project:manage`). 409 while it has builds: delete them first, so that their logs and runner resources go through the delete of each build.',
  })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 409, 429], {
    409: 'The project still has builds',
  })
  async remove(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<void> {
    await this.projects.remove(tenant.tenantId, id);
  }

  @Get(':id/git-credentials')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Read a project's git credentials",
    description:
      'The user name and the secret reference of the password builds clone the repository with (`settings:manage`): references, never a credential. 404 when the project has none.',
  })
  @ApiErrors(
    200,
    { type: GitCredentialsDto, description: 'The credentials' },
    [400, 401, 403, 404, 429],
    { 404: 'No such project in this tenant, or it has no git credentials' },
  )
  async gitCredentials(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<GitCredentialsDto> {
    return this.projects.gitCredentials(tenant.tenantId, id);
  }

  @Put(':id/git-credentials')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Set a project's git credentials",
    description:
      "What builds of the project clone its repository with (`settings:manage`): a user name and a secret reference to the password or token, resolved from the tenant's secret manager when each build starts. A password itself is refused (400).",
  })
  @ApiErrors(
    200,
    { type: GitCredentialsDto, description: 'The credentials now' },
    [400, 401, 403, 404, 429],
  )
  async setGitCredentials(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Body() body: GitCredentialsDto,
  ): Promise<GitCredentialsDto> {
    await this.projects.setGitCredentials(tenant.tenantId, id, body);
    return this.projects.gitCredentials(tenant.tenantId, id);
  }

  @Delete(':id/git-credentials')
  @HttpCode(204)
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Remove a project's git credentials",
    description:
      'Builds of the project clone without credentials from then on (`settings:manage`).',
  })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 429])
  async removeGitCredentials(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<void> {
    await this.projects.setGitCredentials(tenant.tenantId, id, null);
  }
}
