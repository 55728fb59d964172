import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeClient } from './kube-client.js';

describe(KubeClient.name, () => {
  let server: Server;
  let baseUrl: string;
  const seen: IncomingMessage[] = [];
  let connections = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      if (req.url === '/version' && req.headers.authorization === 'Bearer test-token') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            major: '1',
            minor: '32',
            gitVersion: 'v1.32.0',
            platform: 'linux/amd64',
          }),
        );
        return;
      }
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          code: 401,
          reason: 'Unauthorized',
        }),
      );
    });
    server.on('connection', () => connections++);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((done) => server.close(done));
  });

  it('loads the ESM-only client-node under jest and reads the server version over real HTTP', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'test-token',
      namespace: 'builds',
    });

    await expect(client.serverVersion()).resolves.toEqual({
      major: '1',
      minor: '32',
      gitVersion: 'v1.32.0',
    });
    expect(client.namespace).toBe('builds');
    expect(seen.at(-1)?.headers['user-agent']).toBe('kiln');
  });

  it('names the part of kiln that sent a request in its User-Agent', async () => {
    const client = KubeClient.connect(
      { kind: 'server', server: baseUrl, token: 'test-token', namespace: 'builds' },
      'kiln-operator',
    );
    await client.serverVersion();
    expect(seen.at(-1)?.headers['user-agent']).toBe('kiln-operator');
  });

  it('reuses kept-alive connections instead of opening one per request', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'test-token',
      namespace: 'builds',
    });
    const before = connections;

    for (let i = 0; i < 10; i++) await client.serverVersion();

    // undici hands a connection back a moment after the response: the second request may open
    // a second one; every later request finds one of them idle.
    expect(connections - before).toBeLessThanOrEqual(2);
    expect(seen.slice(-10).map((r) => r.headers.authorization)).toEqual(
      Array(10).fill('Bearer test-token'),
    );
  });

  it('surfaces a rejected credential as an error', async () => {
    const client = KubeClient.connect({
      kind: 'server',
      server: baseUrl,
      token: 'wrong',
      namespace: 'builds',
    });

    await expect(client.serverVersion()).rejects.toMatchObject({ code: 401 });
  });
});
