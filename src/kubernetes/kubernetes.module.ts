import { Module } from '@nestjs/common';
import { KilnConfig } from '../config/config.js';
import { Metrics } from '../metrics/metrics.js';
import { KubeClient } from './kube-client.js';

/**
 * The Kubernetes connection from KilnConfig.kube: a kubeconfig file or the pod's service account.
 * Null when neither was found (KILN_RUNNER=local needs none); client-node connects lazily, so
 * providing it costs nothing until a request is made. Every request it makes is counted in
 * kiln_kube_api_requests_total.
 */
@Module({
  providers: [
    {
      provide: KubeClient,
      inject: [KilnConfig, Metrics],
      useFactory: (config: KilnConfig, metrics: Metrics): KubeClient | null => {
        const userAgent = config.role === 'all' ? 'kiln' : `kiln-${config.role}`;
        switch (config.kube.kind) {
          case 'file':
            return KubeClient.connect({ kind: 'file', path: config.kube.path }, userAgent, metrics);
          case 'cluster':
            return KubeClient.connect({ kind: 'cluster' }, userAgent, metrics);
          case 'none':
            return null;
        }
      },
    },
  ],
  exports: [KubeClient],
})
export class KubernetesModule {}
