import { createServer, request, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ConnectProxy } from './support/connect-proxy.js';

/** What the proxy answered a CONNECT, and the tunnel when it opened one. */
async function connectThrough(
  proxy: ConnectProxy,
  target: string,
): Promise<{ status: number; socket: Socket }> {
  const { hostname, port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const asking = request({ hostname, port, method: 'CONNECT', path: target });
    asking.once('connect', (answer, socket) => resolve({ status: answer.statusCode!, socket }));
    asking.once('error', reject);
    asking.end();
  });
}

/** Everything the peer sends until it closes. */
async function readAll(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

describe(ConnectProxy.name, () => {
  let target: Server;
  let targetPort: number;
  let connections: number;
  let proxy: ConnectProxy;

  beforeEach(async () => {
    connections = 0;
    target = createServer((req, res) => res.end(`hello ${req.headers.host} at ${req.url}`));
    target.on('connection', () => connections++);
    await new Promise<void>((done) => target.listen(0, '127.0.0.1', done));
    targetPort = (target.address() as AddressInfo).port;
  });

  afterEach(async () => {
    await proxy?.stop();
    target.closeAllConnections();
    await new Promise<void>((done) => target.close(() => done()));
  });

  it('tunnels a CONNECT to the address it maps the name to, and records the name', async () => {
    proxy = await ConnectProxy.start({ 'kiln-fake.example:443': `127.0.0.1:${targetPort}` });

    const { status, socket } = await connectThrough(proxy, 'kiln-fake.example:443');
    socket.write('GET /secrets/x HTTP/1.1\r\nHost: kiln-fake.example\r\nConnection: close\r\n\r\n');

    expect(status).toBe(200);
    expect(await readAll(socket)).toMatch(
      /^HTTP\/1\.1 200 [\s\S]*hello kiln-fake\.example at \/secrets\/x$/,
    );
    expect(proxy.connects).toEqual(['kiln-fake.example:443']);
  });

  it('refuses a target it was not given with 403 and dials nothing', async () => {
    proxy = await ConnectProxy.start({ 'kiln-fake.example:443': `127.0.0.1:${targetPort}` });

    const { status } = await connectThrough(proxy, `127.0.0.1:${targetPort}`);

    expect(status).toBe(403);
    expect(proxy.connects).toEqual([`127.0.0.1:${targetPort}`]);
    expect(connections).toBe(0);
  });

  it('answers 502 when nothing listens at the mapped address', async () => {
    const nobody = createServer();
    await new Promise<void>((done) => nobody.listen(0, '127.0.0.1', done));
    const closed = (nobody.address() as AddressInfo).port;
    await new Promise<void>((done) => nobody.close(() => done()));
    proxy = await ConnectProxy.start({ 'kiln-fake.example:443': `127.0.0.1:${closed}` });

    const { status } = await connectThrough(proxy, 'kiln-fake.example:443');

    expect(status).toBe(502);
  });
});
