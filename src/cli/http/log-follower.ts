import WebSocket from 'ws';
import { ApiError, asErrorBody, unreachable } from './api/client.js';

/** One line of a build's log as the stream sends it: a LogEntry with its `seq`. */
export interface LogLine {
  readonly seq: number;
  readonly timestamp: string;
  readonly level: string;
  readonly message: string;
  readonly metadata?: Record<string, string> | null;
}

export interface FollowOptions {
  /** kiln's URL (http or https). */
  readonly url: string;
  readonly token: string;
  readonly tenantId: string;
  readonly buildId: string;
  /** The first line wanted (its seq). */
  readonly from: number;
  /** Called once per line, in order, never twice for one seq. */
  onLine(line: LogLine): void;
  /** Called when the connection dropped and the follower connects again from `from`. */
  onReconnect?(from: number, attempt: number): void;
}

/** A dropped connection is tried again this many times in a row without a new line. */
const MAX_ATTEMPTS_WITHOUT_PROGRESS = 8;
/** The server pings every 30 s: nothing for this long means the connection is gone. */
const SILENCE_MS = 75_000;

type Outcome =
  | { readonly kind: 'ended'; readonly reason: string }
  | { readonly kind: 'dropped'; readonly why: string }
  | { readonly kind: 'refused'; readonly error: ApiError };

/**
 * Follows a build's log over the WebSocket until the server ends it (close 1000, the build's
 * final status as the reason), which it returns. A connection that drops is opened again with
 * `?offset=` the next line wanted, and lines already given are skipped: no gap, no repeat.
 * A refusal before the upgrade (the Error body of a 4xx) is thrown as an ApiError; 5xx and 429
 * refusals are tried again like a drop.
 */
export async function followLog(options: FollowOptions): Promise<string> {
  let next = options.from;
  let attempts = 0;
  let lastWhy: string;
  for (;;) {
    const before = next;
    const outcome = await connectOnce(options, next, (line) => {
      if (line.seq < next) return; // sent again after a reconnect: already given
      next = line.seq + 1;
      options.onLine(line);
    });
    if (outcome.kind === 'ended') return outcome.reason;
    if (outcome.kind === 'refused') {
      const { status } = outcome.error;
      if (status !== 429 && status < 500) throw outcome.error;
      lastWhy = outcome.error.message;
    } else {
      lastWhy = outcome.why;
    }
    attempts = next > before ? 1 : attempts + 1;
    if (attempts > MAX_ATTEMPTS_WITHOUT_PROGRESS) {
      throw unreachable(new Error(`the log stream kept dropping: ${lastWhy}`));
    }
    await new Promise((done) => setTimeout(done, Math.min(250 * 2 ** (attempts - 1), 5_000)));
    options.onReconnect?.(next, attempts);
  }
}

function streamUrl(options: FollowOptions, from: number): string {
  const url = new URL(`${options.url}/api/v1/builds/${options.buildId}/logs/stream`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('offset', String(from));
  return url.toString();
}

function connectOnce(
  options: FollowOptions,
  from: number,
  onLine: (line: LogLine) => void,
): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled: Outcome | undefined;
    const settle = (outcome: Outcome) => {
      settled ??= outcome;
    };
    const ws = new WebSocket(streamUrl(options, from), {
      headers: { authorization: `Bearer ${options.token}`, 'x-tenant-id': options.tenantId },
      handshakeTimeout: 30_000,
    });
    let silence: NodeJS.Timeout | undefined;
    const heard = () => {
      clearTimeout(silence);
      silence = setTimeout(() => {
        settle({ kind: 'dropped', why: 'no word from kiln for 75 s' });
        ws.terminate();
      }, SILENCE_MS);
    };
    heard();
    ws.on('unexpected-response', (request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
        } catch {
          body = undefined;
        }
        const status = response.statusCode ?? 0;
        settle({
          kind: 'refused',
          error: new ApiError(status, asErrorBody(body, status, response.statusMessage ?? '')),
        });
        request.destroy();
        ws.terminate();
      });
    });
    ws.on('ping', heard);
    ws.on('message', (data: Buffer) => {
      heard();
      try {
        onLine(JSON.parse(data.toString('utf8')) as LogLine);
      } catch (error) {
        settle({ kind: 'dropped', why: `a message that is not a log line (${String(error)})` });
        ws.terminate();
      }
    });
    ws.on('error', (error) => settle({ kind: 'dropped', why: error.message }));
    ws.on('close', (code: number, reason: Buffer) => {
      clearTimeout(silence);
      if (code === 1000) settle({ kind: 'ended', reason: reason.toString('utf8') });
      else
        settle({ kind: 'dropped', why: `closed with ${code} ${reason.toString('utf8')}`.trim() });
      resolve(settled!);
    });
  });
}
