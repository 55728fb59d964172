import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../processes.js';
import type { ContainerScript } from './kubelet.js';
import { k8s } from './client.js';
import { kubectlWith, type KubectlRun } from './kubectl.js';

/**
 * The Kubernetes an end-to-end suite runs against. With `KUBECONFIG` set, the cluster it names
 * (the suite applies kiln's CRD and makes its namespace there, and deletes what it made);
 * without, the API server double started as a process of its own (`npm run kube:double`), so
 * the suite reaches it only as it would a cluster: through a kubeconfig, kiln's API and kubectl.
 * `scripts` say what the double's kubelet runs for each builder image; a real cluster runs the
 * real images.
 */
export interface ClusterTarget {
  readonly kind: 'KUBECONFIG' | 'double process';
  readonly kubeconfig: string;
  readonly namespace: string;
  /** The project's kubectl (scripts/kube-tools.sh) in the suite's namespace. */
  readonly kubectl: (...args: string[]) => Promise<KubectlRun>;
  /** An object of the namespace (undefined when it is not there). */
  get<T = Record<string, any>>(
    apiVersion: string,
    kind: string,
    name: string,
  ): Promise<T | undefined>;
  list<T = Record<string, any>>(apiVersion: string, kind: string): Promise<T[]>;
  /** Creates an object, as `kubectl apply` of a new one would. */
  create(object: Record<string, any>): Promise<void>;
  stop(): Promise<void>;
}

export const REAL_CLUSTER_KUBECONFIG = process.env['KUBECONFIG']?.trim() || undefined;

const CRD_FILE = 'crds/builds.kiln.dev.yaml';

export async function clusterTarget(options: {
  dir: string;
  namespace: string;
  scripts: Record<string, ContainerScript>;
}): Promise<ClusterTarget> {
  const { dir, namespace } = options;
  let kubeconfig: string;
  let stop: () => Promise<void>;
  if (REAL_CLUSTER_KUBECONFIG !== undefined) {
    kubeconfig = REAL_CLUSTER_KUBECONFIG;
    stop = () => Promise.resolve();
  } else {
    const scripts = join(dir, 'scripts.json');
    writeFileSync(scripts, JSON.stringify(options.scripts));
    kubeconfig = join(dir, 'kubeconfig');
    const double = await startDoubleProcess([
      '--port',
      String(await freePort()),
      '--crds',
      'crds',
      '--namespace',
      namespace,
      '--kubeconfig',
      kubeconfig,
      '--scripts',
      scripts,
    ]);
    stop = () => stopProcess(double);
  }
  const config = new k8s.KubeConfig();
  config.loadFromFile(kubeconfig);
  const objects = k8s.KubernetesObjectApi.makeApiClient(config);
  const target: ClusterTarget = {
    kind: REAL_CLUSTER_KUBECONFIG === undefined ? 'double process' : 'KUBECONFIG',
    kubeconfig,
    namespace,
    kubectl: (...args) => kubectlWith(kubeconfig, dir, '--namespace', namespace, ...args),
    async get(apiVersion, kind, name) {
      try {
        return (await objects.read({ apiVersion, kind, metadata: { name, namespace } })) as any;
      } catch (error) {
        if (error instanceof k8s.ApiException && error.code === 404) return undefined;
        throw error;
      }
    },
    async list(apiVersion, kind) {
      return (await objects.list(apiVersion, kind, namespace)).items as any[];
    },
    async create(object) {
      await objects.create({ ...object, metadata: { ...object['metadata'], namespace } });
    },
    stop,
  };
  if (target.kind === 'KUBECONFIG') await install(kubeconfig, dir, namespace);
  return target;
}

/** kiln's CRD (unless the cluster has it: a Helm install, or an earlier run) and the namespace. */
async function install(kubeconfig: string, dir: string, namespace: string): Promise<void> {
  const kubectl = (...args: string[]) => kubectlWith(kubeconfig, dir, ...args);
  if ((await kubectl('get', 'builds.kiln.dev', '--all-namespaces', '-o', 'name')).code !== 0) {
    ok(await kubectl('apply', '-f', CRD_FILE), 'apply the CRD');
    ok(
      await kubectl(
        'wait',
        '--for',
        'condition=established',
        '--timeout=60s',
        'crd/builds.kiln.dev',
      ),
      'wait for the CRD',
    );
  }
  // As YAML (kubectl's typed `create namespace` sends protobuf, which not every server takes).
  const manifest = join(dir, 'namespace.yaml');
  writeFileSync(manifest, `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${namespace}\n`);
  ok(await kubectl('apply', '-f', manifest), `make the namespace ${namespace}`);
}

function ok(run: KubectlRun, what: string): KubectlRun {
  if (run.code !== 0) throw new Error(`kubectl could not ${what}: ${run.stderr || run.stdout}`);
  return run;
}

/** `node scripts/kube-double.cjs …`, resolved once it prints where its kubeconfig is. */
function startDoubleProcess(args: string[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['scripts/kube-double.cjs', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the kube double did not start in 60 s:\n${output}`));
    }, 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      if (/^kubeconfig: /m.test(output)) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the kube double exited (${code}):\n${output}`));
    });
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
}

/**
 * Says, when KUBECONFIG names a cluster, that a suite runs on the in-process double all the
 * same: it injects faults through the double's hooks and scripts its kubelet, which a real
 * cluster has no equivalent of (those scenarios are chaos tests there).
 */
export function noteDoubleOnly(suite: string): void {
  if (REAL_CLUSTER_KUBECONFIG === undefined) return;
  console.warn(
    `${suite}: runs on the in-process Kubernetes API server double, not on KUBECONFIG's cluster ` +
      '(it needs the double’s fault hooks and scripted kubelet); test/operator-cluster.spec.ts ' +
      'and test/crd.spec.ts run on that cluster',
  );
}
