import { type DynamicModule, Module, type Provider, type Type } from '@nestjs/common';
import { AdmissionModule } from '../admission/admission.module.js';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { KilnConfig } from '../config/config.js';
import { BuildAccessModule } from '../integrations/integrations.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { KubernetesModule } from '../kubernetes/kubernetes.module.js';
import { S3ImageStore } from '../registries/s3-upload.js';
import { BuildRunner } from './build-runner.js';
import { KubernetesRunner } from './kubernetes/kubernetes.runner.js';
import { DockerfileExecutor } from './local/executors/dockerfile.executor.js';
import { PackExecutor } from './local/executors/pack.executor.js';
import { PackerExecutor } from './local/executors/packer.executor.js';
import { S3_STORES, type S3Stores } from './local/executors/s3-stores.js';
import { StepsExecutor } from './local/executors/steps.executor.js';
import { LocalRunner } from './local/local.runner.js';
import { HostProcesses, Processes } from './local/processes.js';

/** The local runner and its parts: the process port, the executors, the S3 stores. */
const LOCAL_RUNNER: Provider[] = [
  { provide: Processes, useClass: HostProcesses },
  {
    provide: S3_STORES,
    inject: [KilnConfig],
    useFactory:
      (config: KilnConfig): S3Stores =>
      (target) =>
        new S3ImageStore(target, config.externalCalls),
  },
  DockerfileExecutor,
  PackExecutor,
  PackerExecutor,
  StepsExecutor,
  { provide: BuildRunner, useClass: LocalRunner },
];

/**
 * Binds the BuildRunner port to the one runner the configuration picks, and instantiates no
 * other: KILN_RUNNER=local → LocalRunner (with the modules it builds on: the log store, the
 * artifacts its SBOM and scan steps store, BuildAccess); kubernetes → KubernetesRunner (Build
 * resources the operator reconciles). Tests pass their own runner class. Global, so BuildsModule
 * injects the port without knowing the runner; composed once, by the roles that start builds
 * (app.module.ts, apiModules). Runners read only a build's spec: no feature of the API.
 */
@Module({})
export class RunnersModule {
  static forRoot(config: Pick<KilnConfig, 'runner'>, runner?: Type<BuildRunner>): DynamicModule {
    const bound: Pick<DynamicModule, 'imports' | 'providers'> =
      runner !== undefined
        ? {
            imports: [
              AdmissionModule,
              LifecycleModule,
              LogsModule,
              KubernetesModule,
              ArtifactsModule,
              BuildAccessModule,
            ],
            providers: [{ provide: BuildRunner, useClass: runner }],
          }
        : config.runner === 'local'
          ? {
              imports: [
                AdmissionModule,
                LifecycleModule,
                LogsModule,
                ArtifactsModule,
                BuildAccessModule,
              ],
              providers: LOCAL_RUNNER,
            }
          : {
              imports: [KubernetesModule],
              providers: [{ provide: BuildRunner, useClass: KubernetesRunner }],
            };
    return { module: RunnersModule, global: true, ...bound, exports: [BuildRunner] };
  }
}
