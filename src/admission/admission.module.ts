import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { Admission } from './admission.js';
import { AdmissionMetrics } from './admission-metrics.js';
import { AdmissionStore } from './admission.repository.js';

/**
 * Admission for whoever starts or runs builds: the API (the queue a build waits in, the tenant's
 * room to wait), the local runner and the operator (docs/adr/0042-admission-in-postgres.md).
 */
@Module({
  imports: [LifecycleModule, LogsModule],
  providers: [AdmissionStore, Admission, AdmissionMetrics],
  exports: [Admission],
})
export class AdmissionModule {}
