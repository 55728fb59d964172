import { StatusError } from './errors.js';
import type { ObjectStore, StoredEvent } from './store.js';
import { clone, isObject, type JsonObject, type KubeObject } from './types.js';

/**
 * ResourceQuota for pods, in two halves as in a real cluster: the quota controller of
 * kube-controller-manager keeps each quota's `status.hard` and `status.used`, and the
 * ResourceQuota admission plugin of kube-apiserver refuses a pod whose usage would pass a hard
 * limit, judging by that status. A quota whose status the controller has not written yet limits
 * nothing (admission only looks at `status.hard`), which is what a quota does before its
 * controller has synced; the double's controller is off unless asked for (`resourceQuotaController`).
 *
 * What a pod uses: `pods` and `count/pods` count it while it is neither Succeeded nor Failed (nor
 * past its deletion grace period); `requests.<r>` (and bare `cpu`, `memory`, `ephemeral-storage`)
 * and `limits.<r>` sum its containers' values, an init container counting instead when it asks for
 * more than all regular containers together (the max rule; sidecars and pod overhead are not
 * modelled). A container that gives only a limit requests that much, as API defaulting makes it.
 * Not modelled: quota scopes and scopeSelector (every quota covers every pod), the "must specify"
 * refusal for pods without requests under a cpu or memory quota (it needs LimitRange defaulting,
 * which the double does not do), and quotas on other kinds (`count/<resource>` of other kinds and
 * the like are counted into `status.used` but never refused).
 */

const PODS = '/pods';
const QUOTAS = '/resourcequotas';

// ---- quantities -------------------------------------------------------------------------------

type Format = 'BinarySI' | 'DecimalSI';

interface Quantity {
  /** The value in nano-units: exact for every suffix Kubernetes knows. */
  nanos: bigint;
  format: Format;
}

const BINARY: Record<string, bigint> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};
const DECIMAL: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const NANO = 1_000_000_000n;

/** A resource.Quantity (`500m`, `1.5Gi`, `2e3`, `10`); undefined when it is none. */
export function parseQuantity(value: unknown): Quantity | undefined {
  const text =
    typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
  const m =
    /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/.exec(
      text,
    );
  if (!m) return undefined;
  const [whole = '', fraction = ''] = (m[2] ?? '').split('.');
  const digits = BigInt(`${whole}${fraction}` || '0');
  const scale = -fraction.length;
  const suffix = m[3] ?? '';
  const binary = BINARY[suffix];
  let nanos: bigint;
  const shift = (n: bigint, exp: number): bigint =>
    exp >= 0 ? n * 10n ** BigInt(exp) : (n + 10n ** BigInt(-exp) - 1n) / 10n ** BigInt(-exp);
  if (binary !== undefined) nanos = shift(digits * binary * NANO, scale);
  else {
    const exp = m[4] !== undefined ? Number(m[4]) : (DECIMAL[suffix] ?? 0);
    nanos = shift(digits, scale + exp + 9);
  }
  return {
    nanos: m[1] === '-' ? -nanos : nanos,
    format: binary !== undefined ? 'BinarySI' : 'DecimalSI',
  };
}

/** Quantity.String(): the canonical form in the quantity's own family of suffixes. */
export function formatQuantity(q: Quantity): string {
  const { nanos } = q;
  if (nanos === 0n) return '0';
  const sign = nanos < 0n ? '-' : '';
  const abs = nanos < 0n ? -nanos : nanos;
  if (abs % NANO !== 0n) {
    if (abs % 1_000_000n === 0n) return `${sign}${abs / 1_000_000n}m`;
    if (abs % 1_000n === 0n) return `${sign}${abs / 1_000n}u`;
    return `${sign}${abs}n`;
  }
  const units = abs / NANO;
  if (q.format === 'BinarySI') {
    for (const suffix of ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki'])
      if (units % (BINARY[suffix] ?? 1n) === 0n)
        return `${sign}${units / (BINARY[suffix] ?? 1n)}${suffix}`;
    return `${sign}${units}`;
  }
  for (const [suffix, exp] of [
    ['E', 18n],
    ['P', 15n],
    ['T', 12n],
    ['G', 9n],
    ['M', 6n],
    ['k', 3n],
  ] as const)
    if (units % 10n ** exp === 0n) return `${sign}${units / 10n ** exp}${suffix}`;
  return `${sign}${units}`;
}

const add = (a: Quantity | undefined, b: Quantity): Quantity =>
  a === undefined || a.nanos === 0n
    ? { ...b, nanos: (a?.nanos ?? 0n) + b.nanos }
    : { ...a, nanos: a.nanos + b.nanos };

const ONE: Quantity = { nanos: NANO, format: 'DecimalSI' };
const ZERO: Quantity = { nanos: 0n, format: 'DecimalSI' };

// ---- what a pod uses --------------------------------------------------------------------------

const obj = (value: unknown): JsonObject => (isObject(value) ? value : {});
const list = (value: unknown): JsonObject[] =>
  Array.isArray(value) ? value.filter((v): v is JsonObject => isObject(v)) : [];

/** QuotaV1Pod: whether a pod is charged to its quotas. */
export function chargedPod(pod: KubeObject, now = Date.now()): boolean {
  const phase = obj(pod.status).phase;
  if (phase === 'Succeeded' || phase === 'Failed') return false;
  const { deletionTimestamp, deletionGracePeriodSeconds } = pod.metadata;
  if (deletionTimestamp !== undefined && deletionGracePeriodSeconds !== undefined)
    return now <= Date.parse(deletionTimestamp) + deletionGracePeriodSeconds * 1000;
  return true;
}

/** A quota resource name the pod evaluator counts: the resource it sums, or a pod count. */
function podResource(
  name: string,
): { kind: 'count' } | { kind: 'requests' | 'limits'; resource: string } | undefined {
  if (name === 'pods' || name === 'count/pods') return { kind: 'count' };
  if (['cpu', 'memory', 'ephemeral-storage'].includes(name))
    return { kind: 'requests', resource: name };
  const m = /^(requests|limits)\.(.+)$/.exec(name);
  if (m && m[2] !== 'storage') return { kind: m[1] as 'requests' | 'limits', resource: m[2] ?? '' };
  return undefined;
}

/** What one container asks for of a resource; a request defaults to the limit. */
function containerAmount(
  container: JsonObject,
  kind: 'requests' | 'limits',
  resource: string,
): Quantity | undefined {
  const resources = obj(container.resources);
  const own = parseQuantity(obj(resources[kind])[resource]);
  if (own !== undefined || kind === 'limits') return own;
  return parseQuantity(obj(resources.limits)[resource]);
}

/** The pod's usage of one quota resource name, or undefined when the pod evaluator ignores it. */
export function podUsage(pod: KubeObject, name: string): Quantity | undefined {
  const what = podResource(name);
  if (what === undefined) return undefined;
  if (what.kind === 'count') return ONE;
  const spec = obj(pod.spec);
  let sum: Quantity | undefined;
  for (const c of list(spec.containers)) {
    const amount = containerAmount(c, what.kind, what.resource);
    if (amount !== undefined) sum = add(sum, amount);
  }
  for (const c of list(spec.initContainers)) {
    const amount = containerAmount(c, what.kind, what.resource);
    if (amount !== undefined && amount.nanos > (sum?.nanos ?? 0n)) sum = amount;
  }
  return sum ?? ZERO;
}

/** A quota resource name counted over objects (`count/jobs.batch`, `secrets`, …): its store key. */
function objectCountKey(name: string): string | undefined {
  const legacy = [
    'configmaps',
    'secrets',
    'services',
    'persistentvolumeclaims',
    'resourcequotas',
    'replicationcontrollers',
  ];
  if (legacy.includes(name)) return `/${name}`;
  const m = /^count\/([^.]+)(?:\.(.+))?$/.exec(name);
  if (!m || m[1] === 'pods') return undefined;
  return `${m[2] ?? ''}/${m[1] ?? ''}`;
}

/** `status.used` as the quota controller computes it for these hard limits in a namespace. */
function usedIn(store: ObjectStore, namespace: string, hard: JsonObject): JsonObject {
  const pods = store.list(PODS, namespace).filter((p) => chargedPod(p));
  const used: JsonObject = {};
  for (const name of Object.keys(hard).sort()) {
    const countKey = objectCountKey(name);
    if (countKey !== undefined) {
      used[name] = String(store.list(countKey, namespace).length);
      continue;
    }
    if (podResource(name) === undefined) continue;
    let total: Quantity | undefined;
    for (const pod of pods) {
      const amount = podUsage(pod, name);
      if (amount !== undefined) total = add(total, amount);
    }
    used[name] = formatQuantity(total ?? ZERO);
  }
  return used;
}

/** `spec.hard` in canonical form, as the API server stores quantities. */
function canonicalHard(quota: KubeObject): JsonObject {
  const hard: JsonObject = {};
  for (const [name, value] of Object.entries(obj(obj(quota.spec).hard))) {
    const q = parseQuantity(value);
    hard[name] = q === undefined ? value : formatQuantity(q);
  }
  return hard;
}

// ---- admission -------------------------------------------------------------------------------

const prettyPrint = (items: Record<string, string>): string =>
  Object.keys(items)
    .sort()
    .map((k) => `${k}=${items[k] ?? ''}`)
    .join(',');

/**
 * The ResourceQuota admission plugin for a pod create: refuses it (403, the real wording) when a
 * quota of its namespace would go over, else charges it to `status.used` of each quota at once,
 * as the plugin does so that the next pod is judged with this one counted.
 */
export function admitPodToQuotas(
  store: ObjectStore,
  pod: KubeObject,
  options: { dryRun: boolean },
): void {
  const namespace = pod.metadata.namespace ?? '';
  const name = pod.metadata.name ?? '';
  const charged: KubeObject[] = [];
  const forbidden = (message: string): StatusError =>
    new StatusError(403, 'Forbidden', `pods "${name}" is forbidden: ${message}`, {
      name,
      kind: 'pods',
    });
  for (const quota of store.list(QUOTAS, namespace)) {
    const status = obj(quota.status);
    const hard = obj(status.hard);
    const used = obj(status.used);
    const interesting = Object.keys(hard).filter((k) => podResource(k) !== undefined);
    if (interesting.length === 0) continue;
    const unknown = interesting.filter((k) => used[k] === undefined);
    if (unknown.length > 0)
      throw forbidden(
        `status unknown for quota: ${quota.metadata.name ?? ''}, resources: ${unknown.sort().join(',')}`,
      );
    const requested: Record<string, string> = {};
    const usedNow: Record<string, string> = {};
    const limited: Record<string, string> = {};
    const next: JsonObject = { ...used };
    for (const key of interesting) {
      const asked = podUsage(pod, key) ?? ZERO;
      const before = parseQuantity(used[key]) ?? ZERO;
      const limit = parseQuantity(hard[key]) ?? ZERO;
      const after = add(before, asked);
      next[key] = formatQuantity(after);
      if (asked.nanos > 0n && after.nanos > limit.nanos) {
        requested[key] = formatQuantity(asked);
        usedNow[key] = formatQuantity(before);
        limited[key] = formatQuantity(limit);
      }
    }
    if (Object.keys(requested).length > 0)
      throw forbidden(
        `exceeded quota: ${quota.metadata.name ?? ''}, requested: ${prettyPrint(requested)}, used: ${prettyPrint(usedNow)}, limited: ${prettyPrint(limited)}`,
      );
    const updated = clone(quota);
    updated.status = { ...status, used: next };
    charged.push(updated);
  }
  if (!options.dryRun) for (const quota of charged) store.put(QUOTAS, quota);
}

// ---- controller ------------------------------------------------------------------------------

/**
 * The quota controller: whenever a pod, a quota or a counted object of a namespace changes, it
 * recomputes `status.hard` (the spec's, canonical) and `status.used` of the namespace's quotas and
 * writes those that changed. The real one also resyncs every five minutes; here every change
 * triggers it, so usage frees as soon as a pod finishes or goes.
 */
export class FakeResourceQuotaController {
  private on = false;
  private readonly pending = new Set<string>();
  private readonly unsubscribe: () => void;

  constructor(private readonly store: ObjectStore) {
    this.unsubscribe = store.subscribe((event) => this.onEvent(event));
  }

  /** Off by default (see KubeApiServerOptions.resourceQuotaController); turning it on syncs every quota. */
  get enabled(): boolean {
    return this.on;
  }

  set enabled(value: boolean) {
    this.on = value;
    if (value) for (const q of this.store.list(QUOTAS)) this.enqueue(q.metadata.namespace ?? '');
  }

  stop(): void {
    this.unsubscribe();
    this.on = false;
  }

  private onEvent(event: StoredEvent): void {
    if (!this.on || event.resource === '/events') return;
    const namespace = event.object.metadata.namespace;
    if (namespace !== undefined) this.enqueue(namespace);
  }

  private enqueue(namespace: string): void {
    if (this.pending.has(namespace)) return;
    this.pending.add(namespace);
    setImmediate(() => {
      this.pending.delete(namespace);
      if (this.on) this.sync(namespace);
    });
  }

  private sync(namespace: string): void {
    for (const quota of this.store.list(QUOTAS, namespace)) {
      const hard = canonicalHard(quota);
      const status = { hard, used: usedIn(this.store, namespace, hard) };
      if (JSON.stringify(status) === JSON.stringify(quota.status ?? null)) continue;
      const next = clone(quota);
      next.status = status;
      this.store.put(QUOTAS, next);
    }
  }
}
