import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { TokenService } from '../src/auth/token.service.js';
import { type Seeded, PASSWORD, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { LogStreamClient, refusalResponse } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const LIMIT = 3;
const ATTEMPTS = 20;

type Kind = 'bad-version' | 'missing-key' | 'abandoned';

describe('per-user log stream limit after refused and abandoned upgrades', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let buildId: string;
  let port: number;
  let users = 0;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_WS_MAX_CONNECTIONS_PER_USER: String(LIMIT), KILN_WS_POLL_SECONDS: '120' },
    });
    seeded = await seedTenancy(kiln);
    const admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    // A queued build: its stream stays open until the client closes it.
    buildId = (await admin.createBuild(seeded.projectA, 'ws-lockout')).id as string;
    port = Number(new URL(kiln.baseUrl).port);
  });

  afterAll(async () => {
    await kiln.close();
  });

  /** A fresh member of tenant A, so no other test's streams count against it. */
  async function freshViewer(): Promise<Record<string, string>> {
    const tenancy = kiln.app.get(TenancyService);
    const user = await tenancy.createUser(`ws-lockout-${users++}@example.com`, PASSWORD);
    await tenancy.addMember(seeded.tenantA, user.email, 'viewer');
    const { access_token } = await kiln.app.get(TokenService).issue(user.id);
    return { authorization: `Bearer ${access_token}`, 'x-tenant-id': seeded.tenantA };
  }

  function stream(headers: Record<string, string>): LogStreamClient {
    return new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream`,
      { headers },
    );
  }

  /**
   * One hand-written upgrade request with valid credentials. Resolves with the HTTP status the
   * server answered, or undefined when the client hung up without waiting (`abandoned`).
   */
  function rawUpgrade(kind: Kind, headers: Record<string, string>): Promise<number | undefined> {
    const lines = [
      `GET /api/v1/builds/${buildId}/logs/stream HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      'Upgrade: websocket',
      'Connection: Upgrade',
      `Authorization: ${headers['authorization']}`,
      `X-Tenant-ID: ${headers['x-tenant-id']}`,
      `Sec-WebSocket-Version: ${kind === 'bad-version' ? '12' : '13'}`,
      ...(kind === 'missing-key'
        ? []
        : [`Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`]),
    ];
    const request = `${lines.join('\r\n')}\r\n\r\n`;
    return new Promise((done, fail) => {
      const socket: Socket = connect(port, '127.0.0.1', () => {
        socket.write(request, () => {
          if (kind === 'abandoned') {
            socket.destroy();
            done(undefined);
          }
        });
      });
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString('latin1');
        const status = /^HTTP\/1\.1 (\d{3})/.exec(received);
        if (status !== null) {
          socket.destroy();
          done(Number(status[1]));
        }
      });
      socket.on('error', fail);
      socket.on('close', () => done(undefined));
    });
  }

  it('answers a handshake the ws library refuses with the Error body and the version it speaks', async () => {
    const headers = await freshViewer();
    const socket: Socket = connect(port, '127.0.0.1');
    socket.write(
      [
        `GET /api/v1/builds/${buildId}/logs/stream HTTP/1.1`,
        `Host: 127.0.0.1:${port}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Authorization: ${headers['authorization']}`,
        `X-Tenant-ID: ${headers['x-tenant-id']}`,
        'Sec-WebSocket-Version: 12',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        '',
        '',
      ].join('\r\n'),
    );
    let response = '';
    socket.on('data', (chunk: Buffer) => (response += chunk.toString('utf8')));
    await new Promise((done) => socket.on('close', done));

    const [head = '', body = ''] = response.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/\r\nSec-WebSocket-Version: 13\r\n/i);
    expect(head).toMatch(/\r\nContent-Type: application\/json/i);
    expect(JSON.parse(body)).toMatchObject({
      code: 'INVALID_REQUEST',
      error: expect.stringContaining('Sec-WebSocket-Version'),
      trace_id: expect.any(String),
    });
  });

  /** Opens `count` streams at once; returns the opened ones and the refusal statuses. */
  async function openMany(
    headers: Record<string, string>,
    count: number,
  ): Promise<{ opened: LogStreamClient[]; refused: number[] }> {
    const clients = Array.from({ length: count }, () => stream(headers));
    const outcomes = await Promise.all(
      clients.map((client) =>
        client.opened.then(
          () => ({ client, status: 101 }),
          (error: { status?: number }) => ({ client, status: error.status ?? 0 }),
        ),
      ),
    );
    return {
      opened: outcomes.filter((o) => o.status === 101).map((o) => o.client),
      refused: outcomes.filter((o) => o.status !== 101).map((o) => o.status),
    };
  }

  async function closeAll(clients: LogStreamClient[]): Promise<void> {
    for (const client of clients) client.close();
    await Promise.all(clients.map((c) => c.closed));
  }

  /**
   * Opens LIMIT streams one after another, retrying for a while: the server sees a hung-up client
   * only when the socket's close reaches it. Gives up (and returns what it got) after 5 s.
   */
  async function openUpToLimit(headers: Record<string, string>): Promise<LogStreamClient[]> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const opened: LogStreamClient[] = [];
      for (let i = 0; i < LIMIT; i++) {
        const client = stream(headers);
        try {
          await client.opened;
          opened.push(client);
        } catch {
          break;
        }
      }
      if (opened.length === LIMIT || Date.now() > deadline) return opened;
      await closeAll(opened);
      await new Promise((done) => setTimeout(done, 100));
    }
  }

  it.each<[string, Kind, number | undefined]>([
    ['a bad Sec-WebSocket-Version (refused by the ws library)', 'bad-version', 400],
    ['a missing Sec-WebSocket-Key (refused by the ws library)', 'missing-key', 400],
    ['a client that hangs up right after sending the request', 'abandoned', undefined],
  ])(
    'twenty upgrades with %s leave the user its full limit, and the limit still holds',
    async (_name, kind, expected) => {
      const headers = await freshViewer();
      for (let i = 0; i < ATTEMPTS; i++) expect(await rawUpgrade(kind, headers)).toBe(expected);

      const open = await openUpToLimit(headers);
      const over = await refusalResponse(stream(headers)).finally(() => closeAll(open));

      expect(open).toHaveLength(LIMIT);
      expect(over.status).toBe(429);
      expect(Number(over.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(over.body).toMatchObject({ code: 'INVALID_REQUEST' });
    },
  );

  it('holds the limit when upgrades arrive together, after a burst of refused and abandoned ones', async () => {
    const headers = await freshViewer();
    await Promise.all(
      Array.from({ length: ATTEMPTS }, (_, i) =>
        rawUpgrade((['bad-version', 'missing-key', 'abandoned'] as const)[i % 3]!, headers),
      ),
    );
    await closeAll(await openUpToLimit(headers));
    await new Promise((done) => setTimeout(done, 100)); // the server sees those closes

    const burst = await openMany(headers, LIMIT + 4);
    await closeAll(burst.opened);
    const after = await openUpToLimit(headers);
    await closeAll(after);

    expect(burst.opened).toHaveLength(LIMIT);
    expect(burst.refused).toEqual(Array(4).fill(429));
    expect(after).toHaveLength(LIMIT);
  });
});
