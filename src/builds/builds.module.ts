import { Module } from '@nestjs/common';
import { AdmissionModule } from '../admission/admission.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ProjectsModule } from '../projects/projects.module.js';
import { BuildsController } from './builds.controller.js';
import { BuildsService } from './builds.service.js';

/**
 * The builds API. BuildsService injects the BuildRunner port without knowing which runner serves
 * it: the role's composition binds one (RunnersModule.forRoot in app.module.ts).
 */
@Module({
  imports: [AdmissionModule, LifecycleModule, ProjectsModule],
  controllers: [BuildsController],
  providers: [BuildsService],
  // Triggers make builds through the same use cases (docs/adr/0053-triggers.md).
  exports: [BuildsService],
})
export class BuildsModule {}
