import { Validator } from '@seriousme/openapi-schema-validator';
import { parse } from 'yaml';
import { isUserPermission } from '../src/auth/permissions.js';
import { listRoutes } from '../src/auth/route-inventory.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

describe('OpenAPI document', () => {
  let kiln: TestApp;
  let document: any;

  beforeAll(async () => {
    kiln = await startTestApp();
    const response = await fetch(`${kiln.baseUrl}/api/v1/openapi.json`);
    expect(response.status).toBe(200);
    document = await jsonOf(response);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('is valid OpenAPI 3 with the interface version 1.0.0', async () => {
    const result = await new Validator().validate(document);

    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toMatch(/^3\./);
    expect(document.info.version).toBe('1.0.0');
  });

  it('documents every API route with its error responses in the Error shape', () => {
    const apiRoutes = listRoutes(kiln.app).filter((r) => r.path.startsWith('/api/v1/'));
    for (const route of apiRoutes) {
      const path = route.path.replace(/:([A-Za-z_]+)/g, '{$1}');
      const operation = document.paths[path]?.[route.method.toLowerCase()];
      expect({ route: `${route.method} ${path}`, documented: operation !== undefined }).toEqual({
        route: `${route.method} ${path}`,
        documented: true,
      });
      const statuses = Object.keys(operation.responses);
      expect(statuses).toEqual(expect.arrayContaining(['400', '500']));
      // A user permission (the caller's own account) involves no tenant and no role: no 403.
      const refusals =
        route.permission !== undefined && isUserPermission(route.permission)
          ? ['401', '429']
          : ['401', '403', '429'];
      if (!route.public) expect(statuses).toEqual(expect.arrayContaining(refusals));
      expect(operation.responses['400'].content['application/json'].schema.$ref).toBe(
        '#/components/schemas/ErrorBodyDto',
      );
    }
  });

  it('describes both request forms of POST /builds and the rate-limit headers', () => {
    const create = document.paths['/api/v1/builds'].post;

    expect(create.requestBody.content['application/json'].schema.oneOf).toHaveLength(2);
    expect(document.components.schemas.WizardCreateBuildDto.required).toEqual(
      expect.arrayContaining(['tenant_id', 'project_id', 'manifest']),
    );
    expect(create.responses['429'].headers['X-RateLimit-Reset'].description).toMatch(/Unix time/);
    expect(document.components.schemas.ErrorBodyDto.properties.code.enum).toEqual([
      'INVALID_REQUEST',
      'UNAUTHORIZED',
      'FORBIDDEN',
      'NOT_FOUND',
      'CONFLICT',
      'INTERNAL_SERVER_ERROR',
    ]);
  });

  it('lists what a build pushed (image_digest, images) on Build as optional fields', () => {
    const build = document.components.schemas.BuildDto;

    expect(build.properties.image_digest).toMatchObject({ type: 'string', nullable: true });
    expect(build.properties.images).toMatchObject({ type: 'array', items: { type: 'string' } });
    expect(build.required ?? []).not.toEqual(expect.arrayContaining(['image_digest']));
    expect(build.required ?? []).not.toEqual(expect.arrayContaining(['images']));
  });

  it('serves a browsable UI', async () => {
    const response = await fetch(`${kiln.baseUrl}/api/v1/docs`);

    expect(response.status).toBe(200);
    expect(await response.text()).toMatch(/swagger-ui/i);
  });

  it("serves the UI's assets and the same document as YAML", async () => {
    const page = await (await fetch(`${kiln.baseUrl}/api/v1/docs/`)).text();
    const assets = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map(([, path]) => path);
    const yaml = await fetch(`${kiln.baseUrl}/api/v1/openapi.yaml`);

    expect(assets).toEqual(expect.arrayContaining(['swagger-ui-bundle.js', 'swagger-ui-init.js']));
    for (const asset of assets) {
      const response = await fetch(`${kiln.baseUrl}/api/v1/docs/${asset}`);
      expect({ asset, status: response.status }).toEqual({ asset, status: 200 });
    }
    expect(yaml.status).toBe(200);
    expect(parse(await yaml.text())).toEqual(document);
  });
});
