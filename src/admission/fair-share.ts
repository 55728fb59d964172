/**
 * The fair-share rule of admission (docs/adr/0042-admission-in-postgres.md), as a pure function
 * of the queue. AdmissionStore decides in SQL; its tests hold the SQL to this.
 */

/** Why a waiting build waits. `Admissible`: a slot is free for it; the next pass takes it. */
export const WAIT_REASONS = [
  'Admissible',
  'InstallationLimit',
  'TenantLimit',
  'ProjectLimit',
] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

/** Limits on running builds; undefined is no limit. */
export interface AdmissionLimits {
  /** The whole installation (KILN_MAX_RUNNING). */
  readonly maxRunning?: number;
  /** Each tenant, unless its settings say otherwise (KILN_TENANT_MAX_RUNNING). */
  readonly tenantMaxRunning?: number;
  /** Each project (KILN_PROJECT_MAX_RUNNING). */
  readonly projectMaxRunning?: number;
}

export interface QueuedBuild {
  readonly buildId: string;
  readonly tenantId: string;
  readonly projectId: string;
  /** The order of the queue: lower started waiting first. */
  readonly seq: number;
}

export interface RunningBuild {
  readonly tenantId: string;
  readonly projectId: string;
}

/** A tenant's settings and history; a tenant without an entry has weight 1 and no history. */
export interface TenantShare {
  readonly weight: number;
  /** Overrides AdmissionLimits.tenantMaxRunning; null: the default holds. */
  readonly maxRunning: number | null;
  /** When the tenant last had a build admitted (any monotonic clock); null: never. */
  readonly lastAdmitted: number | null;
}

export interface AdmissionSnapshot {
  readonly waiting: readonly QueuedBuild[];
  readonly running: readonly RunningBuild[];
  readonly tenants: ReadonlyMap<string, TenantShare>;
}

export interface QueuePlace {
  readonly build: QueuedBuild;
  /** 1-based, in the order admission takes the waiting builds now. */
  readonly position: number;
  readonly reason: WaitReason;
}

const NO_SHARE: TenantShare = { weight: 1, maxRunning: null, lastAdmitted: null };

/**
 * Every waiting build in the order admission takes them now, and why each waits.
 *
 * The rule, applied one slot at a time: among the tenants below their limit that have a waiting
 * build whose project is below its limit, the tenant whose running builds divided by its weight
 * is least goes first; on a tie the tenant admitted least recently before this pass (never
 * admitted: first), then the one whose candidate started waiting first. A tenant's candidate is
 * its first waiting build whose project is below its limit. Builds the tenant or project limits
 * hold back follow, in the order the same rule without limits would give them.
 */
export function queueOrder(snapshot: AdmissionSnapshot, limits: AdmissionLimits): QueuePlace[] {
  const shareOf = (tenantId: string) => snapshot.tenants.get(tenantId) ?? NO_SHARE;
  const projectLimit = limits.projectMaxRunning ?? Infinity;
  const tenantLimit = (tenantId: string) =>
    shareOf(tenantId).maxRunning ?? limits.tenantMaxRunning ?? Infinity;

  const admissible = greedy(snapshot, shareOf, tenantLimit, projectLimit);
  const taken = new Set(admissible.map((build) => build.buildId));
  const held = greedy(snapshot, shareOf, () => Infinity, Infinity).filter(
    (build) => !taken.has(build.buildId),
  );

  const free = (limits.maxRunning ?? Infinity) - snapshot.running.length;
  const projectRunning = countBy(snapshot.running, projectKey);
  // A held build waits for its project when the builds of the project ahead of it, running or
  // waiting, fill the project's limit; else for its tenant.
  const projectSlot = new Map<string, number>();
  const projectSeen = new Map<string, number>();
  for (const build of [...snapshot.waiting].sort(bySeq)) {
    const key = projectKey(build);
    projectSeen.set(key, (projectSeen.get(key) ?? 0) + 1);
    projectSlot.set(build.buildId, (projectRunning.get(key) ?? 0) + projectSeen.get(key)!);
  }
  const heldBy = (build: QueuedBuild): WaitReason =>
    projectSlot.get(build.buildId)! > projectLimit ? 'ProjectLimit' : 'TenantLimit';

  return [
    ...admissible.map((build, index) => ({
      build,
      position: index + 1,
      reason: index < free ? ('Admissible' as const) : ('InstallationLimit' as const),
    })),
    ...held.map((build, index) => ({
      build,
      position: admissible.length + index + 1,
      reason: heldBy(build),
    })),
  ];
}

/** The builds one admission pass takes now, in order. */
export function nextAdmissions(
  snapshot: AdmissionSnapshot,
  limits: AdmissionLimits,
): QueuedBuild[] {
  return queueOrder(snapshot, limits)
    .filter((place) => place.reason === 'Admissible')
    .map((place) => place.build);
}

/** The rule applied slot after slot, with no installation limit, until no build fits. */
function greedy(
  snapshot: AdmissionSnapshot,
  shareOf: (tenantId: string) => TenantShare,
  tenantLimit: (tenantId: string) => number,
  projectLimit: number,
): QueuedBuild[] {
  const tenantRunning = countBy(snapshot.running, (build) => build.tenantId);
  const projectRunning = countBy(snapshot.running, projectKey);
  const queues = new Map<string, QueuedBuild[]>();
  for (const build of [...snapshot.waiting].sort(bySeq)) {
    queues.set(build.tenantId, [...(queues.get(build.tenantId) ?? []), build]);
  }

  const order: QueuedBuild[] = [];
  for (;;) {
    let best: { build: QueuedBuild; share: number; last: number } | undefined;
    for (const [tenantId, queue] of queues) {
      const running = tenantRunning.get(tenantId) ?? 0;
      if (running >= tenantLimit(tenantId)) continue;
      const build = queue.find((b) => (projectRunning.get(projectKey(b)) ?? 0) < projectLimit);
      if (build === undefined) continue;
      const { weight, lastAdmitted } = shareOf(tenantId);
      const candidate = { build, share: running / weight, last: lastAdmitted ?? -Infinity };
      if (best === undefined || before(candidate, best)) best = candidate;
    }
    if (best === undefined) return order;
    const { build } = best;
    order.push(build);
    queues.set(
      build.tenantId,
      queues.get(build.tenantId)!.filter((b) => b !== build),
    );
    tenantRunning.set(build.tenantId, (tenantRunning.get(build.tenantId) ?? 0) + 1);
    projectRunning.set(projectKey(build), (projectRunning.get(projectKey(build)) ?? 0) + 1);
  }
}

function before(
  a: { build: QueuedBuild; share: number; last: number },
  b: { build: QueuedBuild; share: number; last: number },
): boolean {
  if (a.share !== b.share) return a.share < b.share;
  if (a.last !== b.last) return a.last < b.last;
  return a.build.seq < b.build.seq;
}

const bySeq = (a: QueuedBuild, b: QueuedBuild) => a.seq - b.seq;

const projectKey = (build: RunningBuild) => `${build.tenantId}/${build.projectId}`;

function countBy<T>(items: readonly T[], key: (item: T) => string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}
