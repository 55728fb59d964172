import type { INestApplicationContext } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { randomUUID } from 'node:crypto';
import { OPENAPI_JSON_PATH } from '../src/common/openapi-document.js';
import { LogStreamServer } from '../src/log-stream/log-stream.server.js';
import { IdleOperatorModule } from '../src/operator/operator-idle.module.js';
import { OperatorModule } from '../src/operator/operator.module.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { jsonOf } from './support/http.js';
import { LogStreamClient } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** What Nest composed for a role: the controllers it mounted and the parts that serve no route. */
interface Composition {
  controllers: string[];
  /** The raw `ws` server behind /api/v1/builds/{id}/logs/stream (kiln has no Nest gateway). */
  logStreamServer: boolean;
  buildRunner: boolean;
  /**
   * The operator's module: OperatorModule with a cluster, IdleOperatorModule without one (these
   * tests have none), or none when the role runs no operator.
   */
  operator: string | null;
}

function compositionOf(app: INestApplicationContext): Composition {
  const modules = [...app.get(ModulesContainer).values()];
  const provides = (token: unknown) =>
    modules.some((module) => module.providers.has(token as never));
  return {
    controllers: modules
      .flatMap((module) => [...module.controllers.values()])
      .map((wrapper) => wrapper.metatype?.name ?? String(wrapper.token))
      .sort(),
    logStreamServer: provides(LogStreamServer),
    buildRunner: provides(BuildRunner),
    operator:
      [OperatorModule, IdleOperatorModule].find((operator) =>
        modules.some((module) => module.metatype === operator),
      )?.name ?? null,
  };
}

const API_CONTROLLERS = [
  'AccountController',
  'AdminTenantsController',
  'AdminUsersController',
  'ApiTokensController',
  'ArtifactUploadsController',
  'ArtifactsController',
  'AuditController',
  'AuthController',
  'BuildProvenanceController',
  'BuildsController',
  'HealthController',
  'InstallationAuditController',
  'LogsController',
  'MembersController',
  'ProjectsController',
  'ProvenanceSettingsController',
  'RetentionAdminController',
  'RetentionSettingsController',
  'SettingsController',
  'SigningKeysController',
  'TenantAdmissionController',
  'TenantsController',
  'TriggersController',
  'WebhooksController',
];
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

function logStreamUrl(kiln: TestApp): string {
  return `${kiln.baseUrl.replace(/^http/, 'ws')}/api/v1/builds/${randomUUID()}/logs/stream`;
}

/** Resolves with the refusal of a WebSocket upgrade (LogStreamClient rejects with it). */
async function refusalOf(client: LogStreamClient): Promise<{ status: number; body: any }> {
  try {
    await client.opened;
  } catch (error) {
    return error as { status: number; body: any };
  }
  client.close();
  throw new Error('the WebSocket upgrade was accepted');
}

describe('KILN_ROLE', () => {
  describe('operator', () => {
    let kiln: TestApp;

    beforeAll(async () => {
      kiln = await startTestApp({ env: { KILN_ROLE: 'operator' } });
    });

    afterAll(async () => {
      await kiln.close();
    });

    it('mounts only the health controller, no log stream and no runner', () => {
      expect(compositionOf(kiln.app)).toEqual({
        controllers: ['HealthController'],
        logStreamServer: false,
        buildRunner: false,
        operator: 'IdleOperatorModule',
      });
    });

    it('answers /healthz with 200', async () => {
      const response = await fetch(`${kiln.baseUrl}/healthz`);

      expect(response.status).toBe(200);
      expect(await jsonOf(response)).toEqual({ status: 'ok' });
    });

    it('answers /readyz with 200 once the database is reachable', async () => {
      const response = await fetch(`${kiln.baseUrl}/readyz`);

      expect(response.status).toBe(200);
      expect(await jsonOf(response)).toEqual({ status: 'ok', checks: { database: 'ok' } });
    });

    it('answers GET /api/v1/builds with 404 and the Error body', async () => {
      const response = await fetch(`${kiln.baseUrl}/api/v1/builds`);

      expect(response.status).toBe(404);
      expect(await jsonOf(response)).toEqual({
        error: 'No route for GET /api/v1/builds',
        code: 'NOT_FOUND',
        timestamp: expect.stringMatching(ISO_TIMESTAMP),
        trace_id: response.headers.get('x-request-id'),
      });
    });

    it('serves no OpenAPI document', async () => {
      const response = await fetch(`${kiln.baseUrl}/${OPENAPI_JSON_PATH}`);

      expect(response.status).toBe(404);
      expect(await jsonOf(response)).toMatchObject({ code: 'NOT_FOUND' });
    });

    it('refuses a WebSocket connect to the log stream path with 404 and the Error body', async () => {
      const refusal = await refusalOf(new LogStreamClient(logStreamUrl(kiln)));

      expect(refusal.status).toBe(404);
      expect(refusal.body).toMatchObject({ code: 'NOT_FOUND' });
    });
  });

  describe('api', () => {
    let kiln: TestApp;

    beforeAll(async () => {
      kiln = await startTestApp({ env: { KILN_ROLE: 'api' } });
    });

    afterAll(async () => {
      await kiln.close();
    });

    it('mounts the API controllers, the log stream and a runner, and no operator', () => {
      expect(compositionOf(kiln.app)).toEqual({
        controllers: API_CONTROLLERS,
        logStreamServer: true,
        buildRunner: true,
        operator: null,
      });
    });

    it('routes GET /api/v1/builds to the API, which asks for a token', async () => {
      const response = await fetch(`${kiln.baseUrl}/api/v1/builds`);

      expect(response.status).toBe(401);
      expect(await jsonOf(response)).toMatchObject({ code: 'UNAUTHORIZED' });
    });

    it('serves the OpenAPI document', async () => {
      const response = await fetch(`${kiln.baseUrl}/${OPENAPI_JSON_PATH}`);

      expect(response.status).toBe(200);
      expect(await jsonOf(response)).toMatchObject({ openapi: expect.any(String) });
    });

    it('answers a WebSocket connect to the log stream path itself, asking for a token', async () => {
      const refusal = await refusalOf(new LogStreamClient(logStreamUrl(kiln)));

      expect(refusal.status).toBe(401);
      expect(refusal.body).toMatchObject({ code: 'UNAUTHORIZED' });
    });
  });

  describe('all', () => {
    let kiln: TestApp;

    beforeAll(async () => {
      kiln = await startTestApp({ env: { KILN_ROLE: 'all' } });
    });

    afterAll(async () => {
      await kiln.close();
    });

    it('mounts the API controllers, the log stream, a runner and the operator', () => {
      expect(compositionOf(kiln.app)).toEqual({
        controllers: API_CONTROLLERS,
        logStreamServer: true,
        buildRunner: true,
        operator: 'IdleOperatorModule',
      });
    });
  });
});
