import { Body, Controller, Get, Module, Post } from '@nestjs/common';
import { IsInt, IsString, Max, Min } from 'class-validator';
import { DataSource } from 'typeorm';
import { Public } from '../src/auth/require-permission.decorator.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

class EchoDto {
  @IsString()
  name!: string;

  @IsInt()
  @Min(1)
  @Max(10)
  count!: number;
}

// Routes that exist only in this test, to reach the error paths the product has no route for yet.
@Public()
@Controller('error-probe')
class ErrorProbeController {
  constructor(private readonly dataSource: DataSource) {}

  @Get('boom')
  boom(): never {
    throw new Error('db password is hunter2 at 10.1.2.3');
  }

  @Post('echo')
  echo(@Body() body: EchoDto): EchoDto {
    return body;
  }

  @Post('duplicate')
  async duplicate(): Promise<void> {
    await this.dataSource.query('CREATE TABLE IF NOT EXISTS probe (id int PRIMARY KEY)');
    await this.dataSource.query('INSERT INTO probe VALUES (1)');
  }
}

@Module({ controllers: [ErrorProbeController] })
class ErrorProbeModule {}

const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function expectErrorBody(body: unknown, code: string, response: Response): void {
  expect(body).toEqual({
    error: expect.any(String),
    code,
    timestamp: expect.stringMatching(ISO_TIMESTAMP),
    trace_id: response.headers.get('x-request-id'),
  });
}

describe('HTTP error model', () => {
  let kiln: TestApp;

  beforeAll(async () => {
    kiln = await startTestApp({
      env: { KILN_MAX_BODY_BYTES: '2048' },
      apiModules: [ErrorProbeModule],
    });
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('answers an unknown route under /api/v1 with 404 and the Error body', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/nope`);

    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await jsonOf(response);
    expectErrorBody(body, 'NOT_FOUND', response);
    expect(body.error).toBe('No route for GET /api/v1/nope');
  });

  it('answers an unknown route outside /api/v1 with 404 and the Error body', async () => {
    const response = await fetch(`${kiln.baseUrl}/nope`, { method: 'DELETE' });

    expect(response.status).toBe(404);
    expectErrorBody(await jsonOf(response), 'NOT_FOUND', response);
  });

  it('answers malformed JSON with 400 INVALID_REQUEST', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/error-probe/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name": "a",',
    });

    expect(response.status).toBe(400);
    const body = await jsonOf(response);
    expectErrorBody(body, 'INVALID_REQUEST', response);
    expect(body.error).toBe('Request body is not valid JSON');
  });

  it('answers a body over the size limit with 413 and the Error body', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/error-probe/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'x'.repeat(4096), count: 1 }),
    });

    expect(response.status).toBe(413);
    const body = await jsonOf(response);
    expectErrorBody(body, 'INVALID_REQUEST', response);
    expect(body.error).toBe('Request body is too large');
  });

  it('answers an invalid body with 400 and one detail per bad field', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/error-probe/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ count: 11, extra: true }),
    });

    expect(response.status).toBe(400);
    const body = await jsonOf(response);
    expect(body).toMatchObject({
      code: 'INVALID_REQUEST',
      trace_id: response.headers.get('x-request-id'),
    });
    expect(Object.keys(body.details).sort()).toEqual(['count', 'extra', 'name']);
    expect(body.details.extra).toBe('property extra should not exist');
  });

  it('accepts a valid body and keeps only whitelisted fields', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/error-probe/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'a', count: 3 }),
    });

    expect(response.status).toBe(201);
    expect(await jsonOf(response)).toEqual({ name: 'a', count: 3 });
  });

  it('answers an unexpected failure with 500, a trace id that is in the server log, and no internals', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/error-probe/boom`);

    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).not.toMatch(/hunter2|10\.1\.2\.3|Error:|at /);
    const body = JSON.parse(text);
    expectErrorBody(body, 'INTERNAL_SERVER_ERROR', response);
    expect(body.error).toBe('Internal server error');
    const logged = kiln.logs.find(
      (line) => line['trace_id'] === body.trace_id && line['level'] === 'error',
    );
    expect(logged).toMatchObject({
      msg: 'request failed',
      status: 500,
      path: '/api/v1/error-probe/boom',
    });
    expect(JSON.stringify(logged)).toMatch(/hunter2/);
  });

  it('maps a unique violation (23505) to 409 CONFLICT', async () => {
    const first = await fetch(`${kiln.baseUrl}/api/v1/error-probe/duplicate`, { method: 'POST' });
    const second = await fetch(`${kiln.baseUrl}/api/v1/error-probe/duplicate`, { method: 'POST' });

    expect(first.status).toBe(201);
    expect(second.status).toBe(409);
    expectErrorBody(await jsonOf(second), 'CONFLICT', second);
  });

  it('reuses a plain incoming X-Request-Id and replaces one that could forge log lines', async () => {
    const reused = await fetch(`${kiln.baseUrl}/healthz`, {
      headers: { 'X-Request-Id': 'abc-123.x' },
    });
    const replaced = await fetch(`${kiln.baseUrl}/api/v1/nope`, {
      headers: { 'X-Request-Id': 'evil"}\u0085{"level":"fatal' },
    });

    expect(reused.headers.get('x-request-id')).toBe('abc-123.x');
    const generated = replaced.headers.get('x-request-id');
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    expect((await jsonOf(replaced)).trace_id).toBe(generated);
  });

  it('serves /healthz and /readyz outside /api/v1 without authentication', async () => {
    const live = await fetch(`${kiln.baseUrl}/healthz`);
    const ready = await fetch(`${kiln.baseUrl}/readyz`);

    expect(live.status).toBe(200);
    expect(await jsonOf(live)).toEqual({ status: 'ok' });
    expect(ready.status).toBe(200);
    expect(await jsonOf(ready)).toEqual({ status: 'ok', checks: { database: 'ok' } });
    expect(live.headers.get('x-request-id')).toBeTruthy();
  });
});
