import { Module } from '@nestjs/common';
import { TenancyModule } from '../auth/tenancy.module.js';
import { RetentionAdminController, RetentionSettingsController } from './retention.controller.js';
import { RetentionRepository } from './retention.repository.js';
import { Retention } from './retention.service.js';

/**
 * Retention of finished builds (docs/adr/0050-retention.md): the policy's routes and the passes.
 * Composed with the API (mounted under /api/v1), where the runner that removes what it keeps for
 * a deleted build is bound.
 */
@Module({
  imports: [TenancyModule],
  controllers: [RetentionAdminController, RetentionSettingsController],
  providers: [RetentionRepository, Retention],
  exports: [Retention],
})
export class RetentionModule {}
