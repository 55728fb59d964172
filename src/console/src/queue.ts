/** A started build's place while it waits to run (the Build's and the status's `queue`). */
export interface Queue {
  /** 1-based; null (or left out) once admitted, while the cluster holds the pod back. */
  readonly position?: number | null;
  readonly reason: string;
  readonly message: string;
  readonly estimated_start?: string | null;
}

/** Why the cluster holds an admitted build's pod back, in a few words. */
const CLUSTER_REASONS: Readonly<Record<string, string>> = {
  ClusterQuota: "the namespace's resource quota is used up",
  Unschedulable: 'no node can run the pod',
  ImagePull: 'an image cannot be pulled yet',
  CreateContainerConfigError: "a container's configuration is not ready",
  PodNotCreated: 'the pod is not created yet',
};

/** 1st, 2nd, 3rd, 4th, … 11th, 12th, 13th, … 21st. */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? 'th' : (['th', 'st', 'nd', 'rd'][n % 10] ?? 'th');
  return `${n}${suffix}`;
}

/**
 * When a waiting build should start, as the user reads it: "about 4 min", "about 2 h". The
 * estimate is a guess, so it is rounded, and never says less than a minute; once it has passed
 * the build is next to go, not late.
 */
export function startsIn(estimatedStart: string, now = Date.now()): string {
  const left = Date.parse(estimatedStart) - now;
  if (!(left > 0)) return 'starting soon';
  const minutes = Math.max(1, Math.round(left / 60_000));
  return minutes > 90 ? `about ${Math.round(minutes / 60)} h` : `about ${minutes} min`;
}

/**
 * A waiting build in one line: "waiting: 3rd in line, about 4 min" while it waits for a slot,
 * "waiting for the cluster: no node can run the pod" once admitted.
 */
export function queueLine(queue: Queue, now = Date.now()): string {
  const position = queue.position ?? null;
  if (position === null) {
    return `waiting for the cluster: ${CLUSTER_REASONS[queue.reason] ?? queue.reason}`;
  }
  const start = queue.estimated_start ?? null;
  return `waiting: ${ordinal(position)} in line${start === null ? '' : `, ${startsIn(start, now)}`}`;
}
