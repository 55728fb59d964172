import { Module } from '@nestjs/common';
import { TenantAdmissionSettings } from '../admission/tenant-settings.repository.js';
import { TenancyModule } from '../auth/tenancy.module.js';
import { IntegrationsModule } from '../integrations/integrations.module.js';
import { SettingsController } from './settings.controller.js';
import { TenantAdmissionController } from './tenant-admission.controller.js';

/**
 * A tenant's settings over HTTP (mounted under /api/v1): secret managers and registries for its
 * admins, its place in admission for installation administrators. The records and their checks
 * are IntegrationsModule's and admission's, shared with the admin CLI.
 */
@Module({
  imports: [IntegrationsModule, TenancyModule],
  providers: [TenantAdmissionSettings],
  controllers: [SettingsController, TenantAdmissionController],
})
export class SettingsHttpModule {}
