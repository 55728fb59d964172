import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import pino from 'pino';
import { answerClientErrors } from './client-error.js';

describe(answerClientErrors.name, () => {
  let server: Server;
  let port: number;
  let hanging: ServerResponse | undefined;

  beforeEach(async () => {
    // GET /hang starts a response and never ends it; anything else is a plain 200.
    server = createServer((request, response) => {
      if (request.url === '/hang') {
        hanging = response;
        response.writeHead(200, { 'content-type': 'text/plain' });
        response.write('partial');
        return;
      }
      response.end('ok');
    });
    answerClientErrors(server, pino({ level: 'silent' }));
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    port = (server.address() as AddressInfo).port;
  });

  afterEach(async () => {
    hanging = undefined;
    server.closeAllConnections();
    await new Promise((closed) => server.close(closed));
  });

  /** Writes each chunk once the previous answer started arriving; resolves with all bytes read. */
  function exchange(...chunks: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      const pending = [...chunks];
      socket.setEncoding('utf8');
      socket.on('connect', () => socket.write(pending.shift()!));
      socket.on('data', (chunk: string) => {
        received += chunk;
        const next = pending.shift();
        if (next !== undefined) socket.write(next);
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(received));
    });
  }

  function parse(raw: string): { status: number; head: string; body: Record<string, unknown> } {
    const [head = '', body = ''] = raw.split('\r\n\r\n');
    return {
      status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]),
      head,
      body: JSON.parse(body) as Record<string, unknown>,
    };
  }

  it('answers a header over the size limit with 431 and the Error body, then closes', async () => {
    const raw = await exchange(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);

    const { status, head, body } = parse(raw);
    expect(status).toBe(431);
    expect(head).toMatch(/\r\nConnection: close(\r\n|$)/);
    expect(body).toEqual({
      error: 'Request header fields are too large',
      code: 'INVALID_REQUEST',
      timestamp: expect.any(String),
      trace_id: /\r\nX-Request-Id: ([^\r]+)/.exec(head)?.[1],
    });
  });

  it('answers a malformed request with 400 and the Error body', async () => {
    const { status, body } = parse(await exchange('NOT HTTP\r\n\r\n'));

    expect(status).toBe(400);
    expect(body).toMatchObject({ error: 'Malformed HTTP request', code: 'INVALID_REQUEST' });
  });

  it('answers only once however much the client keeps sending', async () => {
    const raw = await exchange('NOT HTTP\r\n\r\n', 'MORE GARBAGE\r\n\r\n');

    expect(raw.match(/HTTP\/1\.1 /g)).toHaveLength(1);
  });

  it('writes nothing into a response that has begun on the same connection', async () => {
    const raw = await exchange('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n', 'NOT HTTP\r\n\r\n');

    expect(raw.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    expect(raw).toMatch(/^HTTP\/1\.1 200 /);
    expect(raw).not.toMatch(/INVALID_REQUEST/);
    expect(hanging?.destroyed).toBe(true);
  });
});
