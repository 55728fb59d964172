import { Body, Controller, Delete, Get, HttpCode, Param, Put } from '@nestjs/common';
import {
  ApiBody,
  ApiNoContentResponse,
  ApiOperation,
  ApiParam,
  ApiTags,
} from '../common/openapi-decorators.js';
import { TenantAdmissionSettings } from '../admission/tenant-settings.repository.js';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { withoutCredentialsDeep } from '../common/url-credentials.js';
import { IntegrationsService } from '../integrations/integrations.service.js';
import { REGISTRY_TYPES, SECRET_MANAGER_TYPES } from '../manifest/types.js';
import {
  AdmissionSettingsDto,
  RegistryListDto,
  RegistrySettingsDto,
  SecretManagerListDto,
  SecretManagerSettingsDto,
} from './settings.dto.js';

/** A stored record as the API shows it: never a credential (URLs lose any userinfo). */
const shown = (record: { type: string; settings: object; updatedAt: Date }) => ({
  type: record.type,
  settings: withoutCredentialsDeep(record.settings) as Record<string, unknown>,
  updated_at: record.updatedAt.toISOString(),
});

const SETTINGS_BODY = {
  schema: { type: 'object', additionalProperties: true },
  description:
    'The settings of this type (docs/secret-managers-and-registries.md), checked as the admin CLI checks them: secret references and file paths, never a credential; URLs without userinfo.',
} as const;

/**
 * The tenant's settings (`settings:manage`, its admins): where its secret manager and registries
 * are and which secret references kiln authenticates with, and its place in admission (read
 * here; installation administrators set it, TenantAdmissionController).
 */
@ApiTags('settings')
@ApiTenantScoped()
@Controller('settings')
export class SettingsController {
  constructor(
    private readonly integrations: IntegrationsService,
    private readonly admission: TenantAdmissionSettings,
  ) {}

  @Get('secret-managers')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "List the tenant's secret managers",
    description:
      'Where build secrets and credentials written as references (vault:…, aws:…, azure:…) are resolved (`settings:manage`).',
  })
  @ApiErrors(200, { type: SecretManagerListDto, description: 'By type' }, [400, 401, 403, 429])
  async secretManagers(@CurrentTenant() tenant: TenantContext): Promise<SecretManagerListDto> {
    return {
      secret_managers: (await this.integrations.secretManagers(tenant.tenantId)).map(shown),
    };
  }

  @Put('secret-managers/:type')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: 'Set a secret manager',
    description:
      "Sets the tenant's settings of this type, replacing any before (`settings:manage`). Builds that start from then on resolve references with them.",
  })
  @ApiParam({ name: 'type', enum: SECRET_MANAGER_TYPES })
  @ApiBody(SETTINGS_BODY)
  @ApiErrors(
    200,
    { type: SecretManagerSettingsDto, description: 'The settings now' },
    [400, 401, 403, 429],
  )
  async setSecretManager(
    @CurrentTenant() tenant: TenantContext,
    @Param('type') type: string,
    @Body() body: unknown,
  ): Promise<SecretManagerSettingsDto> {
    return shown(await this.integrations.setSecretManager(tenant.tenantId, type, body));
  }

  @Delete('secret-managers/:type')
  @HttpCode(204)
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: 'Remove a secret manager',
    description:
      "Removes the tenant's settings of this type (`settings:manage`): builds whose references need it fail to start from then on, saying so.",
  })
  @ApiParam({ name: 'type', enum: SECRET_MANAGER_TYPES })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 429], {
    404: 'The tenant has no settings of this type',
  })
  async removeSecretManager(
    @CurrentTenant() tenant: TenantContext,
    @Param('type') type: string,
  ): Promise<void> {
    await this.integrations.removeSecretManager(tenant.tenantId, type);
  }

  @Get('registries')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "List the tenant's registries",
    description:
      'The registries builds push to with settings of their own: address and the secret references of the credentials (`settings:manage`).',
  })
  @ApiErrors(200, { type: RegistryListDto, description: 'By type' }, [400, 401, 403, 429])
  async registries(@CurrentTenant() tenant: TenantContext): Promise<RegistryListDto> {
    return { registries: (await this.integrations.registries(tenant.tenantId)).map(shown) };
  }

  @Put('registries/:type')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: 'Set a registry',
    description:
      "Sets the tenant's registry of this type, replacing any before (`settings:manage`).",
  })
  @ApiParam({ name: 'type', enum: REGISTRY_TYPES })
  @ApiBody(SETTINGS_BODY)
  @ApiErrors(
    200,
    { type: RegistrySettingsDto, description: 'The settings now' },
    [400, 401, 403, 429],
  )
  async setRegistry(
    @CurrentTenant() tenant: TenantContext,
    @Param('type') type: string,
    @Body() body: unknown,
  ): Promise<RegistrySettingsDto> {
    return shown(await this.integrations.setRegistry(tenant.tenantId, type, body));
  }

  @Delete('registries/:type')
  @HttpCode(204)
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: 'Remove a registry',
    description: "Removes the tenant's registry of this type (`settings:manage`).",
  })
  @ApiParam({ name: 'type', enum: REGISTRY_TYPES })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 429], {
    404: 'The tenant has no registry of this type',
  })
  async removeRegistry(
    @CurrentTenant() tenant: TenantContext,
    @Param('type') type: string,
  ): Promise<void> {
    await this.integrations.removeRegistry(tenant.tenantId, type);
  }

  @Get('admission')
  @RequirePermission('settings:manage')
  @ApiOperation({
    summary: "Read the tenant's place in admission",
    description:
      "Its weight in the fair share of build slots and its own limit on running builds (`settings:manage`). Installation administrators set them (PATCH /tenants/{id}/admission): a tenant's admins do not choose their own share of the installation.",
  })
  @ApiErrors(200, { type: AdmissionSettingsDto, description: 'The settings' }, [400, 401, 403, 429])
  async admissionSettings(@CurrentTenant() tenant: TenantContext): Promise<AdmissionSettingsDto> {
    return toAdmission(await this.admission.get(tenant.tenantId));
  }
}

export function toAdmission(settings: {
  tenantId: string;
  weight: number;
  maxRunning: number | null;
}): AdmissionSettingsDto {
  return {
    tenant_id: settings.tenantId,
    weight: settings.weight,
    max_running: settings.maxRunning,
  };
}
