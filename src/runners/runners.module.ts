import { type DynamicModule, Module, type Type } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { BuildRunner } from './build-runner.js';
import { UnavailableRunner } from './unavailable.runner.js';

/**
 * Binds the BuildRunner port. The local and Kubernetes runners arrive with their own issues;
 * until then KILN_RUNNER selects UnavailableRunner. Tests pass their own runner class.
 */
@Module({})
export class RunnersModule {
  static forRoot(runner: Type<BuildRunner> = UnavailableRunner): DynamicModule {
    return {
      module: RunnersModule,
      imports: [LifecycleModule],
      providers: [{ provide: BuildRunner, useClass: runner }],
      exports: [BuildRunner],
    };
  }
}
