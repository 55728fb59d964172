import { listRoutes } from '../src/auth/route-inventory.js';
import { startTestApp, type TestApp } from './support/test-app.js';

// The only routes open without an access token and a tenant.
const PUBLIC_ROUTES = ['POST /api/v1/auth/login', 'GET /healthz', 'GET /readyz'];
// A build pod's uploads: no user, but an upload token of their own (BuildArtifacts checks it);
// and a git host's deliveries: no user, but the trigger's signature (WebhookReceiver checks it).
const UPLOAD_TOKEN_ROUTES = ['PUT /api/v1/builds/:id/sbom', 'PUT /api/v1/builds/:id/scan'];
const WEBHOOK_ROUTES = ['POST /api/v1/hooks/:id'];

describe('route permissions (default deny)', () => {
  let kiln: TestApp;

  beforeAll(async () => {
    kiln = await startTestApp();
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('finds the routes the application serves', () => {
    const routes = listRoutes(kiln.app).map((r) => `${r.method} ${r.path}`);

    expect(routes).toEqual(
      expect.arrayContaining([
        ...PUBLIC_ROUTES,
        ...UPLOAD_TOKEN_ROUTES,
        ...WEBHOOK_ROUTES,
        'GET /api/v1/projects',
      ]),
    );
  });

  it('has every route declare exactly one permission, or be one of the few public ones', () => {
    const offenders = listRoutes(kiln.app)
      .filter((route) => {
        const name = `${route.method} ${route.path}`;
        if ([...PUBLIC_ROUTES, ...UPLOAD_TOKEN_ROUTES, ...WEBHOOK_ROUTES].includes(name))
          return !route.public || route.permission !== undefined;
        return route.public || route.permission === undefined;
      })
      .map((route) => `${route.method} ${route.path}`);

    expect(offenders).toEqual([]);
  });

  it('keeps every public route reachable and every other route closed without a token', async () => {
    for (const route of listRoutes(kiln.app)) {
      const path = route.path.replace(/:[^/]+/g, '00000000-0000-4000-8000-000000000000');
      const response = await fetch(`${kiln.baseUrl}${path}`, { method: route.method });
      const name = `${route.method} ${route.path}`;
      if ([...UPLOAD_TOKEN_ROUTES, ...WEBHOOK_ROUTES].includes(name))
        expect({ route: name, status: response.status }).toMatchObject({ status: 401 });
      else if (route.public) expect([200, 400]).toContain(response.status);
      else
        expect({ route: `${route.method} ${route.path}`, status: response.status }).toMatchObject({
          status: 401,
        });
    }
  });
});
