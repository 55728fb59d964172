import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeApiServer } from './api-server.js';
import type { ContainerScript } from './kubelet.js';
import { writeKubeconfig } from './kubeconfig.js';

/**
 * `npm run kube:double -- --port 6443 [--tls] [--token t] [--crds dir]... [--scripts file]
 * [--kueue]`: the double, standalone, for people. `--tls` serves HTTPS with a CA made at start,
 * and the kubeconfig carries that CA (also written to <kubeconfig>-ca.crt, for curl --cacert).
 * `--scripts` names a JSON object mapping image references (a repository without tag or digest
 * applies to all of its tags and digests) to what the fake kubelet's containers of that image do
 * (ContainerScript: `lines`, `linesPerSecond`, `exitCode`, `oomKilled`, `evict`, `hang`, `runMs`,
 * `printCrc`). `--kueue` installs Kueue's CRDs and runs the fake Kueue (kueue.ts).
 */
export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: '6443' },
      host: { type: 'string', default: '127.0.0.1' },
      crds: { type: 'string', multiple: true },
      kubeconfig: { type: 'string' },
      namespace: { type: 'string', default: 'default' },
      tls: { type: 'boolean', default: false },
      token: { type: 'string' },
      scripts: { type: 'string' },
      kueue: { type: 'boolean', default: false },
      // kubectl's typed commands (`kubectl create namespace`) send protobuf, which the double
      // refuses with 415: name the namespaces here (or `kubectl apply -f` a Namespace as YAML).
      namespaces: { type: 'string', default: 'default,kube-system,kube-public,kube-node-lease' },
    },
  });
  const crdDirectories = (values.crds ?? ['test/support/kube/fixtures']).map((d) => resolve(d));
  const double = await KubeApiServer.start({
    port: Number(values.port),
    host: values.host,
    crdDirectories,
    bookmarkIntervalMs: 10_000,
    namespaces: [...new Set([...values.namespaces.split(','), values.namespace])].filter(Boolean),
    tls: values.tls,
    kueue: values.kueue,
    ...(values.token !== undefined ? { token: values.token } : {}),
  });
  if (values.scripts !== undefined) {
    const scripts = JSON.parse(readFileSync(resolve(values.scripts), 'utf8')) as Record<
      string,
      ContainerScript
    >;
    for (const [image, script] of Object.entries(scripts)) double.kubelet.script(image, script);
  }
  const path = values.kubeconfig
    ? resolve(values.kubeconfig)
    : join(mkdtempSync(join(tmpdir(), 'kube-double-')), 'kubeconfig');
  writeKubeconfig(path, double, values.namespace);
  let caLine = '';
  if (double.caPem !== undefined) {
    const caPath = `${path}-ca.crt`;
    writeFileSync(caPath, double.caPem);
    caLine = `ca: ${caPath}\n`;
  }
  process.stdout.write(
    `kube double listening on ${double.url} (CRDs from ${crdDirectories.join(', ')})\n` +
      caLine +
      `kubeconfig: ${path}\n` +
      `try: KUBECONFIG=${path} kubectl get builds\n`,
  );
  const stop = (): void => {
    void double.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
