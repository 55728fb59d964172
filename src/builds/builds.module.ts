import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { ProjectsModule } from '../projects/projects.module.js';
import type { BuildRunner } from '../runners/build-runner.js';
import { RunnersModule } from '../runners/runners.module.js';
import { BuildsController } from './builds.controller.js';
import { BuildsService } from './builds.service.js';

@Module({})
export class BuildsModule {
  static forRoot(runner?: Type<BuildRunner>): DynamicModule {
    return {
      module: BuildsModule,
      imports: [LifecycleModule, ProjectsModule, RunnersModule.forRoot(runner)],
      controllers: [BuildsController],
      providers: [BuildsService],
    };
  }
}
