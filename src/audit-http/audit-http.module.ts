import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { AuditModule } from '../audit/audit.module.js';
import { AuditRetention } from '../audit/audit-retention.js';
import { TenancyModule } from '../auth/tenancy.module.js';
import { AuditController, InstallationAuditController } from './audit.controller.js';
import { AuditRecorder } from './audit-recorder.js';
import { AuditResultInterceptor } from './audit-result.interceptor.js';

/**
 * The audit log of the API (mounted under /api/v1): every state-changing call recorded
 * (AuditRecorder, installed by app.factory.ts ahead of the API's middleware), the routes that
 * read it, and its retention, which the api role applies.
 */
@Module({
  imports: [AuditModule, TenancyModule],
  providers: [
    AuditRecorder,
    AuditRetention,
    { provide: APP_INTERCEPTOR, useClass: AuditResultInterceptor },
  ],
  controllers: [AuditController, InstallationAuditController],
  exports: [AuditRecorder, AuditRetention],
})
export class AuditHttpModule {}
