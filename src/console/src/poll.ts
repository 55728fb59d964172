import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api/client.js';

/** While something shown is active: one request per this many ms, at most. */
export const POLL_MS = 5_000;
/** After a failed request the wait doubles, up to this. */
export const POLL_MAX_BACKOFF_MS = 60_000;

export interface Polled<T> {
  readonly data?: T;
  readonly error?: ApiError;
  /** Whether the answer is being fetched again on a timer (something in it is active). */
  readonly refreshing: boolean;
}

/**
 * Fetches once per `key`, then again every POLL_MS while `active(answer)` holds and the tab is
 * visible; a hidden tab sends nothing and fetches at once when shown again. One request at a
 * time: the next waits for the last answer. Failures back off (doubling to POLL_MAX_BACKOFF_MS);
 * a 401 stops (the session has ended). docs/adr/0028-web-console.md gives the cost: one small GET
 * per 5 s per open tab with active builds, none otherwise.
 */
export function usePoll<T>(
  key: string,
  fetcher: () => Promise<T>,
  active: (answer: T) => boolean,
): Polled<T> {
  const [state, setState] = useState<Polled<T>>({ refreshing: false });
  const fetcherRef = useRef(fetcher);
  fetcherRef.current = fetcher;
  const activeRef = useRef(active);
  activeRef.current = active;

  useEffect(() => {
    let stopped = false;
    let timer: number | undefined;
    let backoff = POLL_MS;
    let wantsRefresh = false;

    const schedule = (ms: number) => {
      window.clearTimeout(timer);
      if (!stopped && document.visibilityState === 'visible') {
        timer = window.setTimeout(() => void run(), ms);
      }
    };
    const run = async () => {
      try {
        const data = await fetcherRef.current();
        if (stopped) return;
        wantsRefresh = activeRef.current(data);
        backoff = POLL_MS;
        setState({ data, refreshing: wantsRefresh });
        if (wantsRefresh) schedule(POLL_MS);
      } catch (failure) {
        if (stopped) return;
        if (!(failure instanceof ApiError)) throw failure;
        setState((last) => ({ ...last, error: failure, refreshing: false }));
        if (failure.status === 401) return;
        wantsRefresh = true;
        backoff = Math.min(backoff * 2, POLL_MAX_BACKOFF_MS);
        schedule(backoff);
      }
    };
    const onVisibility = () => {
      if (document.visibilityState === 'visible' && wantsRefresh) schedule(0);
      else window.clearTimeout(timer);
    };
    document.addEventListener('visibilitychange', onVisibility);
    void run();
    return () => {
      stopped = true;
      window.clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [key]);

  return state;
}
