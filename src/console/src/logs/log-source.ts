import { ApiError, api, tenantHeader, unwrap } from '../api/client.js';
import { session } from '../api/session.js';

/** One stored log line, by its position in the build's log. */
export interface LogLine {
  readonly seq: number;
  readonly timestamp: string;
  readonly level: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  readonly message: string;
  readonly metadata?: Readonly<Record<string, string>> | null | undefined;
}

/** What the connection indicator shows. */
export type Connection =
  | { readonly state: 'loading'; readonly loaded: number; readonly total: number }
  | { readonly state: 'connecting' }
  | { readonly state: 'live' }
  | { readonly state: 'reconnecting'; readonly inMs: number; readonly attempt: number }
  | { readonly state: 'ended'; readonly reason: string }
  | { readonly state: 'failed'; readonly error: string };

export interface LogSink {
  /** Lines in seq order, each seq exactly once (the source drops repeats and never skips). */
  lines(lines: readonly LogLine[]): void;
  connection(connection: Connection): void;
  /** The API refused the token (close 1008 or HTTP 401): the session has ended. */
  expired(): void;
}

const PAGE = 1000;
const PROTOCOL = 'kiln.logs.v1';
const RETRY_MS = [500, 1000, 2000, 5000, 10_000];

/** Pages requested ahead of the one being shown: a finished log loads at the network's pace. */
const PAGES_IN_FLIGHT = 4;

/**
 * A finished build's log, read with GET …/logs pages of 1,000 lines from the start, up to
 * PAGES_IN_FLIGHT at a time once the first page gave the total, each shown in order as soon as
 * the pages before it are ("loading n of m").
 */
export function readPages(buildId: string, sink: LogSink): () => void {
  let stopped = false;
  const fetchPage = (offset: number) =>
    unwrap(
      api.GET('/api/v1/builds/{id}/logs', {
        params: { path: { id: buildId }, query: { offset, limit: PAGE }, header: tenantHeader() },
      }),
    );
  void (async () => {
    try {
      let next = fetchPage(0);
      const ahead: Array<ReturnType<typeof fetchPage>> = [];
      let requested = 0;
      for (;;) {
        const page = await next;
        if (stopped) return;
        sink.lines(page.logs.map((line, i) => ({ ...line, seq: page.offset + i })));
        const loaded = page.offset + page.logs.length;
        sink.connection({ state: 'loading', loaded, total: page.total_lines });
        if (page.logs.length === 0 || loaded >= page.total_lines) {
          sink.connection({ state: 'ended', reason: 'complete' });
          return;
        }
        // Keep PAGES_IN_FLIGHT requests going for the pages after this one.
        requested = Math.max(requested, loaded);
        while (ahead.length < PAGES_IN_FLIGHT && requested < page.total_lines) {
          const request = fetchPage(requested);
          request.catch(() => undefined); // awaited in its turn; not an unhandled rejection
          ahead.push(request);
          requested += PAGE;
        }
        next = ahead.shift() ?? fetchPage(loaded);
      }
    } catch (failure) {
      if (stopped) return;
      if (failure instanceof ApiError && failure.status === 401) return sink.expired();
      sink.connection({
        state: 'failed',
        error: failure instanceof Error ? failure.message : String(failure),
      });
    }
  })();
  return () => {
    stopped = true;
  };
}

/**
 * A running build's log over the WebSocket, from `fromSeq`: the token and tenant go in the
 * subprotocol list (a browser cannot set headers on a WebSocket). After a drop it reconnects with
 * `?offset=` one past the last line it has, so nothing is missed or repeated; a line it already
 * has (seq below that) is dropped. The server ends the stream with 1000 and the build's final
 * status; 1008 means the token expired.
 */
export function followLive(buildId: string, fromSeq: number, sink: LogSink): () => void {
  let next = fromSeq;
  let attempt = 0;
  let socket: WebSocket | undefined;
  let timer: number | undefined;
  let stopped = false;

  const connect = () => {
    const current = session();
    if (current?.tenantId === undefined) return sink.expired();
    sink.connection({ state: 'connecting' });
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const url = `${scheme}//${location.host}/api/v1/builds/${buildId}/logs/stream?offset=${next}`;
    const ws = new WebSocket(url, [
      PROTOCOL,
      `bearer.${current.token}`,
      `tenant.${current.tenantId}`,
    ]);
    socket = ws;
    let batch: LogLine[] = [];
    let flush: number | undefined;
    ws.onopen = () => {
      attempt = 0;
      sink.connection({ state: 'live' });
    };
    ws.onmessage = (event: MessageEvent<string>) => {
      const line = JSON.parse(event.data) as LogLine & { build_id: string };
      if (line.seq < next) return; // already shown (a replay overlapping what we had)
      next = line.seq + 1;
      batch.push(line);
      // Lines arrive one message each; the view gets them once per frame.
      flush ??= window.requestAnimationFrame(() => {
        flush = undefined;
        const lines = batch;
        batch = [];
        sink.lines(lines);
      });
    };
    ws.onclose = (event) => {
      if (flush !== undefined) {
        window.cancelAnimationFrame(flush);
        flush = undefined;
      }
      if (batch.length > 0) sink.lines(batch);
      batch = [];
      if (stopped) return;
      if (event.code === 1000) return sink.connection({ state: 'ended', reason: event.reason });
      if (event.code === 1008) return sink.expired();
      const wait = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]!;
      attempt++;
      sink.connection({ state: 'reconnecting', inMs: wait, attempt });
      timer = window.setTimeout(() => void reconnect(), wait);
    };
  };
  // A refused upgrade looks like a dropped connection to the page (the browser hides its
  // status), so after a failed attempt the build is asked for over HTTP first.
  const reconnect = async () => {
    if (stopped) return;
    if (attempt > 1) {
      try {
        await unwrap(
          api.GET('/api/v1/builds/{id}', {
            params: { path: { id: buildId }, header: tenantHeader() },
          }),
        );
      } catch (failure) {
        if (failure instanceof ApiError && failure.status === 401) return sink.expired();
        if (failure instanceof ApiError && failure.status === 404) {
          return sink.connection({ state: 'ended', reason: 'deleted' });
        }
        // Unreachable or failing: try the socket again after the next wait.
      }
    }
    if (!stopped) connect();
  };
  connect();
  return () => {
    stopped = true;
    window.clearTimeout(timer);
    socket?.close(1000, 'page closed');
  };
}
