import type { IncomingHttpHeaders } from 'node:http';
import WebSocket from 'ws';

export interface StreamMessage {
  build_id: string;
  seq: number;
  timestamp: string;
  level: string;
  message: string;
  metadata: Record<string, string> | null;
}

/** A real `ws` client on a log stream that records every message and how the stream ended. */
export class LogStreamClient {
  readonly messages: StreamMessage[] = [];
  /** Pings the server sent (answered or not, as `autoPong` says). */
  pings = 0;
  readonly opened: Promise<void>;
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly ws: WebSocket;

  constructor(
    url: string,
    options: { headers?: Record<string, string>; protocols?: string[]; autoPong?: boolean } = {},
  ) {
    this.ws = new WebSocket(url, options.protocols ?? [], {
      headers: options.headers,
      autoPong: options.autoPong ?? true,
    });
    this.ws.on('ping', () => this.pings++);
    this.ws.on('message', (data: Buffer) =>
      this.messages.push(JSON.parse(data.toString()) as StreamMessage),
    );
    this.opened = new Promise((done, fail) => {
      this.ws.once('open', () => done());
      this.ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () =>
          fail(
            Object.assign(new Error(`HTTP ${res.statusCode}`), {
              status: res.statusCode,
              headers: res.headers,
              body: JSON.parse(body) as unknown,
            }),
          ),
        );
      });
      this.ws.once('error', fail);
    });
    this.closed = new Promise((done) =>
      this.ws.on('close', (code, reason) => done({ code, reason: reason.toString() })),
    );
    this.opened.catch(() => undefined);
  }

  get protocol(): string {
    return this.ws.protocol;
  }

  send(data: string | Buffer): void {
    this.ws.send(data);
  }

  close(): void {
    this.ws.close();
  }

  terminate(): void {
    this.ws.terminate();
  }

  /** Stops reading from the TCP socket, as a client stuck on a slow link would. */
  pauseReading(): void {
    this.socket.pause();
  }

  resumeReading(): void {
    this.socket.resume();
  }

  private get socket(): { pause(): void; resume(): void } {
    return (this.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
  }

  /** Resolves once `count` messages have arrived. */
  async waitFor(count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.messages.length < count) {
      if (Date.now() > deadline)
        throw new Error(`got ${this.messages.length} of ${count} messages`);
      await new Promise((done) => setTimeout(done, 10));
    }
  }
}

/** The HTTP refusal of an upgrade: status and Error body. */
export async function refusal(client: LogStreamClient): Promise<{ status: number; body: any }> {
  const { status, body } = await refusalResponse(client);
  return { status, body };
}

/** The HTTP refusal of an upgrade with its headers (Retry-After, Sec-WebSocket-Version…). */
export async function refusalResponse(
  client: LogStreamClient,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: any }> {
  try {
    await client.opened;
  } catch (error) {
    const { status, headers, body } = error as {
      status?: number;
      headers?: IncomingHttpHeaders;
      body?: any;
    };
    if (status !== undefined) return { status, headers: headers ?? {}, body };
    throw error;
  }
  throw new Error('the upgrade was accepted');
}
