import { Module } from '@nestjs/common';
import { ArtifactsController, ArtifactUploadsController } from './artifacts.controller.js';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';

/** GET /builds/{id}/sbom|scan for users, PUT for the build's pod (mounted under /api/v1). */
@Module({
  imports: [ArtifactsModule],
  controllers: [ArtifactsController, ArtifactUploadsController],
})
export class ArtifactsHttpModule {}
