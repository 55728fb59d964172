import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import { BuildRunner } from '../src/runners/build-runner.js';
import { LogSink } from '../src/logs/log-sink.js';
import { craftToken, type Seeded, seedTenancy, tokenFor, validClaims } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { FakeRunner } from './support/fake-runner.js';
import { LogStreamClient, refusal, type StreamMessage } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';
import { createTestTls } from './support/tls.js';

const ENV = {
  KILN_WS_HEARTBEAT_SECONDS: '2',
  KILN_WS_MAX_CONNECTIONS_PER_USER: '5',
  KILN_WS_ALLOWED_ORIGINS: 'https://builds.example.com',
  KILN_WS_STALL_SECONDS: '1',
  // Long enough that every stream here must be driven by notifications, not by the safety poll.
  KILN_WS_POLL_SECONDS: '120',
};
// Origin as it is by default (no allow-list: kiln's own origin only), behind one trusted proxy hop
// so that X-Forwarded-Proto counts.
const OWN_ORIGIN_ENV = { ...ENV, KILN_WS_ALLOWED_ORIGINS: '', KILN_TRUST_PROXY_HOPS: '1' };

describe('live build logs over the WebSocket', () => {
  let database: TestDatabase;
  let kiln: TestApp;
  let replica: TestApp;
  let own: TestApp;
  let seeded: Seeded;
  let token: string;
  let admin: ApiClient;
  let sink: LogSink;
  let runner: FakeRunner;

  beforeAll(async () => {
    database = await createTestDatabase();
    kiln = await startTestApp({ runner: FakeRunner, database, env: ENV });
    replica = await startTestApp({ runner: FakeRunner, database, env: ENV });
    own = await startTestApp({ runner: FakeRunner, database, env: OWN_ORIGIN_ENV });
    seeded = await seedTenancy(kiln);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
    sink = kiln.app.get(LogSink);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
  });

  afterAll(async () => {
    await own.close();
    await replica.close();
    await kiln.close();
    await database.drop();
  });

  let branch = 0;
  async function runningBuild(): Promise<string> {
    const build = await admin.createBuild(seeded.projectA, `ws-${branch++}`);
    await admin.request('POST', `/builds/${build.id}/start`);
    return build.id as string;
  }

  function stream(
    app: TestApp,
    buildId: string,
    query = '',
    headers: Record<string, string> = {},
    extra: object = {},
  ) {
    return new LogStreamClient(
      `${app.baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream${query}`,
      {
        headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA, ...headers },
        ...extra,
      },
    );
  }

  const lines = (from: number, count: number) =>
    Array.from({ length: count }, (_, i) => ({ text: `line ${from + i}` }));

  it('WS-01: replays from ?offset and continues live with no gap and no duplicate, then closes 1000 with the final status', async () => {
    const id = await runningBuild();
    await sink.append(id, lines(0, 10));

    const client = stream(kiln, id, '?offset=3');
    await client.opened;
    await client.waitFor(7);
    await sink.append(id, lines(10, 5));
    await client.waitFor(12);
    await runner.succeed(id);
    const closed = await client.closed;

    expect(client.messages.map((m) => m.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 3));
    expect(client.messages[0]).toEqual({
      build_id: id,
      seq: 3,
      timestamp: expect.any(String),
      level: 'INFO',
      message: 'line 3',
      metadata: null,
    });
    expect(closed).toEqual({ code: 1000, reason: 'success' });
  });

  it('replays a finished build and closes', async () => {
    const id = await runningBuild();
    await sink.append(id, lines(0, 3));
    await runner.fail(id);

    const client = stream(kiln, id);

    expect(await client.closed).toEqual({ code: 1000, reason: 'failed' });
    expect(client.messages.map((m) => m.message)).toEqual(['line 0', 'line 1', 'line 2']);
  });

  it('delivers lines written through another replica (LISTEN/NOTIFY)', async () => {
    const id = await runningBuild();
    const client = stream(replica, id);
    await client.opened;

    await sink.append(id, lines(0, 3));
    await client.waitFor(3);
    await runner.succeed(id);

    expect(await client.closed).toEqual({ code: 1000, reason: 'success' });
    expect(client.messages.map((m) => m.message)).toEqual(['line 0', 'line 1', 'line 2']);
  });

  it('WS-02: twenty random disconnects resumed by offset give exactly the stored log', async () => {
    const id = await runningBuild();
    const total = 2000;
    const writer = (async () => {
      for (let i = 0; i < total; i += 50) {
        await sink.append(id, lines(i, 50));
        await new Promise((done) => setTimeout(done, 5));
      }
      await runner.succeed(id);
    })();

    const received: StreamMessage[] = [];
    for (let round = 0; round < 21; round++) {
      const offset = received.length;
      const client = stream(kiln, id, `?offset=${offset}`);
      await client.opened;
      if (round < 20) {
        await new Promise((done) => setTimeout(done, 5 + Math.random() * 40));
        client.terminate();
        await client.closed;
      } else {
        expect((await client.closed).code).toBe(1000);
      }
      // Each connection must send exactly offset, offset + 1, …: no duplicate, no gap.
      expect(client.messages.map((m) => m.seq)).toEqual(
        Array.from({ length: client.messages.length }, (_, i) => offset + i),
      );
      received.push(...client.messages);
    }
    await writer;

    const stored = await kiln.dataSource.query<
      Array<{ seq: number; ts: Date; level: string; message: string }>
    >('SELECT seq, ts, level, message FROM build_log_lines WHERE build_id = $1 ORDER BY seq', [id]);
    expect(stored.map((line) => line.message)).toEqual(lines(0, total).map((line) => line.text));
    expect(
      received.map(({ seq, timestamp, level, message }) => ({ seq, timestamp, level, message })),
    ).toEqual(
      stored.map(({ seq, ts, level, message }) => ({
        seq,
        timestamp: ts.toISOString(),
        level,
        message,
      })),
    );
  });

  it.each([
    ['no credentials', { authorization: '' }, '', 401, 'UNAUTHORIZED'],
    ['a bad token', { authorization: 'Bearer x.y.z' }, '', 401, 'UNAUTHORIZED'],
    ['a missing tenant', { 'x-tenant-id': '' }, '', 400, 'INVALID_REQUEST'],
    ['another tenant', { 'x-tenant-id': 'TENANT_B' }, '', 403, 'FORBIDDEN'],
    ['a bad offset', {}, '?offset=-2', 400, 'INVALID_REQUEST'],
    ['an offset past the largest seq (int4)', {}, '?offset=2147483648', 400, 'INVALID_REQUEST'],
    [
      'an Origin not on the allowlist',
      { origin: 'https://builds.example.com.evil.io' },
      '',
      403,
      'FORBIDDEN',
    ],
  ])(
    'WSS-01: refuses %s before the upgrade with the Error body',
    async (_name, headers, query, status, code) => {
      const id = await runningBuild();
      const resolved = Object.fromEntries(
        Object.entries(headers).map(([k, v]) => [k, v === 'TENANT_B' ? seeded.tenantB : v]),
      );

      const result = await refusal(stream(kiln, id, query, resolved));

      expect(result).toEqual({
        status,
        body: expect.objectContaining({ code, trace_id: expect.any(String) }),
      });
    },
  );

  describe('browser Origin', () => {
    // `kiln` has an allow-list and trusts no proxy; `own` has no allow-list and trusts one hop.
    type AppName = 'kiln' | 'own';

    /**
     * A real `ws` handshake as tenant A's admin: 101 (then closed), or the refusal's status and
     * Error code. `ca` trusts a TLS listener's certificate.
     */
    function handshake(
      url: string,
      headers: Record<string, string>,
      ca?: string,
    ): Promise<{ status: number; code?: string }> {
      return new Promise((done, fail) => {
        const ws = new WebSocket(url, [], {
          headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA, ...headers },
          ...(ca === undefined ? {} : { ca }),
        });
        ws.once('open', () => {
          ws.once('close', () => done({ status: 101 }));
          ws.close();
        });
        ws.once('unexpected-response', (_request, response) => {
          let body = '';
          response.on('data', (chunk: Buffer) => (body += chunk.toString()));
          response.on('end', () =>
            done({
              status: response.statusCode!,
              code: (JSON.parse(body) as { code: string }).code,
            }),
          );
        });
        ws.once('error', fail);
      });
    }

    /**
     * Opens a log stream of a running build on the app with `headers`, in which `SELF` stands for
     * the app's host:port and `SELF+1` for the next port on its host.
     */
    async function upgradeOn(name: AppName, headers: Record<string, string>) {
      const app = name === 'kiln' ? kiln : own;
      const { host, hostname, port } = new URL(app.baseUrl);
      const resolved = Object.fromEntries(
        Object.entries(headers).map(([key, value]) => [
          key,
          value.replace('SELF+1', `${hostname}:${Number(port) + 1}`).replace('SELF', host),
        ]),
      );
      const url = `${app.baseUrl.replace('http', 'ws')}/api/v1/builds/${await runningBuild()}/logs/stream`;
      return handshake(url, resolved);
    }

    it.each<[string, AppName, Record<string, string>]>([
      ['kiln’s own origin, with an allow-list set', 'kiln', { origin: 'http://SELF' }],
      ['an origin on the allow-list', 'kiln', { origin: 'https://builds.example.com' }],
      ['kiln’s own origin, with no allow-list', 'own', { origin: 'http://SELF' }],
      [
        'the Host the client asked for, not the address kiln listens on',
        'own',
        { host: 'kiln.example', origin: 'http://kiln.example' },
      ],
      [
        'kiln’s own https origin behind a trusted proxy',
        'own',
        { origin: 'https://SELF', 'x-forwarded-proto': 'https' },
      ],
      [
        'a trusted proxy that writes wss for an upgrade',
        'own',
        { origin: 'https://SELF', 'x-forwarded-proto': 'wss' },
      ],
      [
        'the entry the trusted proxy appended after the client’s own',
        'own',
        { origin: 'https://SELF', 'x-forwarded-proto': 'http, https' },
      ],
    ])('WSS-02: opens for %s', async (_name, app, headers) => {
      expect(await upgradeOn(app, headers)).toEqual({ status: 101 });
    });

    it.each<[string, AppName, Record<string, string>]>([
      ['a cross-site origin, with an allow-list set', 'kiln', { origin: 'http://evil.example' }],
      ['a cross-site origin, with no allow-list', 'own', { origin: 'http://evil.example' }],
      ['the opaque origin null', 'own', { origin: 'null' }],
      ['kiln’s host on another port, with an allow-list set', 'kiln', { origin: 'http://SELF+1' }],
      ['kiln’s host on another port, with no allow-list', 'own', { origin: 'http://SELF+1' }],
      [
        'kiln’s address when the client asked for another Host',
        'own',
        { host: 'kiln.example', origin: 'http://SELF' },
      ],
      ['kiln’s host over https on a plain connection', 'own', { origin: 'https://SELF' }],
      [
        'https from the X-Forwarded-Proto of a peer kiln does not trust',
        'kiln',
        { origin: 'https://SELF', 'x-forwarded-proto': 'https' },
      ],
      [
        'https the client wrote before the trusted proxy’s http',
        'own',
        { origin: 'https://SELF', 'x-forwarded-proto': 'https, http' },
      ],
      [
        'an origin another kiln allows, with no allow-list',
        'own',
        { origin: 'https://builds.example.com' },
      ],
    ])('WSS-02: refuses %s with 403 before the upgrade', async (_name, app, headers) => {
      expect(await upgradeOn(app, headers)).toEqual({ status: 403, code: 'FORBIDDEN' });
    });

    it('WSS-02: takes https as the scheme of a TLS connection', async () => {
      // kiln itself listens on plain HTTP: a TLS listener that hands its upgrades to kiln's server
      // gives kiln's upgrade handling an encrypted connection.
      const tls = createTestTls();
      const front = createTlsServer({ cert: tls.cert, key: tls.key });
      front.on('upgrade', (...upgrade: unknown[]) =>
        kiln.app.getHttpServer().emit('upgrade', ...upgrade),
      );
      await new Promise<void>((done) => front.listen(0, '127.0.0.1', done));
      const { port } = front.address() as AddressInfo;
      const url = `wss://127.0.0.1:${port}/api/v1/builds/${await runningBuild()}/logs/stream`;
      try {
        expect(await handshake(url, { origin: `https://127.0.0.1:${port}` }, tls.ca)).toEqual({
          status: 101,
        });
        expect(await handshake(url, { origin: `http://127.0.0.1:${port}` }, tls.ca)).toEqual({
          status: 403,
          code: 'FORBIDDEN',
        });
      } finally {
        front.closeAllConnections();
        await new Promise((done) => front.close(done));
      }
    });
  });

  it('accepts the largest offset a seq can have (2147483647)', async () => {
    const id = await runningBuild();
    const client = stream(kiln, id, '?offset=2147483647');

    await expect(client.opened).resolves.toBeUndefined();

    client.close();
    await client.closed;
  });

  it('answers 404 for another tenant’s build, a missing build and a path without /stream', async () => {
    const other = new ApiClient(
      replica,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
    const theirs = await other.createBuild(seeded.projectB, 'ws-theirs');

    expect((await refusal(stream(kiln, theirs.id))).status).toBe(404);
    expect((await refusal(stream(kiln, '6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11'))).status).toBe(404);
    const noSuffix = new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${theirs.id}/logs`,
      {
        headers: { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA },
      },
    );
    expect((await refusal(noSuffix)).status).toBe(404);
  });

  it('WSS-04: takes the token and tenant as subprotocol entries and echoes only kiln.logs.v1', async () => {
    const id = await runningBuild();
    const client = new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${id}/logs/stream`,
      {
        protocols: ['kiln.logs.v1', `bearer.${token}`, `tenant.${seeded.tenantA}`],
        headers: { origin: 'https://builds.example.com' },
      },
    );

    await client.opened;

    expect(client.protocol).toBe('kiln.logs.v1');
    client.close();
  });

  it('WS-04: terminates a client that stops answering pings within two heartbeats', async () => {
    const id = await runningBuild();
    const client = stream(kiln, id, '', {}, { autoPong: false });
    await client.opened;

    const closed = await client.closed;

    expect(closed.code).toBe(1006);
    // One ping unanswered, and the next heartbeat drops the client instead of pinging again.
    expect(client.pings).toBe(1);
    expect(
      kiln.logs.find(
        (l) => l['msg'] === 'log stream client stopped answering pings' && l['build_id'] === id,
      ),
    ).toBeDefined();
  });

  it('WS-06: closes a client that sends a message over 64 KiB with 1009', async () => {
    const id = await runningBuild();
    const client = stream(kiln, id);
    await client.opened;

    client.send(Buffer.alloc(65 * 1024));

    expect((await client.closed).code).toBe(1009);
  });

  it('WS-05: closes a client that stops reading with 1013, without delaying a client that reads', async () => {
    // A client that reads nothing answers no ping either: here the heartbeat is far off, so the
    // stall limit (1 s), not the missed pongs, drops it, however slowly a loaded machine goes.
    const patient = await startTestApp({
      runner: FakeRunner,
      database,
      env: { ...ENV, KILN_WS_HEARTBEAT_SECONDS: '600' },
    });
    const id = await runningBuild();
    const slow = stream(patient, id);
    const fast = stream(patient, id);
    const gaveUp = () =>
      patient.logs.find(
        (l) => l['msg'] === 'log stream client too slow; closing it' && l['build_id'] === id,
      );
    try {
      await Promise.all([slow.opened, fast.opened]);
      slow.pauseReading();
      const line = 'z'.repeat(60 * 1024);

      for (let i = 0; i < 400; i += 50)
        await sink.append(
          id,
          Array.from({ length: 50 }, () => ({ text: line })),
        );
      await fast.waitFor(400, 20_000);
      // Until the server gave up on it (the stall limit), not a fixed wait past the limit.
      for (const deadline = Date.now() + 20_000; !gaveUp() && Date.now() < deadline;)
        await new Promise((done) => setTimeout(done, 50));
      slow.resumeReading();

      // The server dropped it: 1013 if the close frame got through, else an abnormal close.
      expect([1013, 1006]).toContain((await slow.closed).code);
      expect(slow.messages.length).toBeLessThan(400);
      expect(gaveUp()).toBeDefined();
      expect(fast.messages.map((m) => m.seq)).toEqual(Array.from({ length: 400 }, (_, i) => i));
    } finally {
      fast.close();
      slow.terminate();
      await patient.close();
    }
  });

  it('AUTHN-07: closes the stream with 1008 when the caller’s token expires', async () => {
    const id = await runningBuild();
    const now = Math.floor(Date.now() / 1000);
    // Expired 58 s ago: accepted for 2 s more under the 60 s clock tolerance.
    const expiring = craftToken(validClaims(seeded.users.admin.id, { exp: now - 58 }));
    const client = stream(kiln, id, '', { authorization: `Bearer ${expiring}` });
    await client.opened;

    expect(await client.closed).toEqual({ code: 1008, reason: 'access token expired' });
  });

  it('limits the open streams per user (429 before the upgrade)', async () => {
    const id = await runningBuild();
    // Its own user, so streams other tests are still closing do not count.
    const viewer = {
      authorization: `Bearer ${await tokenFor(kiln.baseUrl, seeded.users.viewer.email)}`,
    };
    const open = Array.from({ length: 5 }, () => stream(kiln, id, '', viewer));
    await Promise.all(open.map((c) => c.opened));

    const refused = await refusal(stream(kiln, id, '', viewer));

    expect(refused.status).toBe(429);
    for (const client of open) client.close();
    await Promise.all(open.map((c) => c.closed));
  });
});
