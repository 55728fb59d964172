import { Module } from '@nestjs/common';
import { AdmissionModule } from '../admission/admission.module.js';
import { ArtifactsModule } from '../artifacts/artifacts.module.js';
import { BuildAccessModule } from '../integrations/integrations.module.js';
import { ProvenanceModule } from '../provenance/provenance.module.js';
import { KubernetesModule } from '../kubernetes/kubernetes.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { BuildOperator } from './build-operator.js';

/**
 * The operator's part of the process (KILN_ROLE=operator or all): the reconcile loop that turns
 * Build resources into Jobs and their pods' logs into the log store. It mounts no HTTP route.
 */
@Module({
  imports: [
    AdmissionModule,
    KubernetesModule,
    LifecycleModule,
    LogsModule,
    ArtifactsModule,
    BuildAccessModule,
    ProvenanceModule,
  ],
  providers: [BuildOperator],
  exports: [BuildOperator],
})
export class OperatorModule {}
