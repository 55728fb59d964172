import fc from 'fast-check';
import { listRoutes, type RouteDeclaration } from '../src/auth/route-inventory.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/*
 * Fuzzes every route the application declares (listRoutes) as tenant A's admin, over real HTTP:
 * arbitrary and near-valid bodies (deep nesting, NUL, lone surrogates, numbers JSON.stringify never
 * writes, wrong types, unicode keys), query strings, path ids, content types and Idempotency-Keys.
 * No answer may be 5xx, and every refusal must be the spec's Error body. Fixed seed; ~10 s alone.
 */
const SEED = 20_251_121;
const RUNS = 1_500;

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ERROR_KEYS = new Set(['error', 'code', 'timestamp', 'trace_id', 'details']);
const CODE_OF_STATUS: Record<number, string> = {
  400: 'INVALID_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'INVALID_REQUEST',
  429: 'INVALID_REQUEST',
  431: 'INVALID_REQUEST',
};

const FIELD_NAMES = [
  'project_id',
  'git_branch',
  'git_commit',
  'build_args',
  'tenant_id',
  'manifest',
  'reason',
  'email',
  'password',
  '__proto__',
  'constructor',
];
const QUERY_NAMES = ['page', 'limit', 'offset', 'status', 'project_id', 'sort_by', 'sort_order'];
const MANIFEST_PATHS = [
  ['name'],
  ['description'],
  ['type'],
  ['base_image'],
  ['instructions'],
  ['environment'],
  ['tags'],
  ['metadata'],
  ['build_config'],
  ['build_config', 'build_type'],
  ['build_config', 'dockerfile'],
  ['build_config', 'build_context'],
  ['build_config', 'build_args'],
  ['build_config', 'platforms'],
  ['build_config', 'paketo_config'],
  ['build_config', 'packer_template'],
  ['build_config', 'builders'],
  ['build_config', 'variables'],
  ['build_config', 'registry_repository'],
];

// Characters PostgreSQL, JSON or a parser may choke on, among arbitrary code points.
const hostileChar = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '"', '\\', '.', '%', '\n'),
  fc.constantFrom('\u202e', '\ufeff', '\uffff', '💥', 'é', '/', '=', ' ', '@'),
);
/** Mostly text a database stores, sometimes text it refuses (NUL, lone surrogates). */
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  fc.string({ unit: hostileChar, maxLength: 30 }),
);
const key = fc.oneof(fc.constantFrom(...FIELD_NAMES), text);
const numberText = fc.oneof(
  fc.integer().map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.constantFrom('1e400', '-1e400', '1e-400', '-0', '9007199254740993', '2147483648', '0.1e1'),
);
/** Query values: what a client might type, and percent-escapes no client should send. */
const queryValue = fc.oneof(
  numberText.map(encodeURIComponent),
  fc.constantFrom('1e20', '0x10', '1e3', '%2012', '%2B1', '1.0', '', 'NaN', 'Infinity', '-1'),
  fc.constantFrom('queued', 'failed', 'created_at', 'build_number', 'asc', 'desc'),
  fc.constantFrom('%00', '%ED%A0%80', '%FF', '%', '%zz', '%C0%80', '%E2%80%AE'),
  text.map(wellFormed).map(encodeURIComponent),
);

/** Arbitrary JSON as text, so it can hold what JSON.stringify never writes (1e400, 30 digits). */
const jsonText = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    text.map((s) => JSON.stringify(s)),
    numberText,
    fc.constantFrom('true', 'false', 'null', '{}', '[]'),
    fc.uuid().map((s) => JSON.stringify(s)),
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('value'), { maxLength: 5 }).map((items) => `[${items.join(',')}]`),
  object: fc
    .array(fc.tuple(key, tie('value')), { maxLength: 6 })
    .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
})).value;

const deepJson = fc
  .tuple(fc.integer({ min: 60, max: 20_000 }), fc.boolean())
  .map(([levels, arrays]) =>
    arrays
      ? `${'['.repeat(levels)}1${']'.repeat(levels)}`
      : `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`,
  );

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const child = node[part];
    if (typeof child !== 'object' || child === null) return;
    node = child as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

/** The spec's Error shape (2.6), with the code for the status and the trace id of the response. */
function isErrorBody(raw: string, response: Response): boolean {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    return false;
  }
  const { error, code, timestamp, trace_id: traceId, details } = body;
  return (
    Object.keys(body).every((k) => ERROR_KEYS.has(k)) &&
    typeof error === 'string' &&
    code === CODE_OF_STATUS[response.status] &&
    typeof timestamp === 'string' &&
    ISO_TIMESTAMP.test(timestamp) &&
    traceId === response.headers.get('x-request-id') &&
    (details === undefined ||
      (typeof details === 'object' &&
        details !== null &&
        Object.values(details).every((v) => typeof v === 'string')))
  );
}

/** Replaces lone surrogates, which encodeURIComponent refuses (escapes above cover them). */
function wellFormed(s: string): string {
  return s.replace(/[\ud800-\udfff]/g, '\ufffd');
}

describe('every API route under arbitrary bodies and query strings (property)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let token: string;
  let routes: RouteDeclaration[];
  /** Builds of tenant A in every state; builds the run creates join it. */
  const pool: string[] = [];

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_RATE_LIMIT_READS: '0', KILN_RATE_LIMIT_WRITES: '0' },
    });
    seeded = await seedTenancy(kiln);
    token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    routes = listRoutes(kiln.app);
    const admin = new ApiClient(kiln, token, seeded.tenantA);
    const runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    for (let i = 0; i < 12; i++) {
      const build = await admin.createBuild(seeded.projectA, `fuzz-seed-${i}`);
      pool.push(build.id);
      if (i % 4 === 0) continue;
      await admin.request('POST', `/builds/${build.id}/start`);
      if (i % 4 === 2) await runner.fail(build.id);
      if (i % 4 === 3) await runner.succeed(build.id);
    }
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('never answers 5xx, and every refusal is the Error body', async () => {
    const branch = fc.oneof(
      { weight: 3, arbitrary: fc.stringMatching(/^[a-z][a-z0-9/-]{0,20}$/) },
      fc.constant('main'),
      text,
    );
    const referenceBody = fc
      .record(
        {
          project_id: fc.oneof(
            { weight: 4, arbitrary: fc.constant(seeded.projectA) },
            fc.constant(seeded.projectB),
            fc.uuid(),
            text,
          ),
          git_branch: branch,
          git_commit: fc.oneof(fc.stringMatching(/^[0-9a-f]{7,40}$/), text, fc.constant(null)),
          build_args: fc.oneof(fc.dictionary(text, text, { maxKeys: 4 }), fc.jsonValue()),
        },
        { requiredKeys: ['project_id', 'git_branch'] },
      )
      .map((body) => JSON.stringify(body));
    const wizardBody = fc
      .tuple(
        fc.constantFrom('kaniko', 'buildx', 'container', 'paketo', 'packer'),
        fc.option(
          fc.tuple(
            fc.constantFrom(...MANIFEST_PATHS),
            fc.oneof(
              text,
              fc.jsonValue({ maxDepth: 3 }),
              fc.array(text, { maxLength: 3 }),
              fc.dictionary(text, text, { maxKeys: 3 }),
            ),
          ),
          { freq: 4 },
        ),
        fc.oneof(
          { weight: 4, arbitrary: fc.constant(seeded.tenantA) },
          fc.constant(seeded.tenantB),
          fc.uuid(),
        ),
      )
      .map(([type, change, tenantId]) => {
        const manifest = wizardManifest(type);
        if (change !== null) setPath(manifest, change[0], change[1]);
        return JSON.stringify({ tenant_id: tenantId, project_id: seeded.projectA, manifest });
      });
    const cancelBody = fc
      .record({ reason: fc.oneof(text, fc.jsonValue({ maxDepth: 2 })) })
      .map((b) => JSON.stringify(b));
    const loginBody = fc
      .record({
        email: fc.oneof(
          fc.constant(seeded.users.admin.email),
          text.map((s) => `${s}@example.com`),
          text,
        ),
        password: text,
      })
      .map((b) => JSON.stringify(b));
    const anyBody = fc.oneof(
      fc.constant(undefined),
      { weight: 2, arbitrary: jsonText },
      referenceBody,
      wizardBody,
      cancelBody,
      loginBody,
      fc.tuple(key, deepJson).map(([k, deep]) => `{${JSON.stringify(k)}:${deep}}`),
      deepJson,
      fc.string({ maxLength: 40 }),
    );
    /** Mostly a body of the route's own shape, so requests get past validation. */
    const bodyFor = (route: RouteDeclaration): fc.Arbitrary<string | undefined> => {
      const own =
        route.path === '/api/v1/builds' && route.method === 'POST'
          ? fc.oneof(referenceBody, wizardBody)
          : route.path.endsWith('/cancel')
            ? cancelBody
            : route.path.endsWith('/login')
              ? loginBody
              : fc.constant(undefined);
      return fc.oneof({ weight: 2, arbitrary: own }, anyBody);
    };
    const printable = (from: number, to: number) =>
      fc.string({
        unit: fc
          .integer({ min: from, max: to })
          .filter((c) => c !== 0x7f)
          .map((c) => String.fromCharCode(c)),
        maxLength: 300,
      });
    const request = fc.constantFrom(...routes).chain((route) =>
      fc.record({
        route: fc.constant(route),
        method: fc.oneof(
          { weight: 9, arbitrary: fc.constant(undefined) },
          fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE'),
        ),
        id: fc.oneof(
          { weight: 6, arbitrary: fc.nat().map((n) => ({ pool: n })) },
          fc.uuid(),
          text.map(wellFormed).map(encodeURIComponent),
          fc.constantFrom('%00', '%ED%A0%80', '%FF', '%2F', 'null'),
        ),
        query: fc.array(
          fc.tuple(
            fc.oneof(
              { weight: 6, arbitrary: fc.constantFrom(...QUERY_NAMES) },
              text.map(wellFormed).map(encodeURIComponent),
            ),
            queryValue,
          ),
          { maxLength: 3 },
        ),
        body: bodyFor(route),
        contentType: fc.oneof(
          { weight: 8, arbitrary: fc.constant('application/json') },
          fc.constantFrom(
            'text/plain',
            'application/json; charset=utf-16',
            'application/json; charset=latin1',
            'application/merge-patch+json',
          ),
        ),
        idempotencyKey: fc.oneof(
          { weight: 6, arbitrary: fc.constant(null) },
          printable(0x21, 0x7e),
          printable(0x20, 0xff),
        ),
      }),
    );

    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const id = typeof r.id === 'string' ? r.id : pool[r.id.pool % pool.length]!;
        const path = r.route.path.replace(':id', id);
        const query = r.query.map(([k, v]) => `${k}=${v}`).join('&');
        const method = r.method ?? r.route.method;
        const url = `${kiln.baseUrl}${path}${query === '' ? '' : `?${query}`}`;
        const headers: Record<string, string> = {
          authorization: `Bearer ${token}`,
          'x-tenant-id': seeded.tenantA,
        };
        if (r.body !== undefined) headers['content-type'] = r.contentType;
        if (r.idempotencyKey !== null) headers['idempotency-key'] = r.idempotencyKey;
        const response = await fetch(url, {
          method,
          headers,
          body: method === 'GET' ? undefined : r.body,
        });
        const raw = await response.text();
        const exchange = `${method} ${url} ${(r.body ?? '').slice(0, 300)} → ${response.status} ${raw.slice(0, 300)}`;

        if (response.status >= 500) throw new Error(`server error: ${exchange}`);
        if (response.status === 201 && path === '/api/v1/builds') {
          const created = JSON.parse(raw) as { id?: string; data?: { id: string } };
          pool.push(created.data?.id ?? created.id!);
        }
        if (response.status >= 400 && !isErrorBody(raw, response)) {
          throw new Error(`not the Error body: ${exchange}`);
        }
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 120_000);
});
