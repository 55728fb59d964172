import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ProvenanceKeysModule } from '../provenance/provenance.module.js';
import {
  BuildProvenanceController,
  ProvenanceSettingsController,
  SigningKeysController,
} from './provenance.controller.js';

/** GET /builds/{id}/provenance, the signing keys and the provenance settings (under /api/v1). */
@Module({
  imports: [ProvenanceKeysModule, LifecycleModule],
  controllers: [BuildProvenanceController, SigningKeysController, ProvenanceSettingsController],
})
export class ProvenanceHttpModule {}
