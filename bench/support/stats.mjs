/** Nearest-rank percentile of values sorted ascending; NaN when there are none. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** p50, p99 and max of a list (or typed array) of milliseconds. */
export function latencySummary(values) {
  const sorted = Float64Array.from(values).sort();
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length === 0 ? NaN : sorted[sorted.length - 1],
  };
}

export const int = (n) => Math.round(n).toLocaleString('en-US');

export const ms = (n) => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;

export const ratio = (n) => n.toFixed(2);

export const seconds = (millis) => `${(millis / 1000).toFixed(1)} s`;

export const percent = (share) => `${share.toFixed(1)}%`;

export const verdict = (met) => (met ? 'met' : 'MISSED');

/** Milliseconds on the monotonic clock. */
export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

export const delay = (millis) => new Promise((done) => setTimeout(done, millis));

/** A loop that calls `call` every `intervalMs` (less the time the last took) until stopped. */
export function paced(call, intervalMs) {
  const calls = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const begin = nowMs();
      await call();
      const took = nowMs() - begin;
      calls.push([begin, took]);
      await delay(Math.max(0, intervalMs - took));
    }
  })();
  return {
    async stop() {
      stop = true;
      await done;
      return calls;
    },
  };
}

/** A positive integer from the environment variable `name`, or `fallback` when it is unset. */
export function sizeFromEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}
