/** A build status as a coloured badge with its word (colour is never the only cue). */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${status}`}>{status.replace('_', ' ')}</span>;
}
