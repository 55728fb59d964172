import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ERROR_KEYS = ['code', 'details', 'error', 'timestamp', 'trace_id'];

/** `levels` arrays nested in one another, as JSON text. */
function nestedArrays(levels: number, inner = '1'): string {
  return `${'['.repeat(levels)}${inner}${']'.repeat(levels)}`;
}

/** `levels` objects nested in one another under key "a", as JSON text. */
function nestedObjects(levels: number, inner = '"x"'): string {
  return `${'{"a":'.repeat(levels)}${inner}${'}'.repeat(levels)}`;
}

function expectInvalidRequest(body: any, response: Response): void {
  expect(Object.keys(body).every((key) => ERROR_KEYS.includes(key))).toBe(true);
  expect(body).toMatchObject({
    error: expect.any(String),
    code: 'INVALID_REQUEST',
    timestamp: expect.stringMatching(ISO_TIMESTAMP),
    trace_id: response.headers.get('x-request-id'),
  });
}

describe('bad input is refused with 400 and the Error body, never 500', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let token: string;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, token, seeded.tenantA);
  });

  afterAll(async () => {
    await kiln.close();
  });

  /** Sends `body` as it is (JSON text the client wrote itself) with the admin's credentials. */
  function send(method: string, path: string, body?: string): Promise<Response> {
    return fetch(`${kiln.baseUrl}/api/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'x-tenant-id': seeded.tenantA,
        'content-type': 'application/json',
      },
      body,
    });
  }

  async function buildCount(): Promise<number> {
    const rows = await kiln.dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM builds',
    );
    return rows[0]!.n;
  }

  async function runningBuild(branch: string): Promise<string> {
    const build = await admin.createBuild(seeded.projectA, branch);
    expect((await admin.request('POST', `/builds/${build.id}/start`)).status).toBe(200);
    return build.id as string;
  }

  describe('deeply nested JSON', () => {
    it('refuses a build whose build_args nest 10,000 levels deep, and creates nothing', async () => {
      const before = await buildCount();
      const body = `{"project_id":"${seeded.projectA}","git_branch":"deep","build_args":${nestedObjects(10_000)}}`;

      const response = await send('POST', '/builds', body);

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.error).toBe('The request body nests arrays and objects deeper than 64 levels');
      expect(error.details).toEqual({ body: expect.stringMatching(/64 levels/) });
      expect(await buildCount()).toBe(before);
    });

    it.each([
      ['POST /auth/login', '/auth/login', nestedArrays(10_000)],
      ['POST /builds (wizard form)', '/builds', `{"manifest":${nestedObjects(10_000)}}`],
      ['POST /builds/{id}/cancel', '/builds/{id}/cancel', `{"reason":${nestedArrays(10_000)}}`],
      ['POST /builds/{id}/start', '/builds/{id}/start', nestedArrays(100_000)],
    ])('refuses 10,000+ levels sent to %s', async (_name, path, body) => {
      const id = await runningBuild(`deep-${path.length}-${body.length}`);

      const response = await send('POST', path.replace('{id}', id), body);

      expect(response.status).toBe(400);
      expectInvalidRequest(await jsonOf(response), response);
      const status = await jsonOf(await admin.request('GET', `/builds/${id}`));
      expect(status.status).toBe('in_progress');
    });

    it('refuses nesting that fills the whole body limit without a 500', async () => {
      // 1 MiB is the default body limit: nearly half a million levels.
      const response = await send(
        'POST',
        '/builds',
        `{"project_id":"${seeded.projectA}","git_branch":"x","build_args":${nestedArrays(499_000, '')}}`,
      );

      expect(response.status).toBe(400);
      expectInvalidRequest(await jsonOf(response), response);
    });

    it('accepts a manifest whose free-form metadata nests to the limit', async () => {
      const manifest = wizardManifest('container');
      // body (1) > manifest (2) > metadata (3) > ... 64 levels in all.
      manifest['metadata'] = JSON.parse(nestedObjects(61, '{}'));
      const before = await buildCount();

      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });

      expect(response.status).toBe(201);
      expect(await buildCount()).toBe(before + 1);
    });

    it('refuses one level more than the limit', async () => {
      const manifest = wizardManifest('container');
      manifest['metadata'] = JSON.parse(nestedObjects(62, '{}'));

      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });

      expect(response.status).toBe(400);
      expectInvalidRequest(await jsonOf(response), response);
    });
  });

  describe('text PostgreSQL cannot store', () => {
    const NUL = 'must not contain NUL characters (U+0000)';
    const SURROGATE = 'must not contain unpaired UTF-16 surrogates';

    it.each([
      ['a NUL in a build_args value', { build_args: { A: 'x\u0000y' } }, 'build_args.A', NUL],
      ['a NUL in a build_args key', { build_args: { 'A\u0000': 'x' } }, 'build_args.A\\u0000', NUL],
      ['a lone high surrogate', { build_args: { A: '\ud800' } }, 'build_args.A', SURROGATE],
      [
        'a lone low surrogate in a key',
        { build_args: { '\udc00': '' } },
        'build_args.\\udc00',
        SURROGATE,
      ],
      ['a lone surrogate in git_branch', { git_branch: 'fix-\udbff' }, 'git_branch', SURROGATE],
    ])(
      'refuses %s in the reference form and creates nothing',
      async (_name, fields, path, problem) => {
        const before = await buildCount();

        const response = await admin.request('POST', '/builds', {
          project_id: seeded.projectA,
          git_branch: 'text-safety',
          ...fields,
        });

        expect(response.status).toBe(400);
        const error = await jsonOf(response);
        expectInvalidRequest(error, response);
        expect(error.details).toEqual({ [path]: problem });
        expect(await buildCount()).toBe(before);
      },
    );

    it('refuses a NUL deep in a wizard manifest, naming its path', async () => {
      const manifest = wizardManifest('container');
      manifest['metadata'] = { labels: [{ team: 'core' }, { owner: 'a\u0000b' }] };
      const before = await buildCount();

      const response = await admin.request('POST', '/builds', {
        tenant_id: seeded.tenantA,
        project_id: seeded.projectA,
        manifest,
      });

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.details).toEqual({ 'manifest.metadata.labels.1.owner': NUL });
      expect(await buildCount()).toBe(before);
    });

    it('refuses a NUL in a cancel reason and leaves the build running', async () => {
      const id = await runningBuild('cancel-nul');

      const response = await admin.request('POST', `/builds/${id}/cancel`, {
        reason: 'stop\u0000now',
      });

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.details).toEqual({ reason: NUL });
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      expect(build.status).toBe('in_progress');
    });

    it('refuses a NUL in a query parameter, naming it', async () => {
      const response = await admin.request('GET', '/builds?sort_by=created_at%00');

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.details).toEqual({ sort_by: NUL });
    });
  });

  describe('integer query parameters', () => {
    const RANGE = /^(page|limit|offset) must be a decimal integer from \d+ to \d+$/;

    it.each([
      ['page=1e20', 'page'],
      ['page=99999999999999999999', 'page'],
      ['page=2147483648', 'page'],
      ['page=0x10', 'page'],
      ['page=1e3', 'page'],
      ['page=%2012', 'page'],
      ['page=%2B1', 'page'],
      ['page=1.0', 'page'],
      ['page=0', 'page'],
      ['page=', 'page'],
      ['page=1&page=2', 'page'],
      ['limit=1e2', 'limit'],
      ['limit=0x10', 'limit'],
      ['limit=101', 'limit'],
    ])('GET /builds?%s is 400 naming %s', async (query, field) => {
      const response = await admin.request('GET', `/builds?${query}`);

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.details).toEqual({ [field]: expect.stringMatching(RANGE) });
    });

    it.each([
      ['offset=2147483648', 'offset'],
      ['offset=9007199254740993', 'offset'],
      ['offset=1e3', 'offset'],
      ['offset=-1', 'offset'],
      ['limit=1e3', 'limit'],
      ['limit=1001', 'limit'],
    ])('GET /builds/{id}/logs?%s is 400 naming %s', async (query, field) => {
      const build = await admin.createBuild(seeded.projectA, `logs-${query.length}-${field}`);

      const response = await admin.request('GET', `/builds/${build.id}/logs?${query}`);

      expect(response.status).toBe(400);
      const error = await jsonOf(response);
      expectInvalidRequest(error, response);
      expect(error.details).toEqual({ [field]: expect.stringMatching(RANGE) });
    });

    it('accepts the largest page and offset', async () => {
      const build = await admin.createBuild(seeded.projectA, 'largest-offset');

      const list = await admin.request('GET', '/builds?page=2147483647&limit=100');
      const logs = await admin.request('GET', `/builds/${build.id}/logs?offset=2147483647`);

      expect(list.status).toBe(200);
      expect(await jsonOf(list)).toMatchObject({ builds: [], page: 2147483647, has_more: false });
      expect(logs.status).toBe(200);
      expect(await jsonOf(logs)).toMatchObject({ logs: [], offset: 2147483647 });
    });
  });

  describe('requests Node refuses before routing', () => {
    /** Sends raw bytes and returns what the server wrote before closing the connection. */
    function rawExchange(request: string): Promise<string> {
      const url = new URL(kiln.baseUrl);
      return new Promise((resolve, reject) => {
        const socket = connect(Number(url.port), url.hostname);
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('error', reject);
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.end(request);
      });
    }

    function parseRaw(raw: string): { status: number; headers: string; body: any } {
      const [head, body = ''] = raw.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head ?? '')?.[1]);
      return { status, headers: head ?? '', body: body === '' ? undefined : JSON.parse(body) };
    }

    it('answers a request header over the size limit with 431 and the Error body', async () => {
      const response = await new Promise<{ status: number; headers: any; text: string }>(
        (resolve, reject) => {
          const url = new URL(`${kiln.baseUrl}/api/v1/builds`);
          const req = httpRequest(
            url,
            { headers: { authorization: `Bearer ${token}`, 'x-big': 'a'.repeat(20 * 1024) } },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (text += chunk));
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, headers: res.headers, text }),
              );
            },
          );
          req.on('error', reject);
          req.end();
        },
      );

      expect(response.status).toBe(431);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      expect(response.headers['connection']).toBe('close');
      const body = JSON.parse(response.text);
      expect(Object.keys(body).sort()).toEqual(['code', 'error', 'timestamp', 'trace_id']);
      expect(body).toMatchObject({
        error: 'Request header fields are too large',
        code: 'INVALID_REQUEST',
        timestamp: expect.stringMatching(ISO_TIMESTAMP),
        trace_id: response.headers['x-request-id'],
      });
    });

    it('answers a malformed request line or header with 400 and the Error body', async () => {
      const raw = await rawExchange(
        'GET /api/v1/builds HTTP/1.1\r\nHost: kiln\r\nX-Bad: a\u0001b\r\n\r\n',
      );

      const { status, headers, body } = parseRaw(raw);
      expect(status).toBe(400);
      expect(headers).toMatch(/\r\nContent-Type: application\/json; charset=utf-8\r\n/i);
      expect(headers).toMatch(/\r\nConnection: close(\r\n|$)/i);
      expect(body).toEqual({
        error: 'Malformed HTTP request',
        code: 'INVALID_REQUEST',
        timestamp: expect.stringMatching(ISO_TIMESTAMP),
        trace_id: /\r\nX-Request-Id: ([^\r]+)/i.exec(headers)?.[1],
      });
    });

    it('keeps serving after refusing a malformed request', async () => {
      await rawExchange('BLAH\r\n\r\n');

      const response = await admin.request('GET', '/builds');

      expect(response.status).toBe(200);
    });
  });
});
