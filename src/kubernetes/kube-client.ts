import * as k8s from '@kubernetes/client-node';

/** Where to find the cluster: an explicit server (tests, the API server double) or kubeconfig. */
export type KubeTarget =
  | { kind: 'default' }
  | { kind: 'file'; path: string }
  | { kind: 'server'; server: string; token: string; namespace: string; skipTlsVerify?: boolean };

export interface KubeServerVersion {
  readonly major: string;
  readonly minor: string;
  readonly gitVersion: string;
}

/**
 * kiln's one door to @kubernetes/client-node: nothing outside src/kubernetes/ imports it.
 * Later issues add the typed clients (Builds, Jobs, Pods, Leases) here.
 */
export class KubeClient {
  private constructor(private readonly config: k8s.KubeConfig) {}

  static connect(target: KubeTarget): KubeClient {
    const config = new k8s.KubeConfig();
    switch (target.kind) {
      case 'default':
        config.loadFromDefault();
        break;
      case 'file':
        config.loadFromFile(target.path);
        break;
      case 'server':
        config.loadFromOptions({
          clusters: [
            {
              name: 'kiln',
              server: target.server,
              // client-node refuses http:// servers unless TLS verification is off.
              skipTLSVerify: target.skipTlsVerify ?? target.server.startsWith('http://'),
            },
          ],
          users: [{ name: 'kiln', token: target.token }],
          contexts: [{ name: 'kiln', cluster: 'kiln', user: 'kiln', namespace: target.namespace }],
          currentContext: 'kiln',
        });
        break;
    }
    return new KubeClient(config);
  }

  get server(): string | undefined {
    return this.config.getCurrentCluster()?.server;
  }

  get namespace(): string {
    return this.config.getContextObject(this.config.getCurrentContext())?.namespace ?? 'default';
  }

  /** GET /version: proves the cluster answers and the credentials are accepted. */
  async serverVersion(): Promise<KubeServerVersion> {
    const info = await this.config.makeApiClient(k8s.VersionApi).getCode();
    return { major: info.major, minor: info.minor, gitVersion: info.gitVersion };
  }
}
