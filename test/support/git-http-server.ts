import { spawn } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestTls } from './tls.js';

export interface GitHttpServerOptions {
  /** The directory of the bare repositories it serves (GitDaemon's basePath, say). */
  readonly root: string;
  /** The only Basic credentials it accepts. */
  readonly username: string;
  readonly password: string;
  readonly tls: TestTls;
}

/**
 * Git's smart HTTP over HTTPS on 127.0.0.1, the way a forge serves it: every request needs Basic
 * credentials (401 with `WWW-Authenticate: Basic realm="kiln"` otherwise) and is then answered by
 * a real `git http-backend` run as a CGI script. It records the Authorization header of every
 * request, so a test sees what a client sent and when.
 */
export class GitHttpServer {
  /** The Authorization header of each request in order (undefined: the request had none). */
  readonly authorizations: (string | undefined)[] = [];

  private constructor(
    private readonly server: Server,
    private readonly options: GitHttpServerOptions,
  ) {}

  static async start(options: GitHttpServerOptions): Promise<GitHttpServer> {
    const server = createServer({ cert: options.tls.cert, key: options.tls.key });
    const git = new GitHttpServer(server, options);
    server.on('request', (request: IncomingMessage, response: ServerResponse) =>
      git.answer(request, response),
    );
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return git;
  }

  /** `https://127.0.0.1:<port>/<name>` (e.g. `app.git`). */
  url(name: string): string {
    return `https://127.0.0.1:${(this.server.address() as AddressInfo).port}/${name}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((done) => this.server.close(done));
  }

  private answer(request: IncomingMessage, response: ServerResponse): void {
    const authorization = request.headers.authorization;
    this.authorizations.push(authorization);
    const { username, password } = this.options;
    const expected = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    if (authorization !== expected) {
      request.resume();
      response.writeHead(401, { 'WWW-Authenticate': 'Basic realm="kiln"' }).end('Unauthorized\n');
      return;
    }
    const url = new URL(request.url ?? '/', 'https://127.0.0.1');
    const header = (name: string): string => {
      const value = request.headers[name];
      return typeof value === 'string' ? value : '';
    };
    // The CGI variables git-http-backend reads (git-http-backend(1)).
    const backend = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env['PATH'] ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: this.options.root,
        GIT_HTTP_EXPORT_ALL: '1',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        REQUEST_METHOD: request.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: header('content-type'),
        REMOTE_USER: username,
        REMOTE_ADDR: request.socket.remoteAddress ?? '127.0.0.1',
        HTTP_GIT_PROTOCOL: header('git-protocol'),
        HTTP_CONTENT_ENCODING: header('content-encoding'),
      },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    backend.stdin.on('error', () => undefined); // it may exit before it read the whole request
    request.pipe(backend.stdin);
    let head = Buffer.alloc(0);
    let answered = false;
    backend.stdout.on('data', (chunk: Buffer) => {
      if (answered) {
        response.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      answered = true;
      const { status, headers } = cgiHeaders(head.subarray(0, end).toString('latin1'));
      response.writeHead(status, headers);
      response.write(head.subarray(end + 4));
    });
    backend.once('close', (code) => {
      if (!answered) response.writeHead(500).end(`git http-backend exited with ${code}\n`);
      else response.end();
    });
  }
}

/** A CGI response's header block: its `Status:` (200 when absent) and the other headers. */
function cgiHeaders(block: string): { status: number; headers: Record<string, string> } {
  let status = 200;
  const headers: Record<string, string> = {};
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10);
    else headers[name] = value;
  }
  return { status, headers };
}
