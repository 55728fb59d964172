import { type DynamicModule, Module, type Provider, type Type } from '@nestjs/common';
import { AdmissionModule } from '../admission/admission.module.js';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { KilnConfig } from '../config/config.js';
import { BuildAccessModule } from '../integrations/integrations.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { ProvenanceModule } from '../provenance/provenance.module.js';
import { S3ImageStore } from '../registries/s3-upload.js';
import { BuildRunner } from './build-runner.js';
import { DockerfileExecutor } from './local/executors/dockerfile.executor.js';
import { PackExecutor } from './local/executors/pack.executor.js';
import { PackerExecutor } from './local/executors/packer.executor.js';
import { S3_STORES, type S3Stores } from './local/executors/s3-stores.js';
import { StepsExecutor } from './local/executors/steps.executor.js';
import { LayerCaches } from './local/layer-caches.js';
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
  LayerCaches,
  DockerfileExecutor,
  PackExecutor,
  PackerExecutor,
  StepsExecutor,
  { provide: BuildRunner, useClass: LocalRunner },
];

/** What any runner may inject besides the port: the modules a local build and its steps use. */
const RUNNER_IMPORTS = [
  AdmissionModule,
  LifecycleModule,
  LogsModule,
  ArtifactsModule,
  BuildAccessModule,
  ProvenanceModule,
];

/**
 * The Kubernetes connection, imported only when KILN_RUNNER=kubernetes: it brings
 * @kubernetes/client-node, which the local runner's process never loads
 * (docs/adr/0051-api-role-memory.md).
 */
async function kubernetesModule(): Promise<Type> {
  const { KubernetesModule } = await import('../kubernetes/kubernetes.module.js');
  return KubernetesModule;
}

/**
 * Binds the BuildRunner port to the one runner the configuration picks, and instantiates no
 * other: KILN_RUNNER=local → LocalRunner (with the modules it builds on: the log store, the
 * artifacts its SBOM and scan steps store, BuildAccess); kubernetes → KubernetesRunner (Build
 * resources the operator reconciles), loaded then and only then. Tests pass their own runner
 * class, given the Kubernetes connection only with KILN_RUNNER=kubernetes. Global, so
 * BuildsModule injects the port without knowing the runner; composed once, by the roles that
 * start builds (app.module.ts, apiModules). Runners read only a build's spec: no feature of the
 * API.
 */
@Module({})
export class RunnersModule {
  static async forRoot(
    config: Pick<KilnConfig, 'runner'>,
    runner?: Type<BuildRunner>,
  ): Promise<DynamicModule> {
    const kubernetes = config.runner === 'kubernetes';
    let bound: Pick<DynamicModule, 'imports' | 'providers'>;
    if (runner !== undefined) {
      bound = {
        imports: [...RUNNER_IMPORTS, ...(kubernetes ? [await kubernetesModule()] : [])],
        providers: [{ provide: BuildRunner, useClass: runner }],
      };
    } else if (!kubernetes) {
      bound = { imports: RUNNER_IMPORTS, providers: LOCAL_RUNNER };
    } else {
      const { KubernetesRunner } = await import('./kubernetes/kubernetes.runner.js');
      bound = {
        imports: [await kubernetesModule()],
        providers: [{ provide: BuildRunner, useClass: KubernetesRunner }],
      };
    }
    return { module: RunnersModule, global: true, ...bound, exports: [BuildRunner] };
  }
}
