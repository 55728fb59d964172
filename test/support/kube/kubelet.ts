import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { crc32 } from 'node:zlib';
import { StatusError } from './errors.js';
import type { EventNote, EventSource } from './events.js';
import type { ObjectStore, StoredEvent } from './store.js';
import { clone, isObject, type JsonObject, type KubeObject } from './types.js';

// ---- time --------------------------------------------------------------------------------------

const BASE_NS = BigInt(Date.now()) * 1_000_000n;
const BASE_HR = process.hrtime.bigint();

/** Wall-clock nanoseconds, monotonic within the process (the kubelet's CRI log timestamps). */
export const nowNanos = (): bigint => BASE_NS + (process.hrtime.bigint() - BASE_HR);

/** The kubelet's log timestamp format: RFC3339 with exactly nine fractional digits, UTC. */
export function rfc3339Nano(ns: bigint): string {
  const iso = new Date(Number(ns / 1_000_000n)).toISOString();
  return `${iso.slice(0, 19)}.${(ns % 1_000_000_000n).toString().padStart(9, '0')}Z`;
}

/** Whole-second RFC3339, as the API server writes object timestamps. */
export const rfc3339 = (ms = Date.now()): string =>
  new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

// ---- scripts -----------------------------------------------------------------------------------

/**
 * What one container does, registered per image with `double.kubelet.script(image, script)`.
 * Every field is optional: `{}` prints nothing and exits 0 at once.
 */
export interface ContainerScript {
  /**
   * A number prints `numberedLine(1, n)` … `numberedLine(n, n)`; an array prints each string and
   * a '\n', as `echo` would. A '\n' inside a string ends a line there: the log then holds what
   * `logLines` says, line by line, as if each line had been its own string.
   */
  lines?: number | string[];
  /**
   * Print rate (default 2000 lines/s), slow rates included: line i is printed i/rate seconds after
   * the first. Lines due in the same 5 ms tick are written together.
   */
  linesPerSecond?: number;
  /** Lines per write: lines of one write share one nanosecond timestamp (default 1). */
  linesPerWrite?: number;
  /** After the lines, print `crcLine(...)` over every line logged before it (each with its '\n'). */
  printCrc?: boolean;
  /** Keep running at least this long after starting (a quiet build), default 0. */
  runMs?: number;
  /**
   * The image cannot be pulled: the container stays waiting and never starts, until the pod is
   * deleted or killed by a deadline. As on a node, it waits first with reason `ErrImagePull`
   * (message: this text), then, `backOffMs` later, with `ImagePullBackOff` (message
   * `Back-off pulling image "<image>": <this text>`); the pod gets the kubelet's Events: Normal
   * `Pulling`, Warning `Failed` `Failed to pull image "<image>": <this text>`, Warning `Failed`
   * `Error: ErrImagePull`, then Normal `BackOff` `Back-off pulling image "<image>"` and Warning
   * `Failed` `Error: ImagePullBackOff`, these two again (count + 1) at each back-off step. The
   * double does not pull again after the back-off (a real node does, and shows `ErrImagePull`
   * again for a moment each time).
   */
  pullError?: string;
  /**
   * The scheduler finds no node for the pod (any container's script saying so makes the whole pod
   * unschedulable): it stays Pending without a node, with condition PodScheduled False
   * `Unschedulable` and this message (default DEFAULT_UNSCHEDULABLE_MESSAGE), and a Warning
   * `FailedScheduling` Event from `default-scheduler`. With `forMs` it is scheduled after that
   * long (a Normal `Scheduled` Event) and runs as usual; without, until it is deleted (at once:
   * a pod on no node has nothing to stop).
   */
  unschedulable?: true | string | { message?: string; forMs?: number };
  /** Never exit on its own: runs until the pod is deleted, evicted or killed by a deadline. */
  hang?: boolean;
  /** Exit code at the end (default 0). */
  exitCode?: number;
  /** End as the kernel OOM killer would: exit code 137, reason `OOMKilled`. */
  oomKilled?: boolean;
  /**
   * Evict the whole pod (after `afterLines` lines, default: after all of them): every container
   * is killed (137), the pod goes Failed with `status.reason: Evicted` and `message`.
   */
  evict?: true | { afterLines?: number; message?: string };
  /**
   * Runs after the lines, as the container's own program would (real code: the test decides):
   * it sees the container's resolved environment (values, Secret and ConfigMap keys, as the
   * real kubelet resolves them) and its volume mounts as host directories (each emptyDir one
   * directory per pod, shared by its containers; Secret and ConfigMap volumes written out as
   * files). What it returns is printed, and its exit code ends the container. What it writes to
   * the container's terminationMessagePath (a file among its mounts) becomes the terminated
   * state's `message`.
   */
  run?: (context: ContainerRunContext) => Promise<{ lines?: string[]; exitCode?: number }>;
}

/** What a `run` hook sees of its container. */
export interface ContainerRunContext {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly command: readonly string[];
  readonly args: readonly string[];
  /**
   * Unresolvable references (a missing Secret or key) are left out: optional ones always, others
   * when the kubelet ignores them (`unresolvedReferences: 'ignore'`, else the container waits).
   */
  readonly env: Readonly<Record<string, string>>;
  /**
   * mountPath → host directory; and the container's terminationMessagePath → a host file, which
   * the real kubelet bind-mounts there (its last 4096 bytes become the terminated state's
   * `message`).
   */
  readonly mounts: Readonly<Record<string, string>>;
}

/** The host file behind a path in the container, through the mount that holds it. */
export function hostPath(context: ContainerRunContext, path: string): string {
  for (const [mountPath, dir] of Object.entries(context.mounts)) {
    if (path === mountPath || path.startsWith(`${mountPath}/`))
      return join(dir, posix.relative(mountPath, path));
  }
  throw new Error(`${path} is on no volume of container ${context.container}`);
}

/** What a one-node cluster's scheduler says of a pod asking for more cpu than the node has. */
export const DEFAULT_UNSCHEDULABLE_MESSAGE =
  '0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.';

export const DEFAULT_EVICTION_MESSAGE =
  'The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 512Mi. Container build was using 10Gi, request is 0, has larger consumption of ephemeral-storage. ';

/** `registry/repo:tag@sha256:…` → `registry/repo` (a port's colon before the last slash stays). */
export function repositoryOf(image: string): string {
  const withoutDigest = image.split('@')[0] ?? image;
  const slash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.lastIndexOf(':');
  return colon > slash ? withoutDigest.slice(0, colon) : withoutDigest;
}

/** The kubelet keeps at most this much of a termination message: its end. */
const TERMINATION_MESSAGE_MAX_BYTES = 4096;
/** Where a container's termination message goes unless its spec says otherwise. */
const DEFAULT_TERMINATION_MESSAGE_PATH = '/dev/termination-log';

/**
 * The lines a node's log holds once a container printed `entries`, each followed by '\n'. The
 * double is the container runtime's CRI logger and the kubelet reading its file in one, so it
 * stores only what a real node would serve:
 *
 * - Split at every '\n'. The runtime writes one CRI entry per line, stamped when it read that
 *   line, however the container grouped its writes; the kubelet serves each entry as a line with
 *   its own timestamp, and `tailLines` and `sinceTime` pick whole entries. Kept whole, the text
 *   after a '\n' would reach a `timestamps=true` reader without a timestamp, and `tailLines` or
 *   `sinceTime` could never cut inside it. Split rather than refused: build tools print several
 *   lines in one write, and a test should be able to say so. A string holding '\n' is exactly
 *   its lines as separate strings, for the rate, `linesPerWrite`, `evict.afterLines` and
 *   `printCrc` too.
 * - An empty line (`''`, '\n\n', a string ending in '\n') stays an empty line: the runtime
 *   writes an entry with no content, served as a bare '\n' (the timestamp and a space before it
 *   with `timestamps=true`). Refusing it would hide a shape every log reader meets.
 * - One '\r' just before a line end is dropped, as containerd takes "\r\n" for the line end (the
 *   double's containerIDs say containerd; CRI-O would keep the '\r', so no test should rely on
 *   either). Any other '\r' is content, a progress bar redrawing its line: neither the runtime
 *   nor the kubelet splits there.
 * - A last line without '\n' cannot be scripted, as every string is followed by one. A node logs
 *   it as a partial entry and serves it without a line end; `pods/log` here ends every line.
 */
export function logLines(entries: string[]): string[] {
  if (!entries.some((entry) => entry.includes('\n') || entry.endsWith('\r'))) return entries;
  const lines: string[] = [];
  for (const entry of entries)
    for (const line of entry.split('\n'))
      lines.push(line.endsWith('\r') ? line.slice(0, -1) : line);
  return lines;
}

/** Line `i` of a numbered script: `line 000042 of 000100`. */
export const numberedLine = (i: number, n: number): string =>
  `line ${String(i).padStart(6, '0')} of ${String(n).padStart(6, '0')}`;

/** The final line of a `printCrc` script, over the bytes printed before it. */
export const crcLine = (lines: number, bytes: number, crc: number): string =>
  `kiln-double: lines=${lines} bytes=${bytes} crc32=${crc.toString(16).padStart(8, '0')}`;

/** The summary a `printCrc` script prints for these lines (each counted with its '\n'). */
export function summarize(lines: string[]): { lines: number; bytes: number; crc32: number } {
  let crc = 0;
  let bytes = 0;
  for (const line of lines) {
    const buffer = Buffer.from(`${line}\n`);
    crc = crc32(buffer, crc);
    bytes += buffer.length;
  }
  return { lines: lines.length, bytes, crc32: crc };
}

/** A log as received (lines without timestamps): true when its last line is its own correct CRC. */
export function verifyCrc(lines: string[]): boolean {
  const last = lines.at(-1);
  const body = lines.slice(0, -1);
  const s = summarize(body);
  return last === crcLine(s.lines, s.bytes, s.crc32);
}

// ---- the host the controllers act through -----------------------------------------------------

/** What the Job controller and the kubelet need from the API server (implemented by KubeApiServer). */
export interface ClusterHost {
  readonly store: ObjectStore;
  /** Creates a built-in object as a controller would (defaults, validation, generateName). */
  createAsController(apiVersion: string, kind: string, object: KubeObject): KubeObject;
  /** Deletes as a controller would (pods: graceful when bound to the node). */
  deleteAsController(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
    policy: 'Background' | 'Foreground' | 'Orphan',
  ): void;
  /** Removes a pod for good (the kubelet's final delete after termination). */
  removePod(namespace: string, name: string): void;
  /** Writes an Event about an object, aggregated as client-go's recorder does (events.ts). */
  recordEvent(involved: KubeObject, source: EventSource, note: EventNote): KubeObject;
  appendLog(namespace: string, pod: string, container: string, lines: string[], at?: bigint): void;
}

const PODS = '/pods';
const JOBS = 'batch/jobs';
const NODE = 'kiln-double-node';
const KUBELET: EventSource = { component: 'kubelet', host: NODE };
const SCHEDULER: EventSource = { component: 'default-scheduler' };
const JOB_CONTROLLER: EventSource = { component: 'job-controller' };

const obj = (value: unknown): JsonObject => (isObject(value) ? value : {});
const list = (value: unknown): JsonObject[] =>
  Array.isArray(value) ? value.filter((v): v is JsonObject => isObject(v)) : [];
const str = (value: unknown): string => (typeof value === 'string' ? value : '');

function controllerRef(object: KubeObject, kind: string): string | undefined {
  return (object.metadata.ownerReferences ?? []).find((r) => r.controller && r.kind === kind)?.uid;
}

function condition(type: string, status: string, reason?: string, message?: string): JsonObject {
  const now = rfc3339();
  return {
    type,
    status,
    lastProbeTime: null,
    lastTransitionTime: now,
    ...(reason !== undefined ? { reason } : {}),
    ...(message !== undefined ? { message } : {}),
  };
}

/** Sets a condition, keeping lastTransitionTime when the status did not change. */
function setCondition(conditions: JsonObject[], next: JsonObject): JsonObject[] {
  const old = conditions.find((c) => c.type === next.type);
  if (old && old.status === next.status)
    return conditions.map((c) =>
      c === old ? { ...next, lastTransitionTime: old.lastTransitionTime ?? null } : c,
    );
  return [...conditions.filter((c) => c.type !== next.type), next];
}

const isTrue = (conditions: JsonObject[], type: string): boolean =>
  conditions.some((c) => c.type === type && c.status === 'True');

class Cancelled extends Error {}

// ---- kubelet -----------------------------------------------------------------------------------

interface Termination {
  exitCode: number;
  reason: 'Completed' | 'Error' | 'OOMKilled';
  /** When the container ended; containers still running when the pod ends get the pod's end. */
  finishedAt?: string;
  /** What the container wrote to its terminationMessagePath, when anything. */
  message?: string;
}

interface PodRun {
  namespace: string;
  name: string;
  uid: string;
  abort: AbortController;
  /** Set when the pod is being killed (deletion, eviction, deadline). */
  killed?: 'deleted' | 'evicted';
  evictionMessage?: string;
  /** Bound to the node: false while the scheduler finds no place for it (`unschedulable`). */
  scheduled: boolean;
  done: boolean;
  /** Host directories of the pod's volumes, made when a `run` hook first needs them. */
  volumesDir?: string;
}

export interface FakeKubeletOptions {
  /** Pending before the first container starts (scheduling, image pull). Default 20 ms. */
  startDelayMs?: number;
  /** How long an image without a script runs (prints nothing, exits 0). Default 50 ms. */
  unknownImageRunMs?: number;
  /** A deleted pod stays (Failed, with deletionTimestamp) this long after its containers stop. Default 50 ms. */
  terminationDelayMs?: number;
  /**
   * The first back-off step of the kubelet's retries (an image pull, a container whose Secret or
   * ConfigMap is missing, a volume that cannot be mounted); each step doubles it, up to
   * `maxBackOffMs`. A node starts at 10 s and stops at 5 min. Default 100 ms.
   */
  backOffMs?: number;
  /** The longest back-off step. Default 2000 ms. */
  maxBackOffMs?: number;
  /**
   * What a reference to a Secret or ConfigMap (or a key of one) that does not exist does, unless
   * it is `optional: true`:
   *
   * - `'wait'`, as a node does: an env or envFrom reference keeps its container waiting with
   *   reason `CreateContainerConfigError` (message `secret "x" not found`, or
   *   `couldn't find key k in Secret ns/x`) and a Warning `Failed` Event `Error: <that>`; a
   *   Secret or ConfigMap volume keeps every container of the pod from being created, with
   *   Warning `FailedMount` Events `MountVolume.SetUp failed for volume "v" : secret "x" not
   *   found`. Both are retried with back-off and go on once the object or key appears.
   * - `'ignore'` (the default, the double's old shortcut): the container starts and the reference
   *   is left out, as if it were optional. Suites written against that (operator.spec.ts applies
   *   samples naming registry credentials Secrets it never creates) keep working.
   */
  unresolvedReferences?: 'wait' | 'ignore';
}

/**
 * The fake kubelet of the single node `kiln-double-node`. It runs every pod that has a controller
 * ownerReference to a Job (bare pods stay under the test's control, as before): Pending →
 * init containers in order → Running → Succeeded/Failed, each container following the script
 * registered for its image. Output goes to `pods/log` with nanosecond timestamps. It also plays
 * the scheduler (`Scheduled`, or `FailedScheduling` for an `unschedulable` script), and reports
 * as a node does, in Events on the pod: image pulls that fail, Secrets and ConfigMaps that are
 * missing (with `unresolvedReferences: 'wait'`), evictions.
 */
export class FakeKubelet {
  enabled = true;
  private readonly scripts = new Map<string, ContainerScript>();
  private readonly runs = new Map<string, PodRun>();
  private readonly options: Required<FakeKubeletOptions>;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly host: ClusterHost,
    options: FakeKubeletOptions = {},
  ) {
    this.options = {
      startDelayMs: options.startDelayMs ?? 20,
      unknownImageRunMs: options.unknownImageRunMs ?? 50,
      terminationDelayMs: options.terminationDelayMs ?? 50,
      backOffMs: options.backOffMs ?? 100,
      maxBackOffMs: options.maxBackOffMs ?? 2000,
      unresolvedReferences: options.unresolvedReferences ?? 'ignore',
    };
    this.unsubscribe = host.store.subscribe((event) => this.onEvent(event));
  }

  /**
   * Registers (or replaces) what containers of an image do: an exact reference, or a repository
   * without tag or digest (`ghcr.io/osscontainertools/kaniko`), which then applies to every tag
   * and digest of it unless an exact reference has its own script.
   */
  script(image: string, script: ContainerScript): this {
    this.scripts.set(image, {
      ...script,
      ...(Array.isArray(script.lines) ? { lines: logLines(script.lines) } : {}),
    });
    return this;
  }

  clearScripts(): void {
    this.scripts.clear();
  }

  /** Pods whose containers are still being run. */
  get runningPods(): string[] {
    return [...this.runs.values()].filter((r) => !r.done).map((r) => `${r.namespace}/${r.name}`);
  }

  /**
   * True while the kubelet runs this pod's containers (its deletion is then graceful); a pod the
   * scheduler has not placed yet is on no kubelet.
   */
  isRunning(namespace: string, name: string, uid: string): boolean {
    const run = this.runs.get(`${namespace}/${name}`);
    return run !== undefined && run.uid === uid && run.scheduled && !run.done;
  }

  /** Evicts a running pod now, as the node-pressure eviction manager would. */
  evict(namespace: string, name: string, message = DEFAULT_EVICTION_MESSAGE): boolean {
    const run = this.runs.get(`${namespace}/${name}`);
    if (!run || run.done) return false;
    this.kill(run, 'evicted', message);
    return true;
  }

  stop(): void {
    this.unsubscribe();
    for (const run of this.runs.values()) run.abort.abort();
    this.runs.clear();
  }

  private onEvent(event: StoredEvent): void {
    if (event.resource !== PODS) return;
    const pod = event.object;
    const key = `${pod.metadata.namespace ?? ''}/${pod.metadata.name ?? ''}`;
    const run = this.runs.get(key);
    if (event.type === 'DELETED') {
      if (run && run.uid === pod.metadata.uid) {
        run.abort.abort();
        this.runs.delete(key);
      }
      return;
    }
    if (run && run.uid === pod.metadata.uid) {
      if (pod.metadata.deletionTimestamp && !run.killed) this.kill(run, 'deleted');
      return;
    }
    if (!this.enabled || event.type !== 'ADDED') return;
    if (!controllerRef(pod, 'Job') && !this.runsBarePod(pod)) return;
    if (pod.metadata.deletionTimestamp) return;
    const started: PodRun = {
      namespace: pod.metadata.namespace ?? '',
      name: pod.metadata.name ?? '',
      uid: pod.metadata.uid ?? '',
      abort: new AbortController(),
      scheduled: this.unschedulable(pod) === undefined,
      done: false,
    };
    this.runs.set(key, started);
    setImmediate(() => void this.runPod(started).catch(() => undefined));
  }

  /**
   * A pod of no Job (a `helm test` hook) runs when every container's image has a script: the
   * double has no scheduler for pods in general, and tests that make bare pods of other images
   * rely on them staying Pending.
   */
  private runsBarePod(pod: KubeObject): boolean {
    const spec = obj(pod.spec);
    if (str(spec.restartPolicy) !== 'Never') return false;
    const containers = [...list(spec.initContainers), ...list(spec.containers)];
    return (
      containers.length > 0 &&
      containers.every((c) => {
        const image = str(c.image);
        return this.scripts.has(image) || this.scripts.has(repositoryOf(image));
      })
    );
  }

  private kill(run: PodRun, why: 'deleted' | 'evicted', message?: string): void {
    if (run.killed) return;
    run.killed = why;
    if (message !== undefined) run.evictionMessage = message;
    // The eviction manager tells the pod why, before its containers are stopped.
    if (why === 'evicted')
      this.podEvent(run, {
        type: 'Warning',
        reason: 'Evicted',
        message: message ?? DEFAULT_EVICTION_MESSAGE,
      });
    run.abort.abort();
  }

  /** The scheduler's verdict when a script of one of the pod's images says it finds no node. */
  private unschedulable(pod: KubeObject): { message: string; forMs?: number } | undefined {
    const spec = obj(pod.spec);
    for (const c of [...list(spec.initContainers), ...list(spec.containers)]) {
      const image = str(c.image);
      const said = (this.scripts.get(image) ?? this.scripts.get(repositoryOf(image)))
        ?.unschedulable;
      if (said === undefined) continue;
      if (said === true) return { message: DEFAULT_UNSCHEDULABLE_MESSAGE };
      if (typeof said === 'string') return { message: said };
      return {
        message: said.message ?? DEFAULT_UNSCHEDULABLE_MESSAGE,
        ...(said.forMs !== undefined ? { forMs: said.forMs } : {}),
      };
    }
    return undefined;
  }

  /** An Event about the pod of this run (none once the pod is gone or replaced). */
  private podEvent(run: PodRun, note: EventNote, source: EventSource = KUBELET): void {
    const pod = this.host.store.get(PODS, run.namespace, run.name);
    if (pod?.metadata.uid === run.uid) this.host.recordEvent(pod, source, note);
  }

  /**
   * The scheduler's part: an unschedulable pod stays Pending with PodScheduled False until its
   * `forMs` is over (false when it was deleted meanwhile); then, as for every pod, `Scheduled`.
   */
  private async schedule(run: PodRun, pod: KubeObject): Promise<boolean> {
    const verdict = this.unschedulable(pod);
    if (verdict !== undefined) {
      this.patchPod(run, (_p, status) => {
        status.phase = 'Pending';
        status.conditions = setCondition(
          list(status.conditions),
          condition('PodScheduled', 'False', 'Unschedulable', verdict.message),
        );
      });
      this.podEvent(
        run,
        { type: 'Warning', reason: 'FailedScheduling', message: verdict.message },
        SCHEDULER,
      );
      try {
        await this.sleep(run, verdict.forMs ?? 2 ** 31 - 1);
      } catch (error) {
        if (error instanceof Cancelled) return false;
        throw error;
      }
    }
    run.scheduled = true;
    this.podEvent(
      run,
      {
        type: 'Normal',
        reason: 'Scheduled',
        message: `Successfully assigned ${run.namespace}/${run.name} to ${NODE}`,
      },
      SCHEDULER,
    );
    return true;
  }

  /** Sleeps through the kubelet's back-off: `backOffMs`, doubling up to `maxBackOffMs`. */
  private async backOff(run: PodRun, step: number): Promise<number> {
    await this.sleep(run, step);
    return Math.min(step * 2, this.options.maxBackOffMs);
  }

  /**
   * Volumes whose Secret or ConfigMap (or a key its `items` name) is missing cannot be set up: no
   * container is created, and each try is a Warning `FailedMount` Event, until they appear.
   */
  private async mountVolumes(run: PodRun, spec: JsonObject): Promise<void> {
    if (this.options.unresolvedReferences === 'ignore') return;
    let step = this.options.backOffMs;
    for (;;) {
      const failures = this.volumeFailures(run, spec);
      if (failures.length === 0) return;
      for (const failure of failures)
        this.podEvent(run, { type: 'Warning', reason: 'FailedMount', message: failure });
      step = await this.backOff(run, step);
    }
  }

  private volumeFailures(run: PodRun, spec: JsonObject): string[] {
    const failures: string[] = [];
    for (const volume of list(spec.volumes)) {
      const secret = isObject(volume.secret) ? volume.secret : undefined;
      const configMap = isObject(volume.configMap) ? volume.configMap : undefined;
      const source = secret ?? configMap;
      if (source === undefined || source.optional === true) continue;
      const kind = secret ? 'secret' : 'configmap';
      const name = str(secret ? source.secretName : source.name);
      const data = this.keysOf(run, kind, name);
      const why =
        data === undefined
          ? `${kind} "${name}" not found`
          : list(source.items)
              .map((item) => str(item.key))
              .filter((key) => !data.has(key))
              .map((key) =>
                secret
                  ? `references non-existent secret key: ${key}`
                  : `configmap references non-existent config key: ${key}`,
              )[0];
      if (why !== undefined)
        failures.push(`MountVolume.SetUp failed for volume "${str(volume.name)}" : ${why}`);
    }
    return failures;
  }

  /** The keys of a Secret or ConfigMap of the pod's namespace, or undefined when it is missing. */
  private keysOf(run: PodRun, kind: 'secret' | 'configmap', name: string): Set<string> | undefined {
    const object = this.host.store.get(
      kind === 'secret' ? '/secrets' : '/configmaps',
      run.namespace,
      name,
    );
    if (object === undefined) return undefined;
    return new Set([...Object.keys(obj(object.data)), ...Object.keys(obj(object.binaryData))]);
  }

  /**
   * Why the kubelet cannot make the container's environment (the first missing Secret,
   * ConfigMap or key that is not `optional`), in its words, or undefined.
   */
  private configError(run: PodRun, container: JsonObject): string | undefined {
    if (this.options.unresolvedReferences === 'ignore') return undefined;
    const missing = (kind: 'secret' | 'configmap', name: string): string | undefined =>
      this.keysOf(run, kind, name) === undefined ? `${kind} "${name}" not found` : undefined;
    for (const from of list(container.envFrom)) {
      const secret = isObject(from.secretRef);
      if (!secret && !isObject(from.configMapRef)) continue;
      const ref = obj(secret ? from.secretRef : from.configMapRef);
      if (ref.optional === true) continue;
      const why = missing(secret ? 'secret' : 'configmap', str(ref.name));
      if (why !== undefined) return why;
    }
    for (const variable of list(container.env)) {
      const from = obj(variable.valueFrom);
      const secret = isObject(from.secretKeyRef);
      if (!secret && !isObject(from.configMapKeyRef)) continue;
      const ref = obj(secret ? from.secretKeyRef : from.configMapKeyRef);
      if (ref.optional === true) continue;
      const name = str(ref.name);
      const keys = this.keysOf(run, secret ? 'secret' : 'configmap', name);
      if (keys === undefined) return `${secret ? 'secret' : 'configmap'} "${name}" not found`;
      if (!keys.has(str(ref.key)))
        return `couldn't find key ${str(ref.key)} in ${secret ? 'Secret' : 'ConfigMap'} ${run.namespace}/${name}`;
    }
    return undefined;
  }

  /** Reads, changes and writes the pod; false when it is gone (or another pod took its name). */
  private patchPod(run: PodRun, change: (pod: KubeObject, status: JsonObject) => void): boolean {
    const pod = this.host.store.get(PODS, run.namespace, run.name);
    if (!pod || pod.metadata.uid !== run.uid) return false;
    const status = obj(pod.status);
    change(pod, status);
    pod.status = status;
    this.host.store.put(PODS, pod);
    return true;
  }

  private sleep(run: PodRun, ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (run.abort.signal.aborted) {
        reject(new Cancelled());
        return;
      }
      const timer = setTimeout(() => {
        run.abort.signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(new Cancelled());
      };
      run.abort.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async runPod(run: PodRun): Promise<void> {
    const pod = this.host.store.get(PODS, run.namespace, run.name);
    if (!pod) return;
    if (!(await this.schedule(run, pod))) {
      run.done = true;
      return;
    }
    const spec = obj(pod.spec);
    const inits = list(spec.initContainers);
    const mains = list(spec.containers);
    const startTime = rfc3339();
    const waiting = (c: JsonObject, reason: string): JsonObject => ({
      name: str(c.name),
      image: str(c.image),
      imageID: '',
      ready: false,
      restartCount: 0,
      started: false,
      state: { waiting: { reason } },
      lastState: {},
    });
    // Scheduled and bound to the node; containers being created.
    this.patchPod(run, (p, status) => {
      p.spec = { ...obj(p.spec), nodeName: NODE };
      Object.assign(status, {
        phase: 'Pending',
        conditions: [
          condition('PodReadyToStartContainers', 'False'),
          condition(
            'Initialized',
            inits.length > 0 ? 'False' : 'True',
            ...(inits.length > 0
              ? [
                  'ContainersNotInitialized',
                  `containers with incomplete status: [${inits.map((c) => str(c.name)).join(' ')}]`,
                ]
              : []),
          ),
          condition(
            'Ready',
            'False',
            'ContainersNotReady',
            `containers with unready status: [${mains.map((c) => str(c.name)).join(' ')}]`,
          ),
          condition(
            'ContainersReady',
            'False',
            'ContainersNotReady',
            `containers with unready status: [${mains.map((c) => str(c.name)).join(' ')}]`,
          ),
          condition('PodScheduled', 'True'),
        ],
        hostIP: '10.0.0.10',
        hostIPs: [{ ip: '10.0.0.10' }],
        podIP: `10.244.0.${1 + Math.floor(Math.random() * 250)}`,
        startTime,
        qosClass: status.qosClass ?? 'BestEffort',
        ...(inits.length > 0
          ? { initContainerStatuses: inits.map((c) => waiting(c, 'PodInitializing')) }
          : {}),
        containerStatuses: mains.map((c) =>
          waiting(c, inits.length > 0 ? 'PodInitializing' : 'ContainerCreating'),
        ),
      });
      p.status = status;
    });
    const statusKey = (init: boolean): string =>
      init ? 'initContainerStatuses' : 'containerStatuses';
    const setState = (init: boolean, name: string, fields: JsonObject): void => {
      this.patchPod(run, (_p, status) => {
        status[statusKey(init)] = list(status[statusKey(init)]).map((s) =>
          s.name === name ? { ...s, ...fields } : s,
        );
      });
    };
    const started = new Map<string, string>();
    const terminated = new Map<string, Termination>();
    try {
      await this.sleep(run, this.options.startDelayMs);
      await this.mountVolumes(run, spec);
      this.patchPod(run, (_p, status) => {
        status.conditions = setCondition(
          list(status.conditions),
          condition('PodReadyToStartContainers', 'True'),
        );
      });
      for (const init of inits) {
        const name = str(init.name);
        const result = await this.runContainer(run, init, true, setState, started);
        terminated.set(name, { ...result, finishedAt: result.finishedAt ?? rfc3339() });
        if (result.exitCode !== 0) {
          this.finish(run, inits, mains, started, terminated, 'Failed');
          return;
        }
      }
      if (inits.length > 0)
        this.patchPod(run, (_p, status) => {
          status.conditions = setCondition(
            list(status.conditions),
            condition('Initialized', 'True'),
          );
          status.containerStatuses = mains.map((c) => waiting(c, 'ContainerCreating'));
        });
      const results = await Promise.all(
        mains.map((c) => this.runContainer(run, c, false, setState, started)),
      );
      results.forEach((r, i) => terminated.set(str(mains[i]?.name), r));
      this.finish(
        run,
        inits,
        mains,
        started,
        terminated,
        results.every((r) => r.exitCode === 0) ? 'Succeeded' : 'Failed',
      );
    } catch (error) {
      if (!(error instanceof Cancelled)) throw error;
      if (!run.killed) return; // the pod object went away: nothing left to report
      this.finish(run, inits, mains, started, terminated, 'Failed');
      if (run.killed === 'deleted') {
        await new Promise((resolve) => setTimeout(resolve, this.options.terminationDelayMs));
        const pod = this.host.store.get(PODS, run.namespace, run.name);
        if (pod?.metadata.uid === run.uid) this.host.removePod(run.namespace, run.name);
      }
    } finally {
      run.done = true;
      if (run.volumesDir !== undefined) rmSync(run.volumesDir, { recursive: true, force: true });
    }
  }

  /** Writes the terminal pod status: every container terminated (killed ones with 137). */
  private finish(
    run: PodRun,
    inits: JsonObject[],
    mains: JsonObject[],
    started: Map<string, string>,
    terminated: Map<string, Termination>,
    phase: 'Succeeded' | 'Failed',
  ): void {
    const now = rfc3339();
    const final = (c: JsonObject, s: JsonObject): JsonObject => {
      const name = str(c.name);
      const startedAt = started.get(name);
      if (startedAt === undefined) return s; // never started: stays waiting
      const t = terminated.get(name) ?? { exitCode: 137, reason: 'Error' };
      return {
        ...s,
        ready: false,
        started: false,
        state: {
          terminated: {
            exitCode: t.exitCode,
            reason: t.reason,
            ...(t.message === undefined ? {} : { message: t.message }),
            startedAt,
            finishedAt: t.finishedAt ?? now,
            containerID: str(s.containerID),
          },
        },
      };
    };
    this.patchPod(run, (_p, status) => {
      status.phase = phase;
      if (status.initContainerStatuses !== undefined)
        status.initContainerStatuses = list(status.initContainerStatuses).map((s, i) =>
          final(inits[i] ?? {}, s),
        );
      status.containerStatuses = list(status.containerStatuses).map((s, i) =>
        final(mains[i] ?? {}, s),
      );
      let conditions = list(status.conditions);
      conditions = setCondition(conditions, condition('PodReadyToStartContainers', 'False'));
      conditions = setCondition(conditions, condition('Ready', 'False', 'PodCompleted'));
      conditions = setCondition(conditions, condition('ContainersReady', 'False', 'PodCompleted'));
      if (run.killed === 'evicted') {
        conditions = setCondition(
          conditions,
          condition('DisruptionTarget', 'True', 'TerminationByKubelet', run.evictionMessage),
        );
        status.reason = 'Evicted';
        status.message = run.evictionMessage ?? DEFAULT_EVICTION_MESSAGE;
      }
      status.conditions = conditions;
    });
  }

  private async runContainer(
    run: PodRun,
    container: JsonObject,
    init: boolean,
    setState: (init: boolean, name: string, fields: JsonObject) => void,
    started: Map<string, string>,
  ): Promise<Termination> {
    const name = str(container.name);
    const image = str(container.image);
    const script = this.scripts.get(image) ?? this.scripts.get(repositoryOf(image));
    const fieldPath = `spec.${init ? 'initContainers' : 'containers'}{${name}}`;
    const note = (type: EventNote['type'], reason: string, message: string): void =>
      this.podEvent(run, { type, reason, message, fieldPath });
    const waitWith = (reason: string, message: string): void =>
      setState(init, name, {
        ready: false,
        started: false,
        state: { waiting: { reason, message } },
      });
    if (script?.pullError !== undefined) {
      note('Normal', 'Pulling', `Pulling image "${image}"`);
      note('Warning', 'Failed', `Failed to pull image "${image}": ${script.pullError}`);
      note('Warning', 'Failed', 'Error: ErrImagePull');
      waitWith('ErrImagePull', script.pullError);
      let step = await this.backOff(run, this.options.backOffMs);
      waitWith('ImagePullBackOff', `Back-off pulling image "${image}": ${script.pullError}`);
      for (;;) {
        // Until the pod is killed (Cancelled): each sync in back-off says so again.
        note('Normal', 'BackOff', `Back-off pulling image "${image}"`);
        note('Warning', 'Failed', 'Error: ImagePullBackOff');
        step = await this.backOff(run, step);
      }
    }
    // The environment is made when the container is created: a missing Secret or ConfigMap
    // keeps it waiting, retried with back-off, until it appears.
    let step = this.options.backOffMs;
    for (
      let why = this.configError(run, container);
      why !== undefined;
      why = this.configError(run, container)
    ) {
      waitWith('CreateContainerConfigError', why);
      note('Warning', 'Failed', `Error: ${why}`);
      step = await this.backOff(run, step);
    }
    const startedAt = rfc3339();
    started.set(name, startedAt);
    setState(init, name, {
      imageID: `docker.io/library/${image.split('@')[0] ?? image}@sha256:${'0'.repeat(64)}`,
      containerID: `containerd://${randomBytes(32).toString('hex')}`,
      ready: !init,
      started: true,
      state: { running: { startedAt } },
    });
    if (!init) this.markReadyIfAllRunning(run);
    const startMs = Date.now();
    let hookExit: number | undefined;
    let hookMessage: string | undefined;
    if (!script) {
      await this.sleep(run, this.options.unknownImageRunMs);
    } else {
      const lines =
        typeof script.lines === 'number'
          ? Array.from({ length: script.lines }, (_, i) =>
              numberedLine(i + 1, script.lines as number),
            )
          : (script.lines ?? []);
      const rate = script.linesPerSecond ?? 2000;
      const perWrite = Math.max(1, script.linesPerWrite ?? 1);
      const evictAfter =
        script.evict === undefined
          ? undefined
          : script.evict === true
            ? lines.length
            : (script.evict.afterLines ?? lines.length);
      const message =
        script.evict !== undefined && script.evict !== true ? script.evict.message : undefined;
      const printed: string[] = [];
      const log = (batch: string[]): void => {
        if (batch.length === 0) return;
        this.host.appendLog(run.namespace, run.name, name, batch);
        printed.push(...batch);
      };
      let written = 0;
      const begin = Date.now();
      while (written < lines.length) {
        if (evictAfter !== undefined && written >= evictAfter) break;
        const due = Math.min(
          lines.length,
          evictAfter ?? lines.length,
          // Line i (from 0) is due i/rate seconds after the start: the first at once.
          Math.floor(((Date.now() - begin) * rate) / 1000) + 1,
        );
        const dueWhole = Math.min(
          evictAfter ?? lines.length,
          lines.length,
          Math.ceil(due / perWrite) * perWrite,
        );
        while (written < dueWhole) {
          const end = Math.min(dueWhole, written + perWrite);
          log(lines.slice(written, end));
          written = end;
        }
        // Until the next line is due (at most 50 ms, so a kill is seen soon), never a busy loop.
        if (written < lines.length)
          await this.sleep(
            run,
            Math.max(5, Math.min(50, begin + (written * 1000) / rate - Date.now())),
          );
      }
      if (evictAfter !== undefined) {
        this.kill(run, 'evicted', message ?? DEFAULT_EVICTION_MESSAGE);
        throw new Cancelled();
      }
      if (script.printCrc) {
        const s = summarize(printed);
        log([crcLine(s.lines, s.bytes, s.crc32)]);
      }
      if (script.run !== undefined) {
        const outcome = await script.run(this.runContext(run, container));
        log(logLines(outcome.lines ?? []));
        if (outcome.exitCode !== undefined) hookExit = outcome.exitCode;
        hookMessage = this.terminationMessage(run, container);
      }
      const left = (script.runMs ?? 0) - (Date.now() - startMs);
      if (left > 0) await this.sleep(run, left);
      if (script.hang) await this.sleep(run, 2 ** 31 - 1);
    }
    if (run.abort.signal.aborted) throw new Cancelled();
    const exitCode = hookExit ?? script?.exitCode ?? 0;
    const ended: Termination = script?.oomKilled
      ? { exitCode: 137, reason: 'OOMKilled' }
      : { exitCode, reason: exitCode === 0 ? 'Completed' : 'Error' };
    const result: Termination =
      hookMessage === undefined ? ended : { ...ended, message: hookMessage };
    // Init containers report their termination here; main containers all at once in finish().
    if (init)
      setState(init, name, {
        ready: result.exitCode === 0,
        started: false,
        state: {
          terminated: {
            exitCode: result.exitCode,
            reason: result.reason,
            ...(result.message === undefined ? {} : { message: result.message }),
            startedAt,
            finishedAt: rfc3339(),
          },
        },
      });
    return result;
  }

  /** The environment and mounts a `run` hook sees (see ContainerRunContext). */
  private runContext(run: PodRun, container: JsonObject): ContainerRunContext {
    const pod = this.host.store.get(PODS, run.namespace, run.name);
    const spec = obj(pod?.spec);
    run.volumesDir ??= mkdtempSync(join(tmpdir(), 'kiln-double-volumes-'));
    const root = run.volumesDir;
    const volumes = new Map(list(spec.volumes).map((v) => [str(v.name), v]));
    const read = (kind: 'secrets' | 'configmaps', name: string): JsonObject => {
      const object = this.host.store.get(`/${kind}`, run.namespace, name);
      if (object === undefined) return {};
      const data = obj((object as unknown as JsonObject).data);
      return kind === 'secrets'
        ? Object.fromEntries(
            Object.entries(data).map(([k, v]) => [
              k,
              Buffer.from(str(v), 'base64').toString('utf8'),
            ]),
          )
        : data;
    };
    const env: Record<string, string> = {};
    for (const variable of list(container.env)) {
      const from = obj(variable.valueFrom);
      if (typeof variable.value === 'string') env[str(variable.name)] = variable.value;
      else if (isObject(from.secretKeyRef) || isObject(from.configMapKeyRef)) {
        const secret = isObject(from.secretKeyRef);
        const ref = obj(secret ? from.secretKeyRef : from.configMapKeyRef);
        const value = read(secret ? 'secrets' : 'configmaps', str(ref.name))[str(ref.key)];
        if (typeof value === 'string') env[str(variable.name)] = value;
      }
    }
    const mounts: Record<string, string> = {};
    for (const mount of list(container.volumeMounts)) {
      const name = str(mount.name);
      const dir = join(root, name);
      const volume = volumes.get(name);
      mkdirSync(dir, { recursive: true });
      const source = isObject(volume?.secret)
        ? { kind: 'secrets' as const, ref: obj(volume.secret), nameKey: 'secretName' }
        : isObject(volume?.configMap)
          ? { kind: 'configmaps' as const, ref: obj(volume.configMap), nameKey: 'name' }
          : undefined;
      if (source !== undefined) {
        const data = read(source.kind, str(source.ref[source.nameKey]));
        const items = list(source.ref.items);
        const files =
          items.length > 0
            ? items.map((item) => [str(item.path), data[str(item.key)]] as const)
            : Object.entries(data);
        for (const [path, value] of files) {
          if (typeof value !== 'string') continue;
          mkdirSync(join(dir, path, '..'), { recursive: true });
          writeFileSync(join(dir, path), value);
        }
      }
      mounts[str(mount.mountPath)] = dir;
    }
    const messageFile = this.terminationMessageFile(run, container);
    writeFileSync(messageFile, '');
    mounts[str(container.terminationMessagePath) || DEFAULT_TERMINATION_MESSAGE_PATH] = messageFile;
    return {
      namespace: run.namespace,
      pod: run.name,
      container: str(container.name),
      command: (Array.isArray(container.command) ? container.command : []).map(String),
      args: (Array.isArray(container.args) ? container.args : []).map(String),
      env,
      mounts,
    };
  }

  /** The host file behind a container's terminationMessagePath (see ContainerRunContext.mounts). */
  private terminationMessageFile(run: PodRun, container: JsonObject): string {
    run.volumesDir ??= mkdtempSync(join(tmpdir(), 'kiln-double-volumes-'));
    const dir = join(run.volumesDir, '.termination-messages');
    mkdirSync(dir, { recursive: true });
    return join(dir, str(container.name));
  }

  /** What the container left in its termination message file: the end of it, or undefined. */
  private terminationMessage(run: PodRun, container: JsonObject): string | undefined {
    const file = this.terminationMessageFile(run, container);
    const text = existsSync(file) ? readFileSync(file) : Buffer.alloc(0);
    if (text.length === 0) return undefined;
    return text.subarray(-TERMINATION_MESSAGE_MAX_BYTES).toString('utf8');
  }

  private markReadyIfAllRunning(run: PodRun): void {
    this.patchPod(run, (_p, status) => {
      const statuses = list(status.containerStatuses);
      if (!statuses.every((s) => isObject(obj(s.state).running))) return;
      status.phase = 'Running';
      let conditions = list(status.conditions);
      conditions = setCondition(conditions, condition('Initialized', 'True'));
      conditions = setCondition(conditions, condition('Ready', 'True'));
      conditions = setCondition(conditions, condition('ContainersReady', 'True'));
      status.conditions = conditions;
    });
  }
}

// ---- Job controller ----------------------------------------------------------------------------

interface JobState {
  uid: string;
  namespace: string;
  name: string;
  counted: Set<string>;
  known: Set<string>;
  ignored: Set<string>;
  timers: NodeJS.Timeout[];
  deadlineTimer?: NodeJS.Timeout;
  ttlTimer?: NodeJS.Timeout;
  retryAt?: number;
  /** After a refused pod create: the current back-off step, when to try again, and its timer. */
  createBackOffMs?: number;
  createRetryAt?: number;
  createTimer?: NodeJS.Timeout;
  /** startTime with milliseconds (the object's is truncated to the second). */
  startMs?: number;
}

export interface FakeJobControllerOptions {
  /** Delay before a failed pod is replaced (the real controller backs off from 10 s). Default 100 ms. */
  retryDelayMs?: number;
  /**
   * After the API server refuses a pod create (quota, Pod Security, a webhook), the first delay
   * before the next try; it doubles with each refusal up to `createRetryMaxMs`, and starts over
   * once a create succeeds. The real controller's work queue backs off likewise (5 ms doubling,
   * plus the Job's own pod-failure back-off). Default 50 ms.
   */
  createRetryMs?: number;
  /** The longest delay between two refused creates. Default 1000 ms. */
  createRetryMaxMs?: number;
}

/**
 * The batch/v1 Job controller for NonIndexed Jobs with parallelism and completions 1: one pod at
 * a time, counted into `status.active/succeeded/failed`, with the conditions a 1.32 server writes
 * (SuccessCriteriaMet + Complete, FailureTarget + Failed, Suspended), backoffLimit,
 * activeDeadlineSeconds, suspend and ttlSecondsAfterFinished. Its Events on the Job are the real
 * controller's: `SuccessfulCreate`, `FailedCreate` when the API server refuses the pod (then tried
 * again with back-off), `Completed`, and the failure's reason (`BackoffLimitExceeded`, …).
 */
export class FakeJobController {
  enabled = true;
  private readonly jobs = new Map<string, JobState>();
  private readonly pending = new Set<string>();
  private readonly unsubscribe: () => void;
  /** Time between a failed pod and its replacement (the real controller backs off exponentially from 10 s). */
  retryDelayMs: number;
  /** The first delay after a refused pod create (see FakeJobControllerOptions). */
  createRetryMs: number;
  createRetryMaxMs: number;

  constructor(
    private readonly host: ClusterHost,
    options: FakeJobControllerOptions = {},
  ) {
    this.retryDelayMs = options.retryDelayMs ?? 100;
    this.createRetryMs = options.createRetryMs ?? 50;
    this.createRetryMaxMs = options.createRetryMaxMs ?? 1000;
    this.unsubscribe = host.store.subscribe((event) => this.onEvent(event));
  }

  stop(): void {
    this.unsubscribe();
    for (const state of this.jobs.values()) this.clearTimers(state);
    this.jobs.clear();
  }

  private onEvent(event: StoredEvent): void {
    if (!this.enabled) return;
    if (event.resource === JOBS) {
      this.enqueue(event.object.metadata.namespace ?? '', event.object.metadata.name ?? '');
      return;
    }
    if (event.resource !== PODS) return;
    const owner = controllerRef(event.object, 'Job');
    if (!owner) return;
    const ref = (event.object.metadata.ownerReferences ?? []).find((r) => r.uid === owner);
    if (ref) this.enqueue(event.object.metadata.namespace ?? '', ref.name);
  }

  private enqueue(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    if (this.pending.has(key)) return;
    this.pending.add(key);
    setImmediate(() => {
      this.pending.delete(key);
      if (this.enabled) this.reconcile(namespace, name);
    });
  }

  private clearTimers(state: JobState): void {
    if (state.deadlineTimer) clearTimeout(state.deadlineTimer);
    if (state.ttlTimer) clearTimeout(state.ttlTimer);
    if (state.createTimer) clearTimeout(state.createTimer);
    for (const t of state.timers) clearTimeout(t);
    state.timers = [];
    delete state.deadlineTimer;
    delete state.ttlTimer;
    delete state.createTimer;
  }

  private reconcile(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const job = this.host.store.get(JOBS, namespace, name);
    let state = this.jobs.get(key);
    if (!job || job.metadata.deletionTimestamp || (state && state.uid !== job.metadata.uid)) {
      if (state) this.clearTimers(state);
      this.jobs.delete(key);
      state = undefined;
      if (!job || job.metadata.deletionTimestamp) return;
    }
    if (!state) {
      state = {
        uid: job.metadata.uid ?? '',
        namespace,
        name,
        counted: new Set(),
        known: new Set(),
        ignored: new Set(),
        timers: [],
      };
      this.jobs.set(key, state);
    }
    const spec = obj(job.spec);
    const status = clone(obj(job.status));
    let conditions = list(status.conditions);
    const finished = isTrue(conditions, 'Complete') || isTrue(conditions, 'Failed');
    const uid = state.uid;
    const pods = this.host.store.list(PODS, namespace, (p) => controllerRef(p, 'Job') === uid);
    const phase = (p: KubeObject): string => str(obj(p.status).phase);
    let succeeded = Number(status.succeeded ?? 0);
    let failed = Number(status.failed ?? 0);
    const present = new Set(pods.map((p) => p.metadata.uid ?? ''));
    for (const p of pods) {
      const uid = p.metadata.uid ?? '';
      state.known.add(uid);
      if (state.counted.has(uid) || state.ignored.has(uid)) continue;
      if (phase(p) === 'Succeeded') succeeded++;
      else if (phase(p) === 'Failed') failed++;
      else continue;
      state.counted.add(uid);
    }
    // A pod that vanished before it finished counts as failed (the job-tracking finalizer's job).
    for (const uid of state.known)
      if (!present.has(uid) && !state.counted.has(uid) && !state.ignored.has(uid)) {
        failed++;
        state.counted.add(uid);
      }
    const active = pods.filter(
      (p) =>
        !state.ignored.has(p.metadata.uid ?? '') &&
        phase(p) !== 'Succeeded' &&
        phase(p) !== 'Failed' &&
        !p.metadata.deletionTimestamp,
    );
    const terminating = pods.filter(
      (p) => p.metadata.deletionTimestamp && phase(p) !== 'Succeeded' && phase(p) !== 'Failed',
    );
    const killActive = (): void => {
      for (const p of active) {
        // Pods killed for the Job's failure count as failed, as with the real controller.
        failed++;
        state.counted.add(p.metadata.uid ?? '');
        this.host.deleteAsController('v1', 'Pod', namespace, p.metadata.name ?? '', 'Background');
      }
    };
    const now = Date.now();
    const write = (): void => {
      const next: JsonObject = { ...status, conditions };
      if (conditions.length === 0) delete next.conditions;
      for (const [k, v] of [
        ['succeeded', succeeded],
        ['failed', failed],
      ] as const)
        if (v > 0) next[k] = v;
        else delete next[k];
      if (JSON.stringify(next) === JSON.stringify(obj(job.status))) return;
      const latest = this.host.store.get(JOBS, namespace, name);
      if (!latest || latest.metadata.uid !== state.uid) return;
      latest.status = next;
      this.host.store.put(JOBS, latest);
    };
    const setCounts = (activeCount: number): void => {
      if (activeCount > 0) status.active = activeCount;
      else delete status.active;
      status.ready = active.filter((p) =>
        list(obj(p.status).conditions).some((c) => c.type === 'Ready' && c.status === 'True'),
      ).length;
      status.terminating = terminating.length;
      status.uncountedTerminatedPods = {};
    };
    const fail = (reason: string, message: string): void => {
      this.host.recordEvent(job, JOB_CONTROLLER, { type: 'Warning', reason, message });
      killActive();
      conditions = setCondition(conditions, condition('FailureTarget', 'True', reason, message));
      conditions = setCondition(conditions, condition('Failed', 'True', reason, message));
      setCounts(0);
      this.clearTimers(state);
      write();
      this.scheduleTtl(state, spec, now);
    };

    if (finished) {
      setCounts(active.length);
      write();
      this.scheduleTtl(state, spec, now);
      return;
    }
    if (spec.suspend === true) {
      for (const p of active) {
        state.ignored.add(p.metadata.uid ?? '');
        this.host.deleteAsController('v1', 'Pod', namespace, p.metadata.name ?? '', 'Background');
      }
      conditions = setCondition(
        conditions,
        condition('Suspended', 'True', 'JobSuspended', 'Job suspended'),
      );
      delete status.startTime;
      delete state.startMs;
      setCounts(0);
      this.clearTimers(state);
      write();
      return;
    }
    if (isTrue(conditions, 'Suspended'))
      conditions = setCondition(
        conditions,
        condition('Suspended', 'False', 'JobResumed', 'Job resumed'),
      );
    if (status.startTime === undefined) {
      status.startTime = rfc3339(now);
      state.startMs = now;
    }
    const startMs = state.startMs ?? Date.parse(str(status.startTime));
    const deadline =
      typeof spec.activeDeadlineSeconds === 'number' ? spec.activeDeadlineSeconds : undefined;
    if (deadline !== undefined && startMs + deadline * 1000 <= now) {
      fail('DeadlineExceeded', 'Job was active longer than specified deadline');
      return;
    }
    const completions = typeof spec.completions === 'number' ? spec.completions : 1;
    if (succeeded >= completions) {
      const message = 'Reached expected number of succeeded pods';
      conditions = setCondition(
        conditions,
        condition('SuccessCriteriaMet', 'True', 'CompletionsReached', message),
      );
      conditions = setCondition(
        conditions,
        condition('Complete', 'True', 'CompletionsReached', message),
      );
      status.completionTime = rfc3339(now);
      this.host.recordEvent(job, JOB_CONTROLLER, {
        type: 'Normal',
        reason: 'Completed',
        message: 'Job completed',
      });
      killActive();
      setCounts(0);
      this.clearTimers(state);
      write();
      this.scheduleTtl(state, spec, now);
      return;
    }
    const backoffLimit = typeof spec.backoffLimit === 'number' ? spec.backoffLimit : 6;
    if (failed > backoffLimit) {
      fail('BackoffLimitExceeded', 'Job has reached the specified backoff limit');
      return;
    }
    if (deadline !== undefined && !state.deadlineTimer) {
      state.deadlineTimer = setTimeout(
        () => {
          delete state.deadlineTimer;
          this.enqueue(namespace, name);
        },
        Math.max(0, startMs + deadline * 1000 - now) + 5,
      );
    }
    let activeCount = active.length;
    if (activeCount === 0 && terminating.length === 0) {
      const retryAt = failed > 0 ? (state.retryAt ??= now + this.retryDelayMs) : now;
      const createAt = state.createRetryAt ?? now;
      if (retryAt <= now && createAt <= now) {
        delete state.retryAt;
        if (this.createPod(job, state)) activeCount = 1;
      } else if (retryAt > now)
        state.timers.push(setTimeout(() => this.enqueue(namespace, name), retryAt - now + 1));
      // A refused create is tried again when its back-off step is over, whatever else happens.
      if (state.createRetryAt !== undefined && !state.createTimer)
        state.createTimer = setTimeout(
          () => {
            delete state.createTimer;
            this.enqueue(namespace, name);
          },
          Math.max(0, state.createRetryAt - Date.now()) + 1,
        );
    }
    setCounts(activeCount);
    write();
  }

  /**
   * Creates the Job's next pod and says so in an Event: `SuccessfulCreate`, or, when the API
   * server refuses it (admission: quota, Pod Security, a webhook), `FailedCreate` with the
   * refusal, and a retry after a back-off step. As the real controller, it stays silent when the
   * namespace is being terminated. True when the pod was created.
   */
  private createPod(job: KubeObject, state: JobState): boolean {
    let pod: KubeObject;
    try {
      pod = this.newPod(job, state);
    } catch (error) {
      if (!(error instanceof StatusError)) throw error;
      const terminating = (error.details?.causes ?? []).some(
        (c) => c.reason === 'NamespaceTerminating',
      );
      if (!terminating)
        this.host.recordEvent(job, JOB_CONTROLLER, {
          type: 'Warning',
          reason: 'FailedCreate',
          message: `Error creating: ${error.message}`,
        });
      state.createBackOffMs =
        state.createBackOffMs === undefined
          ? this.createRetryMs
          : Math.min(state.createBackOffMs * 2, this.createRetryMaxMs);
      state.createRetryAt = Date.now() + state.createBackOffMs;
      return false;
    }
    delete state.createBackOffMs;
    delete state.createRetryAt;
    this.host.recordEvent(job, JOB_CONTROLLER, {
      type: 'Normal',
      reason: 'SuccessfulCreate',
      message: `Created pod: ${pod.metadata.name ?? ''}`,
    });
    return true;
  }

  private newPod(job: KubeObject, state: JobState): KubeObject {
    const template = obj(obj(job.spec).template);
    const templateMeta = obj(template.metadata);
    const uid = state.uid;
    const pod = this.host.createAsController('v1', 'Pod', {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        generateName: `${state.name}-`,
        namespace: state.namespace,
        labels: {
          ...(obj(templateMeta.labels) as Record<string, string>),
          'batch.kubernetes.io/controller-uid': uid,
          'batch.kubernetes.io/job-name': state.name,
          'controller-uid': uid,
          'job-name': state.name,
        },
        ...(isObject(templateMeta.annotations)
          ? { annotations: templateMeta.annotations as Record<string, string> }
          : {}),
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name: state.name,
            uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: clone(obj(template.spec)),
    });
    state.known.add(pod.metadata.uid ?? '');
    return pod;
  }

  private scheduleTtl(state: JobState, spec: JsonObject, finishedAt: number): void {
    const ttl = spec.ttlSecondsAfterFinished;
    if (typeof ttl !== 'number' || state.ttlTimer) return;
    state.ttlTimer = setTimeout(
      () => {
        const job = this.host.store.get(JOBS, state.namespace, state.name);
        if (job?.metadata.uid === state.uid)
          this.host.deleteAsController(
            'batch/v1',
            'Job',
            state.namespace,
            state.name,
            'Background',
          );
      },
      Math.max(0, finishedAt + ttl * 1000 - Date.now()),
    );
  }
}
