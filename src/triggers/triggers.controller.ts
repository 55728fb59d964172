import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import {
  CreateTriggerDto,
  DeliveryListResponse,
  TriggerListResponse,
  TriggerResponse,
  TriggerWithSecretResponse,
  UpdateTriggerDto,
} from './dto/trigger.dto.js';
import { TriggersService } from './triggers.service.js';

/** A project's triggers (docs/build-on-push.md): `trigger:manage`, the tenant admin's. */
@ApiTags('triggers')
@ApiTenantScoped()
@Controller()
export class TriggersController {
  constructor(private readonly triggers: TriggersService) {}

  @Get('projects/:id/triggers')
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: "List a project's triggers",
    description:
      'The triggers of a project of the tenant in X-Tenant-ID (`trigger:manage`), without their secrets.',
  })
  @ApiErrors(200, { type: TriggerListResponse, description: 'The triggers' }, [400, 401, 403, 429])
  async list(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) projectId: string,
  ): Promise<TriggerListResponse> {
    return { triggers: await this.triggers.list(tenant.tenantId, projectId) };
  }

  @Post('projects/:id/triggers')
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: 'Create a trigger',
    description:
      'What git events of the project build what. The answer carries the webhook secret, shown this once, and the webhook URL to paste into the git host.',
  })
  @ApiErrors(
    201,
    { type: TriggerWithSecretResponse, description: 'The trigger, with its secret' },
    [400, 401, 403, 409, 429],
    { 409: 'The project has a trigger of that name' },
  )
  create(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) projectId: string,
    @Body() body: CreateTriggerDto,
  ): Promise<TriggerWithSecretResponse> {
    return this.triggers.create(tenant.tenantId, tenant.userId, projectId, body);
  }

  @Get('triggers/:id')
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: 'Get a trigger',
    description: 'A trigger, without its secret, and why its last poll failed, if it did.',
  })
  @ApiErrors(200, { type: TriggerResponse, description: 'The trigger' }, [400, 401, 403, 404, 429])
  get(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<TriggerResponse> {
    return this.triggers.get(tenant.tenantId, id);
  }

  @Patch('triggers/:id')
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: 'Change a trigger',
    description:
      'What is sent changes; the secret stays (rotate it with POST /triggers/{id}/secret).',
  })
  @ApiErrors(
    200,
    { type: TriggerResponse, description: 'The trigger' },
    [400, 401, 403, 404, 409, 429],
  )
  update(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Body() body: UpdateTriggerDto,
  ): Promise<TriggerResponse> {
    return this.triggers.update(tenant.tenantId, id, body);
  }

  @Post('triggers/:id/secret')
  @HttpCode(200)
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: "Rotate a trigger's webhook secret",
    description: 'A new secret, shown this once; deliveries signed with the old one are refused.',
  })
  @ApiErrors(
    200,
    { type: TriggerWithSecretResponse, description: 'The trigger, with its new secret' },
    [400, 401, 403, 404, 429],
  )
  rotateSecret(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<TriggerWithSecretResponse> {
    return this.triggers.rotateSecret(tenant.tenantId, id);
  }

  @Delete('triggers/:id')
  @HttpCode(204)
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: 'Delete a trigger',
    description: 'Its builds stay, and still name it.',
  })
  @ApiNoContentResponse({ description: 'Deleted' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 429])
  async remove(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<void> {
    await this.triggers.remove(tenant.tenantId, id);
  }

  @Get('triggers/:id/deliveries')
  @RequirePermission('trigger:manage')
  @ApiOperation({
    summary: "A trigger's recent deliveries",
    description:
      'The newest 100 webhook deliveries and polled changes, newest first, each with its outcome: built, filtered, duplicate, refused, failed, or pending while its build is made.',
  })
  @ApiErrors(
    200,
    { type: DeliveryListResponse, description: 'The deliveries' },
    [400, 401, 403, 404, 429],
  )
  async deliveries(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
  ): Promise<DeliveryListResponse> {
    return { deliveries: await this.triggers.deliveries(tenant.tenantId, id) };
  }
}
