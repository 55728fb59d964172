/** A duration in ms as the console shows it: "42 s", "3 min 5 s", "1 h 2 min". */
export function duration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${seconds % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** How long a build ran (or has run so far); undefined before it started. */
export function buildDuration(
  build: { started_at?: string | null; completed_at?: string | null },
  now = Date.now(),
): string | undefined {
  if (!build.started_at) return undefined;
  const end = build.completed_at ? Date.parse(build.completed_at) : now;
  return duration(end - Date.parse(build.started_at));
}

/** A date-time in the user's locale, to the second. */
export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString(undefined, { hour12: false }) : '';
}

/** The first 12 characters of a commit. */
export function shortCommit(commit: string | null | undefined): string {
  return commit ? commit.slice(0, 12) : '';
}
