import type { ApiError } from '../api/client.js';

/** An API refusal as the user reads it: the Error body's message, and its trace id to report. */
export function ErrorNotice({ error }: { error: ApiError }) {
  return (
    <p class="error" role="alert">
      {error.message}
      {error.body.trace_id && <span class="trace"> (trace {error.body.trace_id})</span>}
    </p>
  );
}
