import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP JSON export carries it, with its attributes made plain values. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Record<string, string | number | boolean>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
  /** The attributes of the resource that sent it (`service.name`, …). */
  readonly resource: Record<string, string | number | boolean>;
  /** When it started, in nanoseconds since the epoch (decimal digits: compare as BigInt). */
  readonly startTimeUnixNano: string;
}

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
}
interface KeyValue {
  key: string;
  value: AnyValue;
}
interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: KeyValue[];
        status?: { code?: number };
        startTimeUnixNano?: string | number;
      }>;
    }>;
  }>;
}

/**
 * An OTLP/HTTP receiver of traces (`POST /v1/traces`, JSON), as a collector would be: it keeps
 * every span it was sent, and every request (path, content type) so a test can see that none came.
 */
export class OtlpReceiver {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly spans: ReceivedSpan[],
    readonly requests: Array<{ method: string; path: string; contentType: string }>,
  ) {}

  static async start(): Promise<OtlpReceiver> {
    const spans: ReceivedSpan[] = [];
    const requests: OtlpReceiver['requests'] = [];
    const server = createServer((req, res) => {
      void readBody(req).then((body) => {
        requests.push({
          method: req.method ?? '',
          path: req.url ?? '',
          contentType: req.headers['content-type'] ?? '',
        });
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        spans.push(...spansOf(JSON.parse(body.toString('utf8')) as ExportRequest));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const { port } = server.address() as AddressInfo;
    return new OtlpReceiver(server, `http://127.0.0.1:${port}`, spans, requests);
  }

  /** Polls until `pick` finds what it wants among the spans received (20 s at most). */
  async waitFor<T>(what: string, pick: (spans: ReceivedSpan[]) => T | undefined): Promise<T> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      const found = pick(this.spans);
      if (found !== undefined) return found;
      if (Date.now() > deadline) {
        throw new Error(`no ${what} among ${this.spans.length} spans received:
${this.spans.map((s) => `  ${s.name} ${JSON.stringify(s.attributes)}`).join('\n')}`);
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((done) => this.server.close(() => done()));
  }
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function spansOf(request: ExportRequest): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = plain(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: plain(span.attributes),
        statusCode: span.status?.code ?? 0,
        resource,
        startTimeUnixNano: String(span.startTimeUnixNano ?? 0),
      })),
    );
  });
}

function plain(attributes: KeyValue[] = []): Record<string, string | number | boolean> {
  const values: Record<string, string | number | boolean> = {};
  for (const { key, value } of attributes) {
    if (value.stringValue !== undefined) values[key] = value.stringValue;
    else if (value.intValue !== undefined) values[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) values[key] = value.doubleValue;
    else if (value.boolValue !== undefined) values[key] = value.boolValue;
  }
  return values;
}
