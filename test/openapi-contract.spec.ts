import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listRoutes } from '../src/auth/route-inventory.js';
import { LOG_STREAM_PATH } from '../src/log-stream/log-stream.openapi.js';
import { ACCESS_TOKEN_SCHEME } from '../src/common/openapi.js';
import { seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { LogStreamClient, refusal } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const ROOT = join(__dirname, '..');
const LINT = join(ROOT, 'scripts', 'openapi-lint.cjs');
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Operation {
  readonly key: string;
  readonly operation: any;
}

/** Every operation of the document, named `METHOD path`. */
function operationsOf(document: any): Operation[] {
  return Object.entries(document.paths as Record<string, any>).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => ({
      key: `${method.toUpperCase()} ${path}`,
      operation: item[method],
    })),
  );
}

describe('OpenAPI contract (issue 17 item 7)', () => {
  let kiln: TestApp;
  let document: any;
  let workDir: string;

  beforeAll(async () => {
    // The fake runner: the stream test creates a build, which must not run anything.
    kiln = await startTestApp({ runner: FakeRunner });
    const response = await fetch(`${kiln.baseUrl}/api/v1/openapi.json`);
    expect(response.status).toBe(200);
    document = await jsonOf(response);
    workDir = mkdtempSync(join(tmpdir(), 'kiln-openapi-contract-'));
  });

  afterAll(async () => {
    rmSync(workDir, { recursive: true, force: true });
    await kiln.close();
  });

  let written = 0;
  /** scripts/openapi-lint.cjs on a document: redocly and Spectral, as `make lint` runs them. */
  function lint(linted: unknown): Promise<{ status: number; output: string }> {
    const path = join(workDir, `openapi-${written++}.json`);
    writeFileSync(path, JSON.stringify(linted));
    return new Promise((done) => {
      execFile(process.execPath, [LINT, path], { cwd: ROOT }, (error, stdout, stderr) => {
        done({ status: error === null ? 0 : Number(error.code), output: stdout + stderr });
      });
    });
  }

  it('gives every operation an operationId, a summary, a description and tags defined globally', () => {
    const globalTags = new Map<string, string>(
      (document.tags ?? []).map((tag: any) => [tag.name, tag.description]),
    );
    const operations = operationsOf(document);

    const missing = operations.flatMap(({ key, operation }) => [
      ...['operationId', 'summary', 'description']
        .filter((field) => typeof operation[field] !== 'string' || operation[field] === '')
        .map((field) => `${key}: no ${field}`),
      ...(operation.tags === undefined || operation.tags.length === 0 ? [`${key}: no tag`] : []),
      ...(operation.tags ?? [])
        .filter((tag: string) => !globalTags.get(tag))
        .map((tag: string) => `${key}: tag ${tag} is not defined globally with a description`),
    ]);

    expect(operations.length).toBeGreaterThan(10);
    expect(missing).toEqual([]);
    expect(new Set(operations.map(({ operation }) => operation.operationId)).size).toBe(
      operations.length,
    );
  });

  it("declares each operation's security as the AuthGuard applies it", () => {
    const schemes = Object.keys(document.components.securitySchemes);
    const routes = listRoutes(kiln.app).filter((route) => route.path.startsWith('/api/v1/'));
    const publicRoutes = new Set(
      routes
        .filter((route) => route.public)
        .map((route) => `${route.method} ${route.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`),
    );

    const wrong = operationsOf(document).flatMap(({ key, operation }) => {
      const security: Array<Record<string, unknown>> | undefined = operation.security;
      if (security === undefined) return [`${key}: no security`];
      const named = security.flatMap((requirement) => Object.keys(requirement));
      const unknown = named.filter((name) => !schemes.includes(name));
      // A route that is not @Public is guarded: it needs the caller's access token.
      const needsAccessToken = !publicRoutes.has(key);
      return [
        ...unknown.map((name) => `${key}: unknown scheme ${name}`),
        ...(named.includes(ACCESS_TOKEN_SCHEME) === needsAccessToken
          ? []
          : [`${key}: access token ${needsAccessToken ? 'not declared' : 'declared'}`]),
      ];
    });

    expect(wrong).toEqual([]);
    expect(document.paths['/api/v1/auth/login'].post.security).toEqual([]);
  });

  it('answers every error of every operation with the Error body', () => {
    const notErrorBody = operationsOf(document).flatMap(({ key, operation }) =>
      Object.entries(operation.responses as Record<string, any>)
        .filter(([status]) => Number(status) >= 400)
        .filter(
          ([, response]) =>
            response.content?.['application/json']?.schema?.$ref !==
            '#/components/schemas/ErrorBodyDto',
        )
        .map(([status]) => `${key} ${status}`),
    );

    expect(notErrorBody).toEqual([]);
  });

  it('describes the log WebSocket: its 101, its refusals, offset, the subprotocol and the messages', () => {
    const stream = document.paths[LOG_STREAM_PATH].get;
    const parameters = Object.fromEntries(
      stream.parameters.map((parameter: any) => [`${parameter.in} ${parameter.name}`, parameter]),
    );
    const linkedSchemas = [
      ...(stream.description as string).matchAll(/\(#\/components\/schemas\/(\w+)\)/g),
    ].map((match) => match[1]);

    expect(Object.keys(stream.responses).sort()).toEqual(
      ['101', '400', '401', '403', '404', '429', '500', '503'].sort(),
    );
    expect(stream.responses['429'].headers['Retry-After']).toBeDefined();
    expect(parameters['path id'].schema).toMatchObject({ format: 'uuid' });
    expect(parameters['query offset'].schema).toMatchObject({ type: 'integer', minimum: 0 });
    expect(parameters['header Sec-WebSocket-Protocol'].description).toMatch(/bearer\./);
    expect(linkedSchemas).toEqual(['LogEntryResponseDto']);
    expect(document.components.schemas.LogEntryResponseDto.required).toEqual(
      expect.arrayContaining(['timestamp', 'level', 'message']),
    );
  });

  it('documents what the real upgrade answers: 101 with its subprotocol, and a refusal', async () => {
    const seeded = await seedTenancy(kiln);
    const token = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    const build = await new ApiClient(kiln, token, seeded.tenantA).createBuild(seeded.projectA);
    const url = `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${build.id}/logs/stream?offset=0`;
    const stream = document.paths[LOG_STREAM_PATH].get;

    const accepted = new LogStreamClient(url, {
      protocols: ['kiln.logs.v1', `bearer.${token}`, `tenant.${seeded.tenantA}`],
    });
    await accepted.opened;
    accepted.close();
    await accepted.closed;
    const refused = await refusal(new LogStreamClient(url));

    expect(stream.responses['101'].headers['Sec-WebSocket-Protocol'].schema.enum).toEqual([
      accepted.protocol,
    ]);
    expect(stream.responses[String(refused.status)]).toBeDefined();
    expect(Object.keys(refused.body)).toEqual(
      expect.arrayContaining(document.components.schemas.ErrorBodyDto.required),
    );
  });

  it('passes redocly (recommended) and Spectral (oas) with no error and no warning', async () => {
    const result = await lint(document);

    expect(result).toEqual({ status: 0, output: expect.any(String) });
    expect(result.output).toContain('redocly (recommended): 0 errors, 0 warnings');
  });

  it.each([
    [
      'a warning only redocly reports (no info.license)',
      (linted: any) => delete linted.info.license,
      'info-license',
    ],
    [
      'a warning only Spectral reports (an operation without a description)',
      (linted: any) => delete linted.paths['/api/v1/builds'].get.description,
      'operation-description',
    ],
  ])('fails the lint on %s', async (_name, spoil, rule) => {
    const spoiled = structuredClone(document);
    spoil(spoiled);

    const result = await lint(spoiled);

    expect(result.status).toBe(1);
    expect(result.output).toContain(rule);
  });
});
