import { Module } from '@nestjs/common';
import { AuditEventsRepository } from './audit-events.repository.js';
import { AuditLog } from './audit-log.js';
import { AuditReader } from './audit-reader.js';

/**
 * The audit log without HTTP (docs/adr/0049-audit-log.md): the store and the logger that records
 * an event. The API records its calls through it (src/audit-http/), kiln-admin its commands.
 */
@Module({
  providers: [AuditEventsRepository, AuditLog, AuditReader],
  exports: [AuditEventsRepository, AuditLog, AuditReader],
})
export class AuditModule {}
