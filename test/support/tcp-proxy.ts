import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL that can take the database away from kiln and give it back:
 * while it is down, open connections are reset and new ones are closed as soon as they arrive,
 * as a restarting server or a network cut does.
 */
export class TcpProxy {
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private down = false;
  private trigger: { text: string; tripped: () => void } | undefined;

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => this.accept(client));
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await new Promise<void>((done) => proxy.server.listen(0, '127.0.0.1', done));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** `url` with its host and port replaced by the proxy's. */
  proxied(url: string): string {
    const proxied = new URL(url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(this.port);
    return proxied.toString();
  }

  /** Takes the database away now. */
  cut(): void {
    this.down = true;
    for (const socket of this.sockets) socket.resetAndDestroy();
    this.sockets.clear();
  }

  /** Takes the database away when a client sends `text` (in a query), before it reaches it. */
  cutWhenClientSends(text: string): Promise<void> {
    return new Promise((done) => {
      this.trigger = { text, tripped: done };
    });
  }

  restore(): void {
    this.down = false;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private accept(client: Socket): void {
    if (this.down) {
      client.resetAndDestroy();
      return;
    }
    const server = connect(this.target.port, this.target.host);
    this.sockets.add(client).add(server);
    client.on('data', (chunk: Buffer) => {
      const trigger = this.trigger;
      if (trigger !== undefined && chunk.includes(trigger.text)) {
        this.trigger = undefined;
        this.cut();
        trigger.tripped();
        return;
      }
      server.write(chunk);
    });
    server.on('data', (chunk: Buffer) => client.write(chunk));
    for (const [socket, other] of [
      [client, server],
      [server, client],
    ] as const) {
      socket.on('error', () => other.destroy());
      socket.on('close', () => {
        this.sockets.delete(socket);
        other.destroy();
      });
    }
  }
}
