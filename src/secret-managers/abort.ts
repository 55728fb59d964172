/**
 * `promise`, or the signal's reason as soon as it aborts (the promise is left to settle): for SDK
 * calls that take no signal of their own, so that a caller's abort never waits on them.
 */
export async function untilAborted<V>(
  promise: Promise<V>,
  signal: AbortSignal | undefined,
): Promise<V> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}
