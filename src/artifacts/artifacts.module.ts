import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { BuildArtifactsRepository } from './artifacts.repository.js';
import { BuildArtifacts } from './build-artifacts.js';

/**
 * The results of the steps after the image (SBOM, scan) and the scan policy gate: the store the
 * runners and the operator use. The HTTP routes are ArtifactsHttpModule's.
 */
@Module({
  imports: [LifecycleModule, LogsModule],
  providers: [BuildArtifactsRepository, BuildArtifacts],
  exports: [BuildArtifacts],
})
export class ArtifactsModule {}
