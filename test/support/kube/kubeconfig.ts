import { writeFileSync } from 'node:fs';

/** A kubeconfig for kubectl (and client-node's loadFromFile) pointing at the double. */
export function kubeconfigYaml(
  server: string,
  namespace = 'default',
  token = 'kiln-double',
): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: kiln-double',
    '    cluster:',
    `      server: ${server}`,
    // client-node refuses http:// servers unless TLS verification is off; kubectl ignores it for http.
    '      insecure-skip-tls-verify: true',
    'users:',
    '  - name: kiln-double',
    '    user:',
    `      token: ${token}`,
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
  server: string,
  namespace = 'default',
  token?: string,
): string {
  writeFileSync(path, kubeconfigYaml(server, namespace, token), { mode: 0o600 });
  return path;
}
