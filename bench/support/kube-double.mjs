// The Kubernetes API server double (test/support/kube/, TypeScript) for plain-node benches: the
// same transpile step as scripts/kube-double.cjs (@swc/core, no type check) into
// node_modules/.cache/kube-double/, then the modules are imported from there. Each file is written
// to a temporary name and renamed, so a `npm run kube:double` running at the same time never reads
// half a file.
import { mkdirSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import swc from '@swc/core';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function transpile() {
  const source = join(ROOT, 'test/support/kube');
  const out = join(ROOT, 'node_modules/.cache/kube-double');
  mkdirSync(out, { recursive: true });
  const put = (name, text) => {
    const temporary = join(out, `.${name}.${process.pid}.tmp`);
    writeFileSync(temporary, text);
    renameSync(temporary, join(out, name));
  };
  put('package.json', '{"type":"module"}\n');
  for (const file of readdirSync(source)) {
    if (!file.endsWith('.ts') || file.endsWith('.spec.ts') || file === 'client.ts') continue;
    const { code } = swc.transformFileSync(join(source, file), {
      jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
      module: { type: 'es6' },
    });
    put(file.replace(/\.ts$/, '.js'), code);
  }
  return out;
}

/** { KubeApiServer, writeKubeconfig } from the transpiled double. */
export async function loadKubeDouble() {
  const out = transpile();
  const { KubeApiServer } = await import(pathToFileURL(join(out, 'api-server.js')).href);
  const { writeKubeconfig } = await import(pathToFileURL(join(out, 'kubeconfig.js')).href);
  return { KubeApiServer, writeKubeconfig, crds: join(ROOT, 'crds') };
}

/**
 * The double runs its garbage collector (owner references, namespace deletion) in its own event
 * loop after every write, and each pass clones every stored object: with 1,000 Builds, their
 * Jobs and Events a pass took 1–2 s, so the double answered nothing for that long, every second
 * (kiln then lost its Lease to the double's stalls, not its own). A real cluster collects garbage
 * in kube-controller-manager, beside the API server. Nothing in these benches is deleted, so
 * nothing waits on it: this turns it off.
 */
export function withoutGarbageCollector(double) {
  double.scheduleGc = () => undefined;
}

/**
 * The double wakes every log stream of a pod for each write of its kubelet, and each wake clones
 * the pod object: at 50 pods × 2,000 lines/s that alone saturated its event loop for seconds.
 * This holds the kubelet's writes and hands them on every `ms`, one write per container (its
 * lines then share the first write's timestamp, as a container's burst of output would).
 * Returns a function that hands on what is held and stops.
 */
export function batchPodLogWrites(double, ms = 50) {
  const append = double.appendLog.bind(double);
  const held = new Map();
  const flush = () => {
    for (const { namespace, pod, container, lines, at } of held.values())
      append(namespace, pod, container, lines, at);
    held.clear();
  };
  double.appendLog = (namespace, pod, container, lines, at) => {
    const key = `${namespace}/${pod}/${container}`;
    const entry = held.get(key);
    if (entry === undefined) held.set(key, { namespace, pod, container, lines: [...lines], at });
    else entry.lines.push(...lines);
  };
  const timer = setInterval(flush, ms);
  timer.unref();
  return () => {
    clearInterval(timer);
    flush();
    double.appendLog = append;
  };
}
