import { isUserPermission, type Permission, type Role } from '../src/auth/permissions.js';
import { listRoutes } from '../src/auth/route-inventory.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import {
  craftToken,
  PASSWORD,
  type Seeded,
  seedTenancy,
  tokenFor,
  validClaims,
} from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { FakeRunner } from './support/fake-runner.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The state a route's build must be in for the allowed caller to succeed ('none': no :id). */
type BuildState = 'none' | 'queued' | 'in_progress' | 'failed' | 'success';

interface RouteRow {
  readonly permission: Permission;
  readonly success: number;
  readonly build: BuildState;
}

// Every non-public route, exactly as listRoutes() names it, with the permission it must declare
// (the permissions of docs/security.md). A route missing here, or declaring another permission, fails the suite.
const ROUTES: Readonly<Record<string, RouteRow>> = {
  'POST /api/v1/builds': { permission: 'build:create', success: 201, build: 'none' },
  'GET /api/v1/builds': { permission: 'build:list', success: 200, build: 'none' },
  'GET /api/v1/builds/:id': { permission: 'build:read', success: 200, build: 'queued' },
  'DELETE /api/v1/builds/:id': { permission: 'build:delete', success: 204, build: 'success' },
  // A pin decides whether retention may delete the build: build:delete (docs/adr/0050-retention.md).
  'PUT /api/v1/builds/:id/keep': { permission: 'build:delete', success: 200, build: 'success' },
  'DELETE /api/v1/builds/:id/keep': { permission: 'build:delete', success: 200, build: 'success' },
  'POST /api/v1/builds/:id/start': { permission: 'build:create', success: 200, build: 'queued' },
  'POST /api/v1/builds/:id/cancel': {
    permission: 'build:cancel',
    success: 200,
    build: 'in_progress',
  },
  'POST /api/v1/builds/:id/retry': { permission: 'build:create', success: 200, build: 'failed' },
  'GET /api/v1/builds/:id/status': {
    permission: 'build:read',
    success: 200,
    build: 'in_progress',
  },
  'GET /api/v1/builds/:id/logs': { permission: 'build:read', success: 200, build: 'in_progress' },
  // No step has uploaded anything for these builds: an allowed caller gets past the guard to the
  // route's own 404 ("No SBOM is stored"), a denied one the guard's 403.
  'GET /api/v1/builds/:id/sbom': { permission: 'build:read', success: 404, build: 'in_progress' },
  'GET /api/v1/builds/:id/scan': { permission: 'build:read', success: 404, build: 'in_progress' },
  // Only a successful build has provenance: an allowed caller gets the route's own 404.
  'GET /api/v1/builds/:id/provenance': {
    permission: 'build:read',
    success: 404,
    build: 'in_progress',
  },
  // Signing keys (docs/provenance.md): public halves for every reader of builds; a key id the
  // tenant never signed with is 404; rotating is its admins'.
  'GET /api/v1/signing-keys': { permission: 'build:read', success: 200, build: 'none' },
  'GET /api/v1/signing-keys/:keyId/pem': { permission: 'build:read', success: 404, build: 'none' },
  'POST /api/v1/signing-keys/rotate': {
    permission: 'settings:manage',
    success: 201,
    build: 'none',
  },
  'GET /api/v1/settings/provenance': { permission: 'settings:manage', success: 200, build: 'none' },
  'PUT /api/v1/settings/provenance': { permission: 'settings:manage', success: 200, build: 'none' },
  'GET /api/v1/projects': { permission: 'build:list', success: 200, build: 'none' },
  // The admin API (docs/adr/0043-admin-api.md). POST /members re-sends a member's own role (200,
  // nothing changes); the routes with an id of their own name a missing one, so an allowed caller
  // gets past the guard to the route's own 404 (test/admin-api.spec.ts has their successes).
  'POST /api/v1/projects': { permission: 'project:manage', success: 201, build: 'none' },
  'GET /api/v1/projects/:id': { permission: 'build:list', success: 404, build: 'none' },
  'PATCH /api/v1/projects/:id': { permission: 'project:manage', success: 404, build: 'none' },
  'DELETE /api/v1/projects/:id': { permission: 'project:manage', success: 404, build: 'none' },
  'GET /api/v1/members': { permission: 'member:manage', success: 200, build: 'none' },
  'POST /api/v1/members': { permission: 'member:manage', success: 200, build: 'none' },
  'DELETE /api/v1/members/:userId': { permission: 'member:manage', success: 404, build: 'none' },
  'POST /api/v1/tenants': { permission: 'system:admin', success: 201, build: 'none' },
  'GET /api/v1/tenants': { permission: 'system:admin', success: 200, build: 'none' },
  'PATCH /api/v1/tenants/:id': { permission: 'system:admin', success: 404, build: 'none' },
  'DELETE /api/v1/tenants/:id': { permission: 'system:admin', success: 404, build: 'none' },
  'POST /api/v1/users': { permission: 'system:admin', success: 201, build: 'none' },
  'GET /api/v1/users': { permission: 'system:admin', success: 200, build: 'none' },
  'PATCH /api/v1/users/:id': { permission: 'system:admin', success: 404, build: 'none' },
  // API tokens (docs/adr/0044-api-tokens.md): every member manages its own.
  'POST /api/v1/tokens': { permission: 'token:manage', success: 201, build: 'none' },
  'GET /api/v1/tokens': { permission: 'token:manage', success: 200, build: 'none' },
  'DELETE /api/v1/tokens/:id': { permission: 'token:manage', success: 404, build: 'none' },
  // Settings: a missing project's credentials are 404; a secret manager or registry is set with
  // settings the CLI takes (200), and one the tenant never had is removed (404).
  'GET /api/v1/projects/:id/git-credentials': {
    permission: 'settings:manage',
    success: 404,
    build: 'none',
  },
  'PUT /api/v1/projects/:id/git-credentials': {
    permission: 'settings:manage',
    success: 404,
    build: 'none',
  },
  'DELETE /api/v1/projects/:id/git-credentials': {
    permission: 'settings:manage',
    success: 404,
    build: 'none',
  },
  'GET /api/v1/settings/secret-managers': {
    permission: 'settings:manage',
    success: 200,
    build: 'none',
  },
  'PUT /api/v1/settings/secret-managers/:type': {
    permission: 'settings:manage',
    success: 200,
    build: 'none',
  },
  'DELETE /api/v1/settings/secret-managers/:type': {
    permission: 'settings:manage',
    success: 404,
    build: 'none',
  },
  'GET /api/v1/settings/registries': { permission: 'settings:manage', success: 200, build: 'none' },
  'PUT /api/v1/settings/registries/:type': {
    permission: 'settings:manage',
    success: 200,
    build: 'none',
  },
  'DELETE /api/v1/settings/registries/:type': {
    permission: 'settings:manage',
    success: 404,
    build: 'none',
  },
  'GET /api/v1/settings/admission': { permission: 'settings:manage', success: 200, build: 'none' },
  'GET /api/v1/tenants/:id/admission': { permission: 'system:admin', success: 404, build: 'none' },
  'PATCH /api/v1/tenants/:id/admission': {
    permission: 'system:admin',
    success: 404,
    build: 'none',
  },
  // Retention (docs/adr/0050-retention.md): the installation's administrators set a tenant's
  // policy and preview any tenant; a tenant's admins read theirs and preview their tenant.
  'GET /api/v1/tenants/:id/retention': { permission: 'system:admin', success: 404, build: 'none' },
  'PATCH /api/v1/tenants/:id/retention': {
    permission: 'system:admin',
    success: 404,
    build: 'none',
  },
  'GET /api/v1/retention/preview': { permission: 'system:admin', success: 200, build: 'none' },
  'GET /api/v1/settings/retention': { permission: 'settings:manage', success: 200, build: 'none' },
  'GET /api/v1/settings/retention/preview': {
    permission: 'settings:manage',
    success: 200,
    build: 'none',
  },
  // The audit log (docs/adr/0049-audit-log.md): a tenant's for its admins, every tenant's for
  // installation administrators.
  'GET /api/v1/audit': { permission: 'audit:read', success: 200, build: 'none' },
  'GET /api/v1/audit/installation': { permission: 'system:admin', success: 200, build: 'none' },
  // Triggers (docs/adr/0053-triggers.md): a tenant's admins manage them. :id names a missing
  // project or trigger, so an allowed caller gets past the guard to the route's own 404
  // (test/triggers.spec.ts has their successes).
  'GET /api/v1/projects/:id/triggers': {
    permission: 'trigger:manage',
    success: 404,
    build: 'none',
  },
  'POST /api/v1/projects/:id/triggers': {
    permission: 'trigger:manage',
    success: 404,
    build: 'none',
  },
  'GET /api/v1/triggers/:id': { permission: 'trigger:manage', success: 404, build: 'none' },
  'PATCH /api/v1/triggers/:id': { permission: 'trigger:manage', success: 404, build: 'none' },
  'DELETE /api/v1/triggers/:id': { permission: 'trigger:manage', success: 404, build: 'none' },
  'POST /api/v1/triggers/:id/secret': { permission: 'trigger:manage', success: 404, build: 'none' },
  'GET /api/v1/triggers/:id/deliveries': {
    permission: 'trigger:manage',
    success: 404,
    build: 'none',
  },
};

/** What :type names: a type the PUT sets, and for DELETE one the tenant never has. */
const TYPES: Readonly<Record<string, string>> = {
  'PUT /api/v1/settings/secret-managers/:type': 'vault',
  'DELETE /api/v1/settings/secret-managers/:type': 'azure_keyvault',
  'PUT /api/v1/settings/registries/:type': 'harbor',
  'DELETE /api/v1/settings/registries/:type': 'artifactory',
};

// What each role of tenant A is expected to hold; written out here rather than read from
// src/auth/permissions.ts so that a change to the role map shows up as failing cells.
const GRANTS: Readonly<Record<Role, readonly Permission[]>> = {
  admin: [
    'build:create',
    'build:list',
    'build:read',
    'build:delete',
    'build:cancel',
    'member:manage',
    'project:manage',
    'settings:manage',
    'token:manage',
    'audit:read',
    'trigger:manage',
  ],
  developer: ['build:create', 'build:list', 'build:read', 'build:cancel', 'token:manage'],
  viewer: ['build:list', 'build:read', 'token:manage'],
};

type Pov =
  | 'anonymous'
  | 'forged admin token'
  | Role
  | 'outsider'
  | 'tenant B admin'
  | 'system admin'
  | "developer's API token";

interface Cell {
  readonly name: string;
  readonly route: string;
  readonly row: RouteRow;
  readonly pov: Pov;
  readonly expected: number;
}

const ERROR_CODES: Readonly<Record<number, string>> = {
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
};

const CELLS: readonly Cell[] = Object.entries(ROUTES).flatMap(([route, row]) => {
  const povs: Array<[Pov, number]> = [
    ['anonymous', 401],
    ['forged admin token', 401],
    ...(Object.keys(GRANTS) as Role[]).map((role): [Pov, number] => [
      role,
      GRANTS[role].includes(row.permission) ? row.success : 403,
    ]),
    ['outsider', 403],
    // An installation administrator who is a member of no tenant: the installation's routes, and
    // no tenant's (a tenant role is never implied).
    ['system admin', row.permission === 'system:admin' ? row.success : 403],
    // An API token of the developer with every permission it may hold: never token:manage.
    [
      "developer's API token",
      GRANTS.developer.includes(row.permission) && row.permission !== 'token:manage'
        ? row.success
        : 403,
    ],
    ...(row.build !== 'none' ? [['tenant B admin', 404] as [Pov, number]] : []),
  ];
  return povs.map(([pov, expected]) => ({
    name: `${route} as ${pov} → ${expected}`,
    route,
    row,
    pov,
    expected,
  }));
});

const MISSING = '6f1c6a52-7a7d-4d0b-9d55-5b0c2f6f0a11';

/** The body each route that takes one is sent with (`n` makes names unique). */
function bodyOf(route: string, projectA: string, n: number): unknown {
  switch (route) {
    case 'POST /api/v1/builds':
      return { project_id: projectA, git_branch: `matrix-${n}` };
    case 'POST /api/v1/members':
      return { email: 'viewer@example.com', role: 'viewer' };
    case 'POST /api/v1/tenants':
    case 'PATCH /api/v1/tenants/:id':
      return { name: `matrix-tenant-${n}` };
    case 'POST /api/v1/users':
      return { email: `matrix-user-${n}@example.com`, password: 'a long enough password' };
    case 'PATCH /api/v1/users/:id':
      return { disabled: false };
    case 'POST /api/v1/tokens':
      return { name: `matrix-${n}`, permissions: ['build:list'] };
    case 'PUT /api/v1/projects/:id/git-credentials':
      return { username: 'ci', password: 'vault:kv/data/ci/git#token' };
    case 'PUT /api/v1/settings/secret-managers/:type':
      return {
        address: 'https://vault.example.com:8200',
        auth: { method: 'kubernetes', role: 'kiln' },
      };
    case 'PUT /api/v1/settings/registries/:type':
      return {
        address: 'harbor.example.com',
        username: 'robot$ci',
        password: 'vault:kv/data/registry/harbor#secret',
      };
    case 'PATCH /api/v1/tenants/:id/admission':
      return { weight: 2 };
    case 'PATCH /api/v1/tenants/:id/retention':
      return { days: 1 };
    case 'POST /api/v1/projects':
    case 'PATCH /api/v1/projects/:id':
      return { name: `matrix-project-${n}` };
    case 'POST /api/v1/projects/:id/triggers':
      return { name: `matrix-trigger-${n}`, provider: 'github' };
    case 'PATCH /api/v1/triggers/:id':
      return { enabled: false };
    case 'PUT /api/v1/settings/provenance':
      return { provenance: 'optional' };
    default:
      return undefined;
  }
}

interface Reply {
  readonly status: number;
  readonly body: any;
}

describe('authorization matrix', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let runner: FakeRunner;
  let admin: ApiClient;
  let headersOf: Record<Pov, Record<string, string>>;
  let branches = 0;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner });
    seeded = await seedTenancy(kiln);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    const { users, tenantA, tenantB } = seeded;
    const bearer = async (email: string) => `Bearer ${await tokenFor(kiln.baseUrl, email)}`;
    const adminToken = await bearer(users.admin.email);
    const root = await kiln.app.get(TenancyService).createUser('root@example.com', PASSWORD);
    await kiln.app.get(TenancyService).setSystemAdmin(root.email, true);
    headersOf = {
      anonymous: { 'x-tenant-id': tenantA },
      'forged admin token': {
        authorization: `Bearer ${craftToken(validClaims(users.admin.id), { secret: 'x'.repeat(40) })}`,
        'x-tenant-id': tenantA,
      },
      admin: { authorization: adminToken, 'x-tenant-id': tenantA },
      developer: { authorization: await bearer(users.developer.email), 'x-tenant-id': tenantA },
      viewer: { authorization: await bearer(users.viewer.email), 'x-tenant-id': tenantA },
      outsider: { authorization: await bearer(users.outsider.email), 'x-tenant-id': tenantA },
      'tenant B admin': { authorization: await bearer(users.adminB.email), 'x-tenant-id': tenantB },
      'system admin': { authorization: await bearer(root.email), 'x-tenant-id': tenantA },
      "developer's API token": {
        authorization: `Bearer ${await apiTokenOf(await bearer(users.developer.email), tenantA)}`,
        'x-tenant-id': tenantA,
      },
    };
    admin = new ApiClient(kiln, adminToken.slice('Bearer '.length), tenantA);
  });

  afterAll(async () => {
    await kiln.close();
  });

  /** A new API token of the bearer's user in the tenant, with its role's permissions. */
  async function apiTokenOf(bearer: string, tenantId: string): Promise<string> {
    const response = await fetch(`${kiln.baseUrl}/api/v1/tokens`, {
      method: 'POST',
      headers: {
        authorization: bearer,
        'x-tenant-id': tenantId,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'matrix' }),
    });
    if (response.status !== 201) throw new Error(`token creation gave ${response.status}`);
    return ((await response.json()) as { token: string }).token;
  }

  /** A build of tenant A in the given state, on a branch of its own (no duplicate-409). */
  async function buildIn(state: BuildState): Promise<string> {
    const { id } = (await admin.createBuild(seeded.projectA, `matrix-${++branches}`)) as {
      id: string;
    };
    if (state === 'none' || state === 'queued') return id;
    const started = await admin.request('POST', `/builds/${id}/start`);
    if (started.status !== 200) throw new Error(`start gave ${started.status}`);
    switch (state) {
      case 'in_progress':
        break;
      case 'failed':
        await runner.fail(id);
        break;
      case 'success':
        await runner.succeed(id);
        break;
    }
    return id;
  }

  /** Sends a cell's request; `id` fills :id (tenant A's build, or a missing one). */
  async function send(cell: Cell, id: string | undefined): Promise<Reply> {
    const [method, pattern] = cell.route.split(' ') as [string, string];
    const path = pattern
      .replace(':id', id ?? MISSING)
      .replace(':userId', MISSING)
      .replace(':keyId', '0'.repeat(64))
      .replace(':type', TYPES[cell.route] ?? '');
    const json = bodyOf(cell.route, seeded.projectA, ++branches);
    const body = json === undefined ? undefined : JSON.stringify(json);
    const response = await fetch(`${kiln.baseUrl}${path}`, {
      method,
      headers: {
        ...headersOf[cell.pov],
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
  }

  async function prepare(cell: Cell): Promise<string | undefined> {
    return cell.row.build === 'none' ? undefined : buildIn(cell.row.build);
  }

  const comparable = (error: any) => ({ ...error, timestamp: 0, trace_id: 0 });

  it('has a row for every non-public route, with the permission the route declares', () => {
    const declared = Object.fromEntries(
      listRoutes(kiln.app)
        .filter((route) => !route.public && !isUserPermission(route.permission!))
        .map((route) => [`${route.method} ${route.path}`, route.permission]),
    );
    const table = Object.fromEntries(
      Object.entries(ROUTES).map(([route, row]) => [route, row.permission]),
    );

    expect(declared).toEqual(table);
  });

  // Routes over the caller's own account involve no tenant and no role, so no cell of this matrix
  // fits them (test/auth-tenants.spec.ts covers them); a tenant route must not hide among them.
  it("checks only the caller's own account and tenants without a tenant", () => {
    const userRoutes = listRoutes(kiln.app)
      .filter((route) => route.permission !== undefined && isUserPermission(route.permission))
      .map((route) => `${route.method} ${route.path} ${route.permission}`);

    expect(userRoutes.sort()).toEqual([
      'GET /api/v1/auth/me tenant:list',
      'GET /api/v1/auth/tenants tenant:list',
      'POST /api/v1/auth/password account:manage',
    ]);
  });

  it.each(CELLS)('$name', async (cell) => {
    const reply = await send(cell, await prepare(cell));

    const expectedCode = ERROR_CODES[cell.expected];
    expect({ status: reply.status, code: reply.body?.code }).toEqual({
      status: cell.expected,
      code: expectedCode,
    });
    if (cell.expected === 204) expect(reply.body).toBeUndefined();
    if (cell.pov === 'tenant B admin') {
      const missing = await send(cell, MISSING);
      expect(missing.status).toBe(404);
      expect(comparable(reply.body)).toEqual(comparable(missing.body));
    }
  });

  it('changes no build and hands nothing to the runner for any refused request', async () => {
    const refused = CELLS.filter((cell) => cell.expected >= 400);
    const prepared: Array<[Cell, string | undefined]> = [];
    for (const cell of refused) prepared.push([cell, await prepare(cell)]);
    const snapshot = async () => ({
      builds: await kiln.dataSource.query('SELECT id, status, updated_at FROM builds ORDER BY id'),
      started: [...runner.started],
      cancelled: [...runner.cancelled],
      removed: [...runner.removed],
    });
    const before = await snapshot();

    const statuses: number[] = [];
    for (const [cell, id] of prepared) statuses.push((await send(cell, id)).status);

    expect(statuses).toEqual(refused.map((cell) => cell.expected));
    expect(await snapshot()).toEqual(before);
  });
});
