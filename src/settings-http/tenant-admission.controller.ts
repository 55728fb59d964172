import { Body, Controller, Get, Param, Patch } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { TenantAdmissionSettings } from '../admission/tenant-settings.repository.js';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { TenancyService } from '../auth/tenancy.service.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { toAdmission } from './settings.controller.js';
import { AdmissionChangeDto, AdmissionSettingsDto } from './settings.dto.js';

/**
 * A tenant's weight in the fair share and its own limit on running builds (docs/admission.md):
 * the installation's to decide (`system:admin`), never the tenant's own admins'.
 */
@ApiTags('admin')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('tenants/:id/admission')
export class TenantAdmissionController {
  constructor(
    private readonly tenancy: TenancyService,
    private readonly admission: TenantAdmissionSettings,
  ) {}

  @Get()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: "Read a tenant's place in admission",
    description: 'Its weight and its own limit on running builds (`system:admin`).',
  })
  @ApiErrors(
    200,
    { type: AdmissionSettingsDto, description: 'The settings' },
    [400, 401, 403, 404, 429],
  )
  async get(@Param('id', UuidParamPipe) id: string): Promise<AdmissionSettingsDto> {
    const tenant = await this.tenancy.resolveTenant(id);
    return toAdmission(await this.admission.get(tenant.id));
  }

  @Patch()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: "Change a tenant's place in admission",
    description:
      "Sets the tenant's weight in the fair share of build slots and its own limit on running builds (`system:admin`); `max_running: null` restores the installation's KILN_TENANT_MAX_RUNNING. The next admission pass uses them.",
  })
  @ApiErrors(
    200,
    { type: AdmissionSettingsDto, description: 'The settings now' },
    [400, 401, 403, 404, 429],
  )
  async change(
    @Param('id', UuidParamPipe) id: string,
    @Body() body: AdmissionChangeDto,
  ): Promise<AdmissionSettingsDto> {
    return toAdmission(
      await this.admission.set(id, { weight: body.weight, maxRunning: body.max_running }),
    );
  }
}
