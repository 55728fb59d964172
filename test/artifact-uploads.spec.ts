import { connect, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { DataSource } from 'typeorm';
import { BuildArtifacts, UPLOAD_LIMIT_FACTOR } from '../src/artifacts/build-artifacts.js';
import { BuildLifecycle } from '../src/lifecycle/build-lifecycle.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { SPDX } from './support/artifact-documents.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** KILN_ARTIFACT_MAX_BYTES here: small enough to cross with real documents. */
const CAP = 64 * 1024;
/** Where an upload is refused with 413 (an SBOM; a scan report is refused past CAP). */
const LIMIT = CAP * UPLOAD_LIMIT_FACTOR;
/** What the streaming tests would send in all: far more than LIMIT and the sockets' buffers. */
const STREAMED = 64 * 1024 * 1024;

const TRIVY_REPORT = {
  SchemaVersion: 2,
  ArtifactName: 'registry.example.com/team/app@sha256:' + 'a'.repeat(64),
  ArtifactType: 'container_image',
  Results: [
    {
      Target: 'registry.example.com/team/app (alpine 3.19.1)',
      Class: 'os-pkgs',
      Type: 'alpine',
      Vulnerabilities: [
        {
          VulnerabilityID: 'CVE-2024-2511',
          PkgName: 'openssl',
          InstalledVersion: '3.0.13-r0',
          Severity: 'HIGH',
        },
      ],
    },
  ],
};

/** `levels` arrays nested in one another, as JSON text. */
function nestedArrays(levels: number): string {
  return `${'['.repeat(levels)}${']'.repeat(levels)}`;
}

/** The SPDX document with `levels` arrays under `annotations` (the body itself is one more). */
function deepSpdx(levels: number, packages = 1): string {
  const text = JSON.stringify({ ...SPDX, packages: spdxPackages(packages), annotations: 0 });
  return text.replace('"annotations":0', `"annotations":${nestedArrays(levels)}`);
}

function spdxPackages(count: number): object[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `package-${i}`,
    SPDXID: `SPDXRef-Package-${i}`,
    versionInfo: '1.0.0',
    downloadLocation: 'NOASSERTION',
  }));
}

/** A valid SPDX document of exactly `bytes` bytes (whitespace pads it). */
function spdxOfSize(bytes: number): string {
  const text = JSON.stringify({ ...SPDX, packages: spdxPackages(Math.floor(bytes / 150)) });
  if (text.length > bytes) throw new Error(`${text.length} bytes already`);
  return text + ' '.repeat(bytes - text.length);
}

interface RawAnswer {
  /** undefined when the connection closed before a whole response arrived. */
  readonly status: number | undefined;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Body bytes this client had written to its socket when the response's first byte arrived. */
  readonly sentBeforeAnswer: number;
  /** Resolves when the server closed the connection (its FIN, or a reset). */
  readonly serverClosed: Promise<void>;
  readonly socket: Socket;
}

/**
 * PUTs a body of `total` bytes of `fill` over a plain socket, with or without Content-Length
 * (`declared`), writing only as fast as the server reads (it waits for 'drain'), and stops writing
 * as soon as a response arrives or the connection closes. What it had written by then tells how
 * much of the body the server let in.
 */
function rawPut(
  baseUrl: string,
  path: string,
  token: string,
  options: { total: number; declared?: number; prefix?: string },
): Promise<RawAnswer> {
  const { port, hostname } = new URL(baseUrl);
  const socket = connect(Number(port), hostname);
  const chunked = options.declared === undefined;
  const head = [
    `PUT ${path} HTTP/1.1`,
    `Host: ${hostname}:${port}`,
    `Authorization: Bearer ${token}`,
    'Content-Type: application/json',
    chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${options.declared}`,
    '',
    '',
  ].join('\r\n');
  let received = Buffer.alloc(0);
  let sent = 0;
  let sentBeforeAnswer: number | undefined;
  let gone = false;
  const serverClosed = new Promise<void>((resolve) => {
    socket.once('end', resolve);
    socket.once('close', () => resolve());
  });
  socket.on('error', () => undefined); // EPIPE/ECONNRESET once the server closed: expected
  socket.on('close', () => (gone = true));
  const wake: Array<() => void> = [];
  const wakeAll = (): void => wake.splice(0).forEach((resume) => resume());
  socket.on('data', (data: Buffer) => {
    sentBeforeAnswer ??= sent;
    received = Buffer.concat([received, data]);
    wakeAll();
  });
  socket.on('close', wakeAll);

  const answer = (): RawAnswer | undefined => {
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const [statusLine = '', ...lines] = received.subarray(0, end).toString('latin1').split('\r\n');
    const headers = Object.fromEntries(
      lines.map((line) => {
        const colon = line.indexOf(':');
        return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
      }),
    );
    const body = received.subarray(end + 4);
    if (body.length < Number(headers['content-length'] ?? 0)) return undefined;
    return {
      status: Number(statusLine.split(' ')[1]),
      headers,
      body: body.toString('utf8'),
      sentBeforeAnswer: sentBeforeAnswer ?? sent,
      serverClosed,
      socket,
    };
  };

  return new Promise<RawAnswer>((resolve, reject) => {
    socket.once('connect', () => {
      void (async () => {
        socket.write(head);
        const prefix = Buffer.from(options.prefix ?? '');
        const block = Buffer.alloc(64 * 1024, ' ');
        while (sent < options.total && sentBeforeAnswer === undefined && !gone) {
          const piece = sent < prefix.length ? prefix : block;
          const part = piece.subarray(0, Math.min(piece.length, options.total - sent));
          const framed = chunked
            ? Buffer.concat([
                Buffer.from(`${part.length.toString(16)}\r\n`),
                part,
                Buffer.from('\r\n'),
              ])
            : part;
          const flowing = socket.write(framed);
          sent += part.length;
          await new Promise<void>((resume) => {
            if (flowing)
              setImmediate(resume); // lets a response that arrived be seen
            else {
              wake.push(resume);
              socket.once('drain', wakeAll);
            }
          });
        }
        // A whole body sent: end it (chunked), or say no more is coming (a declared length).
        if (sent >= options.total && options.total > 0 && !gone) {
          if (chunked) socket.write('0\r\n\r\n');
          else if (options.declared! > sent) socket.end();
        }
        while (answer() === undefined && !gone) {
          await new Promise<void>((resume) => wake.push(resume));
        }
        resolve(
          answer() ?? {
            status: undefined,
            headers: {},
            body: '',
            sentBeforeAnswer: sent,
            serverClosed,
            socket,
          },
        );
      })().catch(reject);
    });
    socket.once('error', (error) => {
      if (sent === 0) reject(error);
    });
  });
}

describe('Artifact uploads: one JSON depth limit, a byte limit read as it streams, reads that never answer 500', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let artifacts: BuildArtifacts;
  let dataSource: DataSource;
  /** The server's end of each connection, by the client's port. */
  const serverSockets = new Map<number, Socket>();

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_ARTIFACT_MAX_BYTES: String(CAP) },
    });
    seeded = await seedTenancy(kiln);
    admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    artifacts = kiln.app.get(BuildArtifacts);
    dataSource = kiln.app.get(DataSource);
    kiln.app
      .getHttpServer()
      .on('connection', (socket: Socket) => serverSockets.set(socket.remotePort!, socket));
  });

  /** Bytes the server read from the connection of `answer`, once it let the connection go. */
  async function serverRead(answer: RawAnswer): Promise<number> {
    const socket = serverSockets.get(answer.socket.localPort!)!;
    if (!socket.destroyed) await new Promise((resolve) => socket.once('close', resolve));
    return socket.bytesRead;
  }

  afterAll(async () => {
    await kiln.close();
  });

  let serial = 0;
  async function runningBuild(buildConfig: Record<string, unknown> = {}): Promise<string> {
    const manifest = wizardManifest('kaniko');
    manifest['name'] = `uploads ${serial}`;
    // Each build its own configuration: two equal ones would be duplicates (ADR 0030).
    manifest['environment'] = { RUN: String(serial++) };
    Object.assign(manifest['build_config'] as object, buildConfig);
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    const id = (await jsonOf(response)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  function upload(id: string, kind: 'sbom' | 'scan', body: string, token: string) {
    return fetch(`${kiln.baseUrl}/api/v1/builds/${id}/${kind}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body,
    });
  }

  async function stored(id: string): Promise<number> {
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM build_artifacts WHERE build_id = $1',
      [id],
    );
    return rows[0]!.n;
  }

  /** A row as older code, a bug or a damaged disk could have left it. */
  async function storeRow(
    id: string,
    kind: 'sbom' | 'scan',
    content: Buffer,
    truncated = false,
  ): Promise<void> {
    await dataSource.query(
      `INSERT INTO build_artifacts
         (build_id, kind, tool, format, content, received_bytes, truncated, summary)
       VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
      [
        id,
        kind,
        kind === 'sbom' ? 'syft' : 'trivy',
        kind === 'sbom' ? 'spdx-json' : 'trivy-findings',
        content,
        content.length,
        truncated,
      ],
    );
  }

  function expectErrorBody(body: Record<string, unknown>, code: string): void {
    expect(body).toEqual({
      error: expect.any(String),
      code,
      timestamp: expect.any(String),
      trace_id: expect.any(String),
      ...(body['details'] === undefined ? {} : { details: expect.any(Object) }),
    });
  }

  describe('the JSON depth limit of every other body', () => {
    it.each([
      ['an SBOM 10,000 levels deep', 'sbom', () => deepSpdx(10_000)],
      ['an SBOM one level over the limit', 'sbom', () => deepSpdx(64)],
      ['an SBOM over the cap and 10,000 levels deep', 'sbom', () => deepSpdx(10_000, 800)],
      [
        'a scan report 10,000 levels deep',
        'scan',
        () =>
          JSON.stringify({ ...TRIVY_REPORT, Extra: 0 }).replace(
            '"Extra":0',
            `"Extra":${nestedArrays(10_000)}`,
          ),
      ],
    ] as const)(
      'refuses %s with 400 naming the limit, stores nothing, and the read stays a 404',
      async (_name, kind, body) => {
        const id = await runningBuild();
        const tokens = (await artifacts.mintUploadTokens(id, 600))!;

        const response = await upload(id, kind, body(), tokens[kind]);

        expect(response.status).toBe(400);
        const error = await jsonOf(response);
        expectErrorBody(error, 'INVALID_REQUEST');
        expect(error.error).toBe('The request body nests arrays and objects deeper than 64 levels');
        expect(error.details).toEqual({ body: expect.stringMatching(/64 levels/) });
        expect(await stored(id)).toBe(0);
        expect((await admin.request('GET', `/builds/${id}/${kind}`)).status).toBe(404);
      },
    );

    it('accepts an SBOM that nests exactly to the limit, and serves it', async () => {
      const id = await runningBuild();
      const tokens = (await artifacts.mintUploadTokens(id, 600))!;
      const text = deepSpdx(63);

      expect((await upload(id, 'sbom', text, tokens.sbom)).status).toBe(204);
      const got = await admin.request('GET', `/builds/${id}/sbom`);

      expect(got.status).toBe(200);
      expect((await jsonOf(got)).document).toEqual(JSON.parse(text));
    });
  });

  describe('the byte limit, read as the body streams', () => {
    it.each([
      ['an SBOM streamed without Content-Length', 'sbom', undefined],
      ['an SBOM declaring 1 GiB', 'sbom', 1024 ** 3],
      ['a scan report streamed without Content-Length', 'scan', undefined],
      ['a scan report declaring 1 GiB', 'scan', 1024 ** 3],
    ] as const)(
      'answers 413 to %s before reading it all, closes the connection, and stores nothing',
      async (_name, kind, declared) => {
        const id = await runningBuild();
        const tokens = (await artifacts.mintUploadTokens(id, 600))!;

        const answer = await rawPut(kiln.baseUrl, `/api/v1/builds/${id}/${kind}`, tokens[kind], {
          total: declared === undefined ? STREAMED : Math.min(declared, STREAMED),
          ...(declared === undefined ? {} : { declared }),
          prefix: JSON.stringify(kind === 'sbom' ? SPDX : TRIVY_REPORT).slice(0, -1),
        });

        expect(answer.status).toBe(413);
        expectErrorBody(JSON.parse(answer.body), 'INVALID_REQUEST');
        expect(JSON.parse(answer.body).error).toMatch(/KILN_ARTIFACT_MAX_BYTES/);
        // The answer came while the client was still sending: the server did not wait for the rest.
        expect(answer.sentBeforeAnswer).toBeLessThan(
          declared === undefined ? STREAMED : Math.min(declared, STREAMED),
        );
        // And it will not read the rest: the connection is closed, not kept for the next request.
        expect(answer.headers['connection']).toBe('close');
        await answer.serverClosed;
        // From its end of the connection, the server read the limit and a few socket reads more.
        expect(await serverRead(answer)).toBeLessThan(LIMIT + 1024 * 1024);
        answer.socket.destroy();
        expect(await stored(id)).toBe(0);
      },
    );

    it.each([
      ['an SBOM', 'sbom', LIMIT + 1],
      ['a scan report', 'scan', CAP + 1],
    ] as const)(
      'refuses %s declared one byte over its limit before a byte of it is sent',
      async (_name, kind, declared) => {
        const id = await runningBuild();
        const tokens = (await artifacts.mintUploadTokens(id, 600))!;

        // Headers only: a server that waited for the body would never answer.
        const answer = await rawPut(kiln.baseUrl, `/api/v1/builds/${id}/${kind}`, tokens[kind], {
          total: 0,
          declared,
        });

        expect(answer.status).toBe(413);
        expect(answer.sentBeforeAnswer).toBe(0);
        expect(answer.headers['connection']).toBe('close');
        await answer.serverClosed;
        answer.socket.destroy();
        expect(await stored(id)).toBe(0);
      },
    );

    it('gives the upload step’s client (fetch with a body) the 413 and its Error body', async () => {
      const id = await runningBuild();
      const tokens = (await artifacts.mintUploadTokens(id, 600))!;

      const response = await upload(id, 'sbom', spdxOfSize(LIMIT + 1), tokens.sbom);

      expect(response.status).toBe(413);
      const error = await jsonOf(response);
      expectErrorBody(error, 'INVALID_REQUEST');
      expect(error.error).toBe(
        `The SBOM is larger than ${LIMIT} bytes (${UPLOAD_LIMIT_FACTOR} × KILN_ARTIFACT_MAX_BYTES)`,
      );
      expect(await stored(id)).toBe(0);
    });

    it('stores an SBOM of exactly the limit truncated to the cap', async () => {
      const id = await runningBuild();
      const tokens = (await artifacts.mintUploadTokens(id, 600))!;
      const text = spdxOfSize(LIMIT);

      expect((await upload(id, 'sbom', text, tokens.sbom)).status).toBe(204);
      const sbom = await jsonOf(await admin.request('GET', `/builds/${id}/sbom`));

      expect(sbom).toMatchObject({
        truncated: true,
        format: 'spdx-json',
        received_bytes: LIMIT,
        document: null,
        partial: text.slice(0, CAP),
      });
    });
  });

  describe('an SBOM over the cap is checked whole before it is stored truncated', () => {
    const big = JSON.stringify({ ...SPDX, packages: spdxPackages(1500) });

    it.each([
      ['JSON cut off (not JSON)', () => big.slice(0, 2 * CAP)],
      ['an SPDX start followed by garbage', () => big.slice(0, CAP) + 'x'.repeat(CAP)],
      ['JSON of no known format', () => JSON.stringify({ hello: 'x'.repeat(2 * CAP) })],
      [
        'SPDX 3 (JSON-LD)',
        () =>
          JSON.stringify({
            '@context': 'https://spdx.org/rdf/3.0.1/spdx-context.jsonld',
            '@graph': spdxPackages(800),
          }),
      ],
    ])('refuses %s with 400 and stores nothing', async (_name, body) => {
      const id = await runningBuild();
      const tokens = (await artifacts.mintUploadTokens(id, 600))!;
      const text = body();
      // Over the cap, and well under the upload limit (UPLOAD_LIMIT_FACTOR caps).
      expect(Buffer.byteLength(text)).toBeGreaterThan(CAP);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(3 * CAP);

      const response = await upload(id, 'sbom', text, tokens.sbom);

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectErrorBody(error, 'INVALID_REQUEST');
      expect(error.error).toMatch(/^The SBOM is not usable: /);
      expect(await stored(id)).toBe(0);
    });

    it('takes the format from the whole document, not from its first bytes', async () => {
      const id = await runningBuild();
      const tokens = (await artifacts.mintUploadTokens(id, 600))!;
      // "spdxVersion" comes last, past the cap: the first bytes alone do not say SPDX.
      const { spdxVersion, ...rest } = SPDX;
      const text = JSON.stringify({ ...rest, packages: spdxPackages(800), spdxVersion });
      expect(text.indexOf('spdxVersion')).toBeGreaterThan(CAP);

      expect((await upload(id, 'sbom', text, tokens.sbom)).status).toBe(204);
      const sbom = await jsonOf(await admin.request('GET', `/builds/${id}/sbom`));

      expect(sbom).toMatchObject({ truncated: true, format: 'spdx-json' });
    });
  });

  describe('reading what is stored, whatever it is', () => {
    const deep = deepSpdx(10_000);
    const notJson = JSON.stringify(SPDX).slice(0, 100);

    it.each([
      ['a document 10,000 levels deep (stored by older code)', deep, /deeper than 64 levels/],
      ['text that is not JSON, not marked truncated', notJson, /not valid JSON/],
    ])(
      'serves an SBOM row holding %s as its stored text, with a note',
      async (_name, text, note) => {
        const id = await runningBuild();
        await storeRow(id, 'sbom', gzipSync(text));

        const response = await admin.request('GET', `/builds/${id}/sbom`);

        expect(response.status).toBe(200);
        expect(await jsonOf(response)).toMatchObject({
          build_id: id,
          truncated: false,
          document: null,
          partial: text,
          note: expect.stringMatching(note),
        });
      },
    );

    const damaged: Array<[string, 'sbom' | 'scan', () => Buffer]> = [
      ['an SBOM whose bytes are not gzip', 'sbom', () => Buffer.from(JSON.stringify(SPDX))],
      ['an SBOM whose gzip stream is cut short', 'sbom', () => cutGzip(JSON.stringify(SPDX))],
      [
        'an SBOM that decompresses to more than any upload kiln reads',
        'sbom',
        () => gzipSync(' '.repeat(LIMIT + 1)),
      ],
      ['a scan whose bytes are not gzip', 'scan', () => Buffer.from('[]')],
      ['a scan whose gzip stream is cut short', 'scan', () => cutGzip(findingsJson())],
      ['a scan that is not JSON', 'scan', () => gzipSync(findingsJson().slice(0, 20))],
      ['a scan 10,000 levels deep', 'scan', () => gzipSync(nestedArrays(10_000))],
      ['a scan that is no list', 'scan', () => gzipSync('{"id":"CVE-2024-2511"}')],
      ['a scan whose findings lack fields', 'scan', () => gzipSync('[{"id":1}]')],
      [
        'a scan with an unknown severity',
        'scan',
        () => gzipSync(findingsJson().replace('"high"', '"severe"')),
      ],
    ];

    it.each(damaged)('answers 409 with the Error body for %s', async (_name, kind, content) => {
      const id = await runningBuild();
      await storeRow(id, kind, content());

      const response = await admin.request('GET', `/builds/${id}/${kind}`);

      expect(response.status).toBe(409);
      const error = await jsonOf(response);
      expectErrorBody(error, 'CONFLICT');
      expect(error.error).toBe(
        `The stored ${kind === 'sbom' ? 'SBOM' : 'scan'} of this build cannot be read: it is damaged`,
      );
      // Not a 5xx, so the error filter logs nothing: the operator learns of it from this line.
      expect(
        kiln.logs.find(
          (line) =>
            line['msg'] === 'a stored build artifact cannot be read as kiln wrote it' &&
            line['build_id'] === id &&
            line['kind'] === kind,
        ),
      ).toMatchObject({ level: 'warn', problem: expect.any(String) });
    });

    it('fails the scan policy gate on a damaged scan rather than throwing', async () => {
      const id = await runningBuild({ scan_policy: { fail_on: 'high' } });
      await storeRow(id, 'scan', gzipSync('{"id":"CVE-2024-2511"}'));
      const build = (await kiln.app.get(BuildLifecycle).find(id))!;

      const verdict = await artifacts.gate(build);

      expect(verdict).toEqual({
        pass: false,
        message:
          'scan policy fail_on=high: the stored scan report cannot be read (it is damaged), so the policy cannot be shown to hold. The image was pushed and stays in the registry.',
      });
    });
  });
});

/** The normalised findings kiln stores for TRIVY_REPORT. */
function findingsJson(): string {
  return JSON.stringify([
    {
      id: 'CVE-2024-2511',
      package: 'openssl',
      version: '3.0.13-r0',
      fixed_version: null,
      severity: 'high',
    },
  ]);
}

/** gzip of `text` without its last bytes (the stream never ends). */
function cutGzip(text: string): Buffer {
  const whole = gzipSync(text);
  return whole.subarray(0, whole.length - 12);
}
