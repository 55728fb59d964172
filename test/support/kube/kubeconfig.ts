import { writeFileSync } from 'node:fs';

/** Where a kubeconfig points: a URL, or a server (the double) with its CA and token when it has them. */
export type KubeconfigTarget = string | { url: string; caPem?: string; token?: string };

/**
 * A kubeconfig for kubectl (and client-node's loadFromFile) pointing at the double. For an https
 * server with a CA (`KubeApiServer.start({ tls: true })`) it carries `certificate-authority-data`,
 * so clients verify the certificate; for http it says `insecure-skip-tls-verify`, since
 * client-node refuses http:// servers otherwise (kubectl ignores it for http).
 */
export function kubeconfigYaml(
  target: KubeconfigTarget,
  namespace = 'default',
  token?: string,
): string {
  const { url, caPem, token: serverToken } = typeof target === 'string' ? { url: target } : target;
  if (caPem !== undefined && !url.startsWith('https://'))
    throw new Error(`a CA makes no sense for ${url}`);
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: kiln-double',
    '    cluster:',
    `      server: ${url}`,
    caPem !== undefined
      ? `      certificate-authority-data: ${Buffer.from(caPem).toString('base64')}`
      : '      insecure-skip-tls-verify: true',
    'users:',
    '  - name: kiln-double',
    '    user:',
    `      token: ${token ?? serverToken ?? 'kiln-double'}`,
    'contexts:',
    '  - name: kiln-double',
    '    context:',
    '      cluster: kiln-double',
    '      user: kiln-double',
    `      namespace: ${namespace}`,
    'current-context: kiln-double',
    '',
  ].join('\n');
}

export function writeKubeconfig(
  path: string,
  target: KubeconfigTarget,
  namespace = 'default',
  token?: string,
): string {
  writeFileSync(path, kubeconfigYaml(target, namespace, token), { mode: 0o600 });
  return path;
}
