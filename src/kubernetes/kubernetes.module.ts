import { Module } from '@nestjs/common';
import { KilnConfig } from '../config/config.js';
import { KubeClient } from './kube-client.js';

/**
 * The Kubernetes connection from KilnConfig.kube: a kubeconfig file or the pod's service account.
 * Null when neither was found (KILN_RUNNER=local needs none); client-node connects lazily, so
 * providing it costs nothing until a request is made.
 */
@Module({
  providers: [
    {
      provide: KubeClient,
      inject: [KilnConfig],
      useFactory: (config: KilnConfig): KubeClient | null => {
        const userAgent = config.role === 'all' ? 'kiln' : `kiln-${config.role}`;
        switch (config.kube.kind) {
          case 'file':
            return KubeClient.connect({ kind: 'file', path: config.kube.path }, userAgent);
          case 'cluster':
            return KubeClient.connect({ kind: 'cluster' }, userAgent);
          case 'none':
            return null;
        }
      },
    },
  ],
  exports: [KubeClient],
})
export class KubernetesModule {}
