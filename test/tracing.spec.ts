import { Controller, Get, Module, Param, Post } from '@nestjs/common';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { Public } from '../src/auth/require-permission.decorator.js';
import { PASSWORD, seedTenancy, tokenFor } from './support/auth.js';
import { createTestDatabase, type TestDatabase } from './support/database.js';
import { NS, OperatorGround } from './support/operator-ground.js';
import { OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js';
import { freePort } from './support/processes.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;

/** The in-process SDK exports every 100 ms rather than every 5 s: the tests wait less. */
const savedDelay = process.env['OTEL_BSP_SCHEDULE_DELAY'];
beforeAll(() => {
  process.env['OTEL_BSP_SCHEDULE_DELAY'] = '100';
});
afterAll(() => {
  if (savedDelay === undefined) delete process.env['OTEL_BSP_SCHEDULE_DELAY'];
  else process.env['OTEL_BSP_SCHEDULE_DELAY'] = savedDelay;
});

// Routes that exist only in this test: a failure kiln answers with a 500, and a statement Postgres
// refuses with an error message that quotes the value.
@Public()
@Controller('trace-probe')
class TraceProbeController {
  constructor(private readonly dataSource: DataSource) {}

  @Get('boom')
  boom(): never {
    throw new Error('the probe failed');
  }

  @Post('twice/:value')
  async twice(@Param('value') value: string): Promise<void> {
    await this.dataSource.query('CREATE TABLE IF NOT EXISTS trace_probe (value text PRIMARY KEY)');
    await this.dataSource.query('INSERT INTO trace_probe VALUES ($1)', [value]);
    await this.dataSource.query('INSERT INTO trace_probe VALUES ($1)', [value]);
  }
}

@Module({ controllers: [TraceProbeController] })
class TraceProbeModule {}

const serverSpanOf = (requestId: string) => (spans: ReceivedSpan[]) =>
  spans.find((s) => s.kind === SERVER && s.attributes['kiln.request_id'] === requestId);

describe('tracing with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  let receiver: OtlpReceiver;
  let kiln: TestApp;
  let headers: Record<string, string>;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    kiln = await startTestApp({
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'kiln-under-test' },
      apiModules: [TraceProbeModule],
    });
    const seeded = await seedTenancy(kiln);
    const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    headers = { authorization: `Bearer ${token}`, 'x-tenant-id': seeded.tenantA };
  });

  afterAll(async () => {
    await kiln?.close();
    await receiver?.stop();
  });

  /** GET /api/v1/builds/<a build that does not exist> with this request id. */
  async function getBuild(id: string, requestId: string, extra: Record<string, string> = {}) {
    const response = await fetch(`${kiln.baseUrl}/api/v1/builds/${id}`, {
      headers: { ...headers, 'x-request-id': requestId, ...extra },
    });
    expect(response.status).toBe(404);
    await response.arrayBuffer();
  }

  it('exports a server span per request, named by its route template, with the request id', async () => {
    await getBuild(randomUUID(), 'trace-route-1');

    const span = await receiver.waitFor('server span', serverSpanOf('trace-route-1'));
    expect(receiver.requests[0]).toMatchObject({
      method: 'POST',
      path: '/v1/traces',
      contentType: 'application/json',
    });
    expect(span.name).toBe('GET /api/v1/builds/:id');
    expect(span.parentSpanId).toBe('');
    expect(span.attributes).toMatchObject({
      'http.request.method': 'GET',
      'http.route': '/api/v1/builds/:id',
      'http.response.status_code': 404,
      'kiln.request_id': 'trace-route-1',
    });
    expect(span.resource).toMatchObject({ 'service.name': 'kiln-under-test', 'kiln.role': 'all' });
  });

  it('leaves the probes untraced', async () => {
    for (const probe of ['healthz', 'readyz']) {
      const response = await fetch(`${kiln.baseUrl}/${probe}`, {
        headers: { 'x-request-id': `trace-probe-${probe}` },
      });
      expect(response.status).toBe(200);
    }
    await getBuild(randomUUID(), 'trace-after-probes');

    // Spans are exported in the order they ended: the probes' would have come first.
    await receiver.waitFor('server span', serverSpanOf('trace-after-probes'));
    expect(
      receiver.spans.filter((s) =>
        String(s.attributes['kiln.request_id']).startsWith('trace-probe'),
      ),
    ).toEqual([]);
  });

  it('marks a request kiln answered with a 5xx as an error, and not one refused with a 4xx', async () => {
    const failed = await fetch(`${kiln.baseUrl}/api/v1/trace-probe/boom`, {
      headers: { 'x-request-id': 'trace-failed-1' },
    });
    const refused = await fetch(`${kiln.baseUrl}/api/v1/builds/${randomUUID()}`, {
      headers: { ...headers, 'x-request-id': 'trace-refused-1' },
    });
    expect([failed.status, refused.status]).toEqual([500, 404]);

    const failedSpan = await receiver.waitFor('server span', serverSpanOf('trace-failed-1'));
    const refusedSpan = await receiver.waitFor('server span', serverSpanOf('trace-refused-1'));
    expect(failedSpan).toMatchObject({
      name: 'GET /api/v1/trace-probe/boom',
      statusCode: ERROR,
      attributes: { 'http.response.status_code': 500 },
    });
    expect(refusedSpan.statusCode).not.toBe(ERROR);
  });

  it("makes the request's database calls its child spans, holding the operation and no value", async () => {
    const id = randomUUID();
    await getBuild(id, 'trace-db-1');

    const server = await receiver.waitFor('server span', serverSpanOf('trace-db-1'));
    const queries = await receiver.waitFor('database spans', (spans) => {
      const found = spans.filter((s) => s.kind === CLIENT && s.traceId === server.traceId);
      return found.length > 0 ? found : undefined;
    });
    for (const query of queries) {
      expect(query.parentSpanId).toBe(server.spanId);
      expect(query.attributes).toMatchObject({
        'db.system.name': 'postgresql',
        'db.operation.name': query.name,
      });
    }
    expect(queries.map((q) => q.name)).toContain('SELECT');
    expect(JSON.stringify(queries)).not.toContain(id);
    expect(JSON.stringify(queries)).not.toContain(headers['x-tenant-id']);
  });

  it('marks a statement Postgres refused with its SQLSTATE, never the message quoting the value', async () => {
    const value = `probe-value-${randomUUID()}`;
    const response = await fetch(`${kiln.baseUrl}/api/v1/trace-probe/twice/${value}`, {
      method: 'POST',
      headers: { 'x-request-id': 'trace-refused-sql-1' },
    });
    expect(response.status).toBe(409);

    const server = await receiver.waitFor('server span', serverSpanOf('trace-refused-sql-1'));
    // The probe's two inserts, then the audit log's row of this refused POST (ADR 0049): the
    // first two by start time are the probe's.
    const inserts = await receiver.waitFor('both inserts', (spans) => {
      const found = spans
        .filter((s) => s.traceId === server.traceId && s.name === 'INSERT')
        .sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
      return found.length >= 2 && found[1]?.attributes['error.type'] !== undefined
        ? found.slice(0, 2)
        : undefined;
    });
    expect(inserts.map((span) => [span.statusCode, span.attributes['error.type']])).toEqual([
      [0, undefined],
      [ERROR, '23505'],
    ]);
    const queries = receiver.spans.filter((s) => s.kind === CLIENT && s.traceId === server.traceId);
    expect(JSON.stringify(queries)).not.toContain(value);
  });

  it('continues the trace of an incoming W3C traceparent header', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentId = randomBytes(8).toString('hex');
    await getBuild(randomUUID(), 'trace-parent-1', { traceparent: `00-${traceId}-${parentId}-01` });

    const span = await receiver.waitFor('server span', serverSpanOf('trace-parent-1'));
    expect({ traceId: span.traceId, parentSpanId: span.parentSpanId }).toEqual({
      traceId,
      parentSpanId: parentId,
    });
  });

  it("writes the request's trace and span ids on its log lines, beside its request id", async () => {
    await getBuild(randomUUID(), 'trace-logs-1');

    const span = await receiver.waitFor('server span', serverSpanOf('trace-logs-1'));
    const lines = kiln.logs.lines.filter((line) => line['request_id'] === 'trace-logs-1');
    expect(lines.map((line) => line['msg'])).toContain('request completed');
    for (const line of lines) {
      expect(line).toMatchObject({ otel_trace_id: span.traceId, otel_span_id: span.spanId });
    }
  });
});

describe('tracing of the operator with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  let receiver: OtlpReceiver;
  let ground: OperatorGround;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    ground = await OperatorGround.start('tracing');
  }, 60_000);

  afterEach(() => ground?.reset());

  afterAll(async () => {
    await ground?.close();
    await receiver?.stop();
  });

  it('exports a span per reconcile, with the controller, the Build and the result, its database calls inside', async () => {
    ground.builder({ lines: 3 });
    await ground.startOperator({
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
    });
    const id = await ground.startedBuild();
    expect((await ground.ended(id)).status).toBe('success');

    const reconciles = await receiver.waitFor('reconcile spans of the build', (spans) => {
      const found = spans.filter(
        (s) => s.name === 'reconcile builds' && s.attributes['kiln.resource.name'] === id,
      );
      return found.length > 0 ? found : undefined;
    });
    for (const span of reconciles) {
      expect(span.parentSpanId).toBe('');
      expect(span.attributes).toMatchObject({
        'kiln.controller': 'builds',
        'k8s.namespace.name': NS,
        'kiln.resource.name': id,
      });
      expect(['success', 'requeue']).toContain(span.attributes['kiln.reconcile.result']);
    }
    expect(reconciles[0]!.resource).toMatchObject({ 'kiln.role': 'operator' });
    const reconcileIds = new Set(reconciles.map((s) => s.spanId));
    await receiver.waitFor('database spans of a reconcile', (spans) =>
      spans.find((s) => s.kind === CLIENT && reconcileIds.has(s.parentSpanId)),
    );
  });
});

// The compiled kiln (`make build`), as main.ts starts it: only a process of its own shows which
// modules kiln loads, and that it exports what is buffered when it stops.
const MAIN = join(__dirname, '..', 'dist', 'main.js');
const RECORD_MODULES = join(__dirname, 'support', 'record-modules.mjs');

describe('a kiln process and OpenTelemetry', () => {
  let database: TestDatabase;
  let receiver: OtlpReceiver;
  let dir: string;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`make build\``);
    database = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'kiln-tracing-'));
  });

  beforeEach(async () => {
    receiver = await OtlpReceiver.start();
  });

  afterEach(async () => {
    if (child !== undefined && child.exitCode === null) child.kill('SIGKILL');
    child = undefined;
    await receiver.stop();
  });

  afterAll(async () => {
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Starts kiln with `env`, sends it one failed login (a route with database calls), stops it
   * with SIGTERM and answers the modules it loaded and what it printed.
   */
  async function runKiln(name: string, env: Record<string, string>) {
    const port = await freePort();
    const modulesFile = join(dir, `${name}.modules`);
    const process_ = spawn(process.execPath, ['--import', RECORD_MODULES, MAIN], {
      env: {
        PATH: process.env['PATH'],
        HOME: dir,
        PORT: String(port),
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: join(dir, name),
        DATABASE_URL: database.url,
        KILN_JWT_SECRET: 's'.repeat(40),
        // The line every request ends with ('request completed') is a debug line.
        KILN_LOG_LEVEL: 'debug',
        KILN_TEST_MODULES_FILE: modulesFile,
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = process_;
    let output = '';
    process_.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    process_.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((done) => process_.once('exit', done));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ready = await fetch(`${url}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline || process_.exitCode !== null) {
        throw new Error(`kiln did not start:\n${output}`);
      }
      await new Promise((done) => setTimeout(done, 100));
    }
    const login = await fetch(`${url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': `${name}-login` },
      body: JSON.stringify({ email: 'nobody@example.com', password: PASSWORD }),
    });
    expect(login.status).toBe(401);
    process_.kill('SIGTERM');
    expect(await exited).toBe(0);
    const modules = readFileSync(modulesFile, 'utf8').split('\n');
    /** The modules of one @opentelemetry package, or (no name) of every one. */
    const otel = (pkg = '') =>
      modules.filter((m) => m.includes(`/@opentelemetry/${pkg}`) && m.endsWith('.js'));
    return { output, otel };
  }

  it('with the endpoint unset, loads nothing of OpenTelemetry but the API and exports nothing', async () => {
    const { otel } = await runKiln('off', {
      // The SDK would read these; kiln must not even load it.
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
      OTEL_SERVICE_NAME: 'kiln-off',
    });

    expect(otel('api/').length).toBeGreaterThan(0);
    expect(otel().filter((m) => !m.includes('/@opentelemetry/api/'))).toEqual([]);
    expect(receiver.requests).toEqual([]);
  }, 120_000);

  it('with the endpoint set, loads the SDK and exports the spans still buffered when it stops', async () => {
    const { otel, output } = await runKiln('on', {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // Only the flush at shutdown can deliver the request's spans before the process exits.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });

    expect(otel('sdk-trace-base/').length).toBeGreaterThan(0);
    expect(otel('exporter-trace-otlp-http/').length).toBeGreaterThan(0);
    const server = receiver.spans.find((s) => s.attributes['kiln.request_id'] === 'on-login');
    expect(server).toMatchObject({
      name: 'POST /api/v1/auth/login',
      kind: SERVER,
      attributes: { 'http.response.status_code': 401 },
    });
    expect(
      receiver.spans.filter((s) => s.kind === CLIENT && s.parentSpanId === server!.spanId),
    ).not.toEqual([]);
    const logged = output
      .split('\n')
      .filter((line) => line.includes('"request_id":"on-login"'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.every((line) => line['otel_trace_id'] === server!.traceId)).toBe(true);
  }, 120_000);
});
