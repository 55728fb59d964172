import { createServer, type IncomingMessage, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';

/**
 * A minimal HTTP proxy on 127.0.0.1 that only tunnels: `CONNECT host:port` (RFC 9110 9.3.6) to a
 * target it was given answers `200` and relays bytes both ways; any other target, and any request
 * that is not a CONNECT, is refused with 403 before anything is dialled. It stands in for a
 * corporate egress proxy: a client that honours HTTPS_PROXY reaches a name that resolves nowhere
 * (`kiln-fake.vault.azure.net`) because the proxy, not the client, resolves it.
 */
export class ConnectProxy {
  /** Every CONNECT target asked for (`host:port`), tunnelled or refused, oldest first. */
  readonly connects: string[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    /** `host:port` asked for → `host:port` dialled. */
    private readonly targets: ReadonlyMap<string, string>,
  ) {}

  static async start(targets: Readonly<Record<string, string>>): Promise<ConnectProxy> {
    const server = createServer();
    const proxy = new ConnectProxy(server, new Map(Object.entries(targets)));
    server.on('connection', (socket: Socket) => proxy.track(socket));
    server.on('connect', (request: IncomingMessage, client: Socket, head: Buffer) => {
      proxy.tunnel(request, client, head);
    });
    server.on('request', (_request, response) => {
      response.writeHead(403, { 'Content-Length': 0 }).end();
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return proxy;
  }

  /** `http://127.0.0.1:<port>`: the value of HTTPS_PROXY. */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Closes the listener and every connection, tunnels included. */
  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private tunnel(request: IncomingMessage, client: Socket, head: Buffer): void {
    const asked = request.url ?? '';
    this.connects.push(asked);
    const target = this.targets.get(asked);
    if (target === undefined) {
      client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const [host = '', port = ''] = target.split(/:(?=\d+$)/);
    const upstream = this.track(connect(Number(port), host));
    let open = false;
    upstream.once('connect', () => {
      open = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => {
      // Before the tunnel opened the client still waits for an HTTP answer; after, only a close.
      if (open) client.destroy();
      else client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
    });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  }

  private track(socket: Socket): Socket {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    return socket;
  }
}
