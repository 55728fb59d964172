import { Module } from '@nestjs/common';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { BuildAccessModule, IntegrationsModule } from '../integrations/integrations.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { ProvenanceRepository } from './provenance.repository.js';
import { ProvenanceService } from './provenance.service.js';
import { SigningKeys } from './signing-keys.js';

/**
 * The provenance store and the tenants' signing keys: what the routes (ProvenanceHttpModule)
 * read, without the registry clients the runners' ProvenanceModule brings.
 */
@Module({
  imports: [IntegrationsModule],
  providers: [ProvenanceRepository, SigningKeys],
  exports: [ProvenanceRepository, SigningKeys],
})
export class ProvenanceKeysModule {}

/**
 * Signed provenance (docs/provenance.md): the service both runners ask when a build succeeds,
 * with what it reads (the stored log, SBOM and scan) and reaches (the build's registry).
 */
@Module({
  imports: [ProvenanceKeysModule, ArtifactsModule, LogsModule, BuildAccessModule],
  providers: [ProvenanceService],
  exports: [ProvenanceService],
})
export class ProvenanceModule {}
