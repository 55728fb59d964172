// Summarises a V8 CPU profile (.cpuprofile, as `node --cpu-prof` writes it): self time by
// function and by package, as shares of the samples taken in a window. V8 stamps samples in µs
// of CLOCK_MONOTONIC, the clock process.hrtime reads in every process on the machine, so a window
// measured by another process (the load generator) selects the samples taken while it ran.
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** Frames without a script: V8's builtins and Node's C++ bindings (writev: the socket writes). */
const NATIVE = 'native (builtins, C++ bindings)';
/** V8's pseudo-functions: no JavaScript ran in them. */
const IDLE = '(idle)';
const V8_PSEUDO = new Set(['(program)', '(garbage collector)', '(root)']);

/** The profile `node --cpu-prof` wrote for process `pid` in `dir` (its name carries the pid). */
export async function readCpuProfileOf(dir, pid) {
  const name = (await readdir(dir)).find(
    (entry) => entry.endsWith('.cpuprofile') && entry.split('.').includes(String(pid)),
  );
  if (name === undefined) throw new Error(`no .cpuprofile of process ${pid} in ${dir}`);
  const path = `${dir}/${name}`;
  return { path, profile: JSON.parse(await readFile(path, 'utf8')) };
}

/**
 * Which package a call frame's code belongs to: `node_modules/<pkg>` (the innermost, so a
 * dependency of a dependency counts as itself), `node: internals`, `kiln (dist/)` for code under
 * `<root>/dist/`, native code, or V8's own buckets (idle, program, garbage collector).
 */
export function packageOf(callFrame, root) {
  const { url, functionName } = callFrame;
  if (url === '') {
    if (functionName === IDLE) return 'idle';
    if (V8_PSEUDO.has(functionName)) return `v8: ${functionName}`;
    return NATIVE;
  }
  if (url.startsWith('node:')) return 'node: internals';
  const path = url.startsWith('file:') ? fileURLToPath(url) : url;
  const at = path.lastIndexOf('/node_modules/');
  if (at >= 0) {
    const parts = path.slice(at + '/node_modules/'.length).split('/');
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
  }
  if (path.startsWith(`${root}/dist/`)) return 'kiln (dist/)';
  return 'other';
}

/** Buckets that are not a library (with V8's own, `v8: …`). */
const NOT_LIBRARIES = new Set(['idle', 'node: internals', 'kiln (dist/)', 'other', NATIVE]);

/** Whether a package is a library: code from node_modules, not kiln's, Node's or V8's. */
export function isLibrary(pkg) {
  return !NOT_LIBRARIES.has(pkg) && !pkg.startsWith('v8: ');
}

/** `name file:line` of a frame, the file relative to its package or root. */
function functionLabel(callFrame, root) {
  const name = callFrame.functionName || '(anonymous)';
  const { url } = callFrame;
  if (url === '') return name;
  let file = url.startsWith('file:') ? fileURLToPath(url) : url;
  const at = file.lastIndexOf('/node_modules/');
  if (at >= 0) file = file.slice(at + '/node_modules/'.length);
  else if (file.startsWith(`${root}/`)) file = file.slice(root.length + 1);
  return `${name} ${file}:${callFrame.lineNumber + 1}`;
}

/**
 * Self samples of the profile between fromUs and toUs (CLOCK_MONOTONIC µs), by function and by
 * package, most first. Shares are of all samples in the window (`samples`); `busy` excludes
 * V8's idle samples, the time the process waited for I/O.
 */
export function summariseCpuProfile(profile, { fromUs, toUs, root }) {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const selfCounts = new Map();
  let t = profile.startTime;
  let samples = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    if (t < fromUs || t > toUs) continue;
    samples++;
    const id = profile.samples[i];
    selfCounts.set(id, (selfCounts.get(id) ?? 0) + 1);
  }
  const byFunction = new Map();
  const byPackage = new Map();
  let idle = 0;
  for (const [id, count] of selfCounts) {
    const frame = frames.get(id);
    const pkg = packageOf(frame, root);
    if (pkg === 'idle') idle += count;
    const label = functionLabel(frame, root);
    const entry = byFunction.get(label) ?? { label, pkg, samples: 0 };
    entry.samples += count;
    byFunction.set(label, entry);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + count);
  }
  const share = (count) => (samples === 0 ? 0 : (100 * count) / samples);
  const busy = samples - idle;
  const busyShare = (count) => (busy === 0 ? 0 : (100 * count) / busy);
  const functions = [...byFunction.values()]
    .map((entry) => ({
      ...entry,
      share: share(entry.samples),
      busyShare: busyShare(entry.samples),
    }))
    .sort((a, b) => b.samples - a.samples);
  const packages = [...byPackage.entries()]
    .map(([pkg, count]) => ({ pkg, samples: count, share: share(count) }))
    .sort((a, b) => b.samples - a.samples);
  return {
    samples,
    busy,
    idleShare: share(idle),
    functions,
    packages,
    /** The library function with the most self time, as a share of busy samples. */
    topLibraryFunction: functions.find((entry) => isLibrary(entry.pkg)),
  };
}
