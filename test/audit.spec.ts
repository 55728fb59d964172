import { Controller, HttpCode, Module, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { BuildArtifacts } from '../src/artifacts/build-artifacts.js';
import { AUDIT_ROUTES, AuditRouteMatcher } from '../src/audit-http/audit-actions.js';
import { AuditRetention } from '../src/audit/audit-retention.js';
import { AuditEventsRepository } from '../src/audit/audit-events.repository.js';
import { AuditLog } from '../src/audit/audit-log.js';
import { isSystemPermission, isUserPermission } from '../src/auth/permissions.js';
import { Public } from '../src/auth/require-permission.decorator.js';
import { listRoutes } from '../src/auth/route-inventory.js';
import { TenancyService } from '../src/auth/tenancy.service.js';
import { TokenService } from '../src/auth/token.service.js';
import { loadConfig } from '../src/config/config.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { SPDX } from './support/artifact-documents.js';
import { PASSWORD, type Seeded, seedTenancy, TEST_JWT_SECRET, tokenFor } from './support/auth.js';
import { FakeRunner } from './support/fake-runner.js';
import { LogCapture } from './support/log-capture.js';
import { scrape, sumOf } from './support/prometheus-text.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** A probe route that fails with a fault (500), and is in no audit table: recorded as unlisted. */
@Controller('audit-probe')
class FaultProbeController {
  @Post()
  @Public()
  @HttpCode(200)
  fail(): never {
    throw new Error('probe fault');
  }
}

@Module({ controllers: [FaultProbeController] })
class FaultProbeModule {}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Secret values the calls below send or receive: none may reach an audit line or row. */
const SECRETS = {
  newUserPassword: 'a long enough password for the audit',
  changedPassword: 'the changed password of the audit spec',
  gitPassword: 'vault:kv/data/ci/git#audit-token',
  registryPassword: 'vault:kv/data/registry/harbor#audit-secret',
};

interface Call {
  readonly method: string;
  readonly path: string;
  readonly body?: unknown;
  readonly headers: Record<string, string>;
}

interface Expected {
  readonly action: string;
  readonly actor: Record<string, unknown>;
  readonly tenant_id: string | null;
  readonly target: { type: string; id: string | null } | null;
  readonly result: 'success' | 'refused' | 'failed';
  readonly status: number;
}

interface Step {
  readonly name: string;
  /** The call to make, from what earlier steps left in `ctx`. */
  readonly call: () => Promise<Call> | Call;
  /** The event it must record, given the answer's status and body. */
  readonly expected: (status: number, body: any) => Expected;
  readonly after?: (body: any) => void;
}

describe('the audit log', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let runner: FakeRunner;
  let root: { id: string; email: string };
  let changer: { id: string; email: string };
  let leaver: { id: string; email: string };
  const bearer: Record<string, string> = {};
  /** What the steps leave for later ones (ids of what they created). */
  const ctx: Record<string, string> = {};
  /** Every bearer token, API token and upload token used: none may be recorded. */
  const credentials: string[] = [];

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner, apiModules: [FaultProbeModule] });
    seeded = await seedTenancy(kiln);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    const tenancy = kiln.app.get(TenancyService);
    const rootUser = await tenancy.createUser('root@example.com', PASSWORD);
    await tenancy.setSystemAdmin(rootUser.email, true);
    root = { id: rootUser.id, email: rootUser.email };
    const changerUser = await tenancy.createUser('changer@example.com', PASSWORD);
    changer = { id: changerUser.id, email: changerUser.email };
    const leaverUser = await tenancy.createUser('leaver@example.com', PASSWORD);
    leaver = { id: leaverUser.id, email: leaverUser.email };
    await tenancy.addMember(seeded.tenantA, leaver.email, 'viewer');
    for (const [name, email] of [
      ['admin', seeded.users.admin.email],
      ['developer', seeded.users.developer.email],
      ['adminB', seeded.users.adminB.email],
      ['root', root.email],
      ['changer', changer.email],
    ] as const) {
      bearer[name] = await tokenFor(kiln.baseUrl, email);
      credentials.push(bearer[name]);
    }
    const created = await fetch(`${kiln.baseUrl}/api/v1/tokens`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${bearer['developer']}`,
        'x-tenant-id': seeded.tenantA,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'audit-ci' }),
    });
    const token = (await created.json()) as { id: string; token: string };
    bearer['developerToken'] = token.token;
    ctx['developerTokenId'] = token.id;
    credentials.push(token.token);
  });

  afterAll(async () => {
    await kiln.close();
  });

  const as = (who: string, tenant: string | undefined = seeded?.tenantA) => ({
    authorization: `Bearer ${bearer[who]}`,
    ...(tenant === undefined ? {} : { 'x-tenant-id': tenant }),
  });

  async function rows(where = 'TRUE', values: unknown[] = []): Promise<any[]> {
    return kiln.dataSource.query(
      `SELECT * FROM audit_events WHERE ${where} ORDER BY occurred_at, id`,
      values,
    );
  }

  const auditLines = () => kiln.logs.lines.filter((line) => line['log'] === 'audit');

  /** Sends a call with a request id of its own; answers status, body and that id. */
  async function send(call: Call): Promise<{ status: number; body: any; requestId: string }> {
    const requestId = `audit-${randomUUID()}`;
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    const response = await fetch(`${kiln.baseUrl}${call.path}`, {
      method: call.method,
      headers: {
        ...call.headers,
        'x-request-id': requestId,
        'user-agent': 'audit-spec/1.0',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text), requestId };
  }

  const userActor = (user: { id: string; email: string }) => ({
    type: 'user',
    user_id: user.id,
    email: user.email,
    api_token_id: null,
  });
  const admin = () => userActor(seeded.users.admin);
  const rootActor = () => userActor(root);
  const nobody = { type: 'anonymous', user_id: null, email: null, api_token_id: null };
  const ok =
    (
      action: string,
      actor: Record<string, unknown>,
      tenant: string | null,
      target: Expected['target'],
    ) =>
    (status: number): Expected => ({
      action,
      actor,
      tenant_id: tenant,
      target,
      result: 'success',
      status,
    });

  // One call of every state-changing route, in an order that lets each succeed (or, where noted,
  // be refused), each with the event it must record.
  const STEPS: Step[] = [
    {
      name: 'POST /api/v1/auth/login',
      call: () => ({
        method: 'POST',
        path: '/api/v1/auth/login',
        body: { email: 'Admin@Example.com', password: PASSWORD },
        headers: {},
      }),
      expected: (status) => ok('auth.login', admin(), null, null)(status),
      after: (body) => credentials.push(body.access_token),
    },
    {
      name: 'POST /api/v1/auth/password',
      call: () => ({
        method: 'POST',
        path: '/api/v1/auth/password',
        body: { current_password: PASSWORD, new_password: SECRETS.changedPassword },
        headers: as('changer', undefined),
      }),
      expected: (status) =>
        ok('account.password.change', userActor(changer), null, { type: 'user', id: changer.id })(
          status,
        ),
      after: (body) => credentials.push(body.access_token),
    },
    {
      name: 'POST /api/v1/builds',
      call: () => ({
        method: 'POST',
        path: '/api/v1/builds',
        body: { project_id: seeded.projectA, git_branch: 'audit-1' },
        headers: as('admin'),
      }),
      expected: (status, body) =>
        ok('build.create', admin(), seeded.tenantA, { type: 'build', id: body.id })(status),
      after: (body) => (ctx['build'] = body.id),
    },
    {
      name: 'POST /api/v1/builds/:id/start',
      call: () => ({
        method: 'POST',
        path: `/api/v1/builds/${ctx['build']}/start`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('build.start', admin(), seeded.tenantA, { type: 'build', id: ctx['build']! })(status),
    },
    {
      name: 'PUT /api/v1/builds/:id/sbom (the build pod, with its upload token)',
      call: async () => {
        const tokens = (await kiln.app.get(BuildArtifacts).mintUploadTokens(ctx['build']!, 600))!;
        credentials.push(tokens.sbom, tokens.scan);
        return {
          method: 'PUT',
          path: `/api/v1/builds/${ctx['build']}/sbom`,
          body: SPDX,
          headers: { authorization: `Bearer ${tokens.sbom}` },
        };
      },
      expected: (status) =>
        ok('build.sbom.upload', { ...nobody, type: 'upload_token' }, null, {
          type: 'build',
          id: ctx['build']!,
        })(status),
    },
    {
      name: 'PUT /api/v1/builds/:id/scan (no upload token: refused)',
      call: () => ({
        method: 'PUT',
        path: `/api/v1/builds/${ctx['build']}/scan`,
        body: {},
        headers: {},
      }),
      expected: (status) => ({
        action: 'build.scan.upload',
        actor: { ...nobody, type: 'upload_token' },
        tenant_id: null,
        target: { type: 'build', id: ctx['build']! },
        result: 'refused',
        status,
      }),
    },
    {
      name: 'POST /api/v1/builds/:id/cancel',
      call: () => ({
        method: 'POST',
        path: `/api/v1/builds/${ctx['build']}/cancel`,
        headers: as('developer'),
      }),
      expected: (status) =>
        ok('build.cancel', userActor(seeded.users.developer), seeded.tenantA, {
          type: 'build',
          id: ctx['build']!,
        })(status),
    },
    {
      name: 'POST /api/v1/builds/:id/retry (with an API token)',
      call: async () => {
        const failed = await startedBuild('audit-2');
        await runner.fail(failed);
        ctx['failed'] = failed;
        return {
          method: 'POST',
          path: `/api/v1/builds/${failed}/retry`,
          headers: { authorization: `Bearer ${bearer['developerToken']}` },
        };
      },
      expected: (status) =>
        ok(
          'build.retry',
          {
            type: 'api_token',
            user_id: seeded.users.developer.id,
            email: seeded.users.developer.email,
            api_token_id: ctx['developerTokenId'],
          },
          seeded.tenantA,
          { type: 'build', id: ctx['failed']! },
        )(status),
    },
    {
      name: 'PUT /api/v1/builds/:id/keep',
      call: () => ({
        method: 'PUT',
        path: `/api/v1/builds/${ctx['build']}/keep`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('build.keep', admin(), seeded.tenantA, { type: 'build', id: ctx['build']! })(status),
    },
    {
      name: 'DELETE /api/v1/builds/:id/keep',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/builds/${ctx['build']}/keep`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('build.unkeep', admin(), seeded.tenantA, { type: 'build', id: ctx['build']! })(status),
    },
    {
      name: 'DELETE /api/v1/builds/:id',
      call: async () => {
        const done = await startedBuild('audit-3');
        await runner.succeed(done);
        ctx['done'] = done;
        return { method: 'DELETE', path: `/api/v1/builds/${done}`, headers: as('admin') };
      },
      expected: (status) =>
        ok('build.delete', admin(), seeded.tenantA, { type: 'build', id: ctx['done']! })(status),
    },
    {
      name: 'POST /api/v1/projects',
      call: () => ({
        method: 'POST',
        path: '/api/v1/projects',
        body: { name: 'audited' },
        headers: as('admin'),
      }),
      expected: (status, body) =>
        ok('project.create', admin(), seeded.tenantA, { type: 'project', id: body.id })(status),
      after: (body) => (ctx['project'] = body.id),
    },
    {
      name: 'PATCH /api/v1/projects/:id',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/projects/${ctx['project']}`,
        body: { name: 'audited-2' },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('project.update', admin(), seeded.tenantA, { type: 'project', id: ctx['project']! })(
          status,
        ),
    },
    {
      name: 'PUT /api/v1/projects/:id/git-credentials',
      call: () => ({
        method: 'PUT',
        path: `/api/v1/projects/${ctx['project']}/git-credentials`,
        body: { username: 'ci', password: SECRETS.gitPassword },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('project.git_credentials.set', admin(), seeded.tenantA, {
          type: 'project',
          id: ctx['project']!,
        })(status),
    },
    {
      name: 'DELETE /api/v1/projects/:id/git-credentials',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/projects/${ctx['project']}/git-credentials`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('project.git_credentials.delete', admin(), seeded.tenantA, {
          type: 'project',
          id: ctx['project']!,
        })(status),
    },
    {
      name: 'POST /api/v1/projects/:id/triggers',
      call: () => ({
        method: 'POST',
        path: `/api/v1/projects/${ctx['project']}/triggers`,
        body: { name: 'audited', provider: 'github' },
        headers: as('admin'),
      }),
      expected: (status, body) =>
        ok('trigger.create', admin(), seeded.tenantA, { type: 'trigger', id: body.id })(status),
      after: (body) => (ctx['trigger'] = body.id),
    },
    {
      name: 'PATCH /api/v1/triggers/:id',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/triggers/${ctx['trigger']}`,
        body: { branches: ['main'] },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('trigger.update', admin(), seeded.tenantA, { type: 'trigger', id: ctx['trigger']! })(
          status,
        ),
    },
    {
      name: 'POST /api/v1/triggers/:id/secret',
      call: () => ({
        method: 'POST',
        path: `/api/v1/triggers/${ctx['trigger']}/secret`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('trigger.secret.rotate', admin(), seeded.tenantA, {
          type: 'trigger',
          id: ctx['trigger']!,
        })(status),
    },
    {
      name: 'POST /api/v1/hooks/:id (a git host, unsigned: refused)',
      call: () => ({
        method: 'POST',
        path: `/api/v1/hooks/${ctx['trigger']}`,
        body: { ref: 'refs/heads/main' },
        headers: { 'x-github-event': 'push', 'x-github-delivery': 'audited-1' },
      }),
      expected: (status) => ({
        action: 'trigger.delivery',
        actor: nobody,
        tenant_id: null,
        target: { type: 'trigger', id: ctx['trigger']! },
        result: 'refused',
        status,
      }),
    },
    {
      name: 'DELETE /api/v1/triggers/:id',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/triggers/${ctx['trigger']}`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('trigger.delete', admin(), seeded.tenantA, { type: 'trigger', id: ctx['trigger']! })(
          status,
        ),
    },
    {
      name: 'DELETE /api/v1/projects/:id',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/projects/${ctx['project']}`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('project.delete', admin(), seeded.tenantA, { type: 'project', id: ctx['project']! })(
          status,
        ),
    },
    {
      name: 'POST /api/v1/members',
      call: () => ({
        method: 'POST',
        path: '/api/v1/members',
        body: { email: seeded.users.viewer.email, role: 'viewer' },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('member.set', admin(), seeded.tenantA, { type: 'user', id: seeded.users.viewer.id })(
          status,
        ),
    },
    {
      name: 'DELETE /api/v1/members/:userId',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/members/${leaver.id}`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('member.remove', admin(), seeded.tenantA, { type: 'user', id: leaver.id })(status),
    },
    {
      name: 'POST /api/v1/tokens',
      call: () => ({
        method: 'POST',
        path: '/api/v1/tokens',
        body: { name: 'audited', permissions: ['build:list'] },
        headers: as('admin'),
      }),
      expected: (status, body) =>
        ok('token.create', admin(), seeded.tenantA, { type: 'api_token', id: body.id })(status),
      after: (body) => {
        ctx['token'] = body.id;
        credentials.push(body.token);
      },
    },
    {
      name: 'DELETE /api/v1/tokens/:id',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/tokens/${ctx['token']}`,
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('token.revoke', admin(), seeded.tenantA, { type: 'api_token', id: ctx['token']! })(
          status,
        ),
    },
    {
      name: 'PUT /api/v1/settings/secret-managers/:type',
      call: () => ({
        method: 'PUT',
        path: '/api/v1/settings/secret-managers/vault',
        body: {
          address: 'https://vault.example.com:8200',
          auth: { method: 'kubernetes', role: 'kiln' },
        },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('settings.secret_manager.set', admin(), seeded.tenantA, {
          type: 'secret_manager',
          id: 'vault',
        })(status),
    },
    {
      name: 'DELETE /api/v1/settings/secret-managers/:type',
      call: () => ({
        method: 'DELETE',
        path: '/api/v1/settings/secret-managers/vault',
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('settings.secret_manager.delete', admin(), seeded.tenantA, {
          type: 'secret_manager',
          id: 'vault',
        })(status),
    },
    {
      name: 'PUT /api/v1/settings/provenance',
      call: () => ({
        method: 'PUT',
        path: '/api/v1/settings/provenance',
        body: { provenance: 'required' },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('settings.provenance.set', admin(), seeded.tenantA, {
          type: 'provenance_settings',
          id: null,
        })(status),
    },
    {
      name: 'POST /api/v1/signing-keys/rotate',
      call: () => ({
        method: 'POST',
        path: '/api/v1/signing-keys/rotate',
        headers: as('admin'),
      }),
      expected: (status, body) =>
        ok('signing_key.rotate', admin(), seeded.tenantA, {
          type: 'signing_key',
          id: body.key_id,
        })(status),
    },
    {
      name: 'PUT /api/v1/settings/registries/:type',
      call: () => ({
        method: 'PUT',
        path: '/api/v1/settings/registries/harbor',
        body: {
          address: 'harbor.example.com',
          username: 'robot$ci',
          password: SECRETS.registryPassword,
        },
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('settings.registry.set', admin(), seeded.tenantA, { type: 'registry', id: 'harbor' })(
          status,
        ),
    },
    {
      name: 'DELETE /api/v1/settings/registries/:type',
      call: () => ({
        method: 'DELETE',
        path: '/api/v1/settings/registries/harbor',
        headers: as('admin'),
      }),
      expected: (status) =>
        ok('settings.registry.delete', admin(), seeded.tenantA, {
          type: 'registry',
          id: 'harbor',
        })(status),
    },
    {
      name: 'POST /api/v1/tenants',
      call: () => ({
        method: 'POST',
        path: '/api/v1/tenants',
        body: { name: 'audited-tenant' },
        headers: as('root', undefined),
      }),
      expected: (status, body) =>
        ok('tenant.create', rootActor(), body.id, { type: 'tenant', id: body.id })(status),
      after: (body) => (ctx['tenant'] = body.id),
    },
    {
      name: 'PATCH /api/v1/tenants/:id',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/tenants/${ctx['tenant']}`,
        body: { name: 'audited-tenant-2' },
        headers: as('root', undefined),
      }),
      expected: (status) =>
        ok('tenant.update', rootActor(), ctx['tenant']!, { type: 'tenant', id: ctx['tenant']! })(
          status,
        ),
    },
    {
      name: 'PATCH /api/v1/tenants/:id/admission',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/tenants/${ctx['tenant']}/admission`,
        body: { weight: 2 },
        headers: as('root', undefined),
      }),
      expected: (status) =>
        ok('tenant.admission.update', rootActor(), ctx['tenant']!, {
          type: 'tenant',
          id: ctx['tenant']!,
        })(status),
    },
    {
      name: 'PATCH /api/v1/tenants/:id/retention',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/tenants/${ctx['tenant']}/retention`,
        body: { days: 30 },
        headers: as('root', undefined),
      }),
      expected: (status) =>
        ok('tenant.retention.update', rootActor(), ctx['tenant']!, {
          type: 'tenant',
          id: ctx['tenant']!,
        })(status),
    },
    {
      name: 'DELETE /api/v1/tenants/:id',
      call: () => ({
        method: 'DELETE',
        path: `/api/v1/tenants/${ctx['tenant']}`,
        headers: as('root', undefined),
      }),
      expected: (status) =>
        ok('tenant.delete', rootActor(), ctx['tenant']!, { type: 'tenant', id: ctx['tenant']! })(
          status,
        ),
    },
    {
      name: 'POST /api/v1/users',
      call: () => ({
        method: 'POST',
        path: '/api/v1/users',
        body: { email: 'audited@example.com', password: SECRETS.newUserPassword },
        headers: as('root', undefined),
      }),
      expected: (status, body) =>
        ok('user.create', rootActor(), null, { type: 'user', id: body.id })(status),
      after: (body) => (ctx['user'] = body.id),
    },
    {
      name: 'PATCH /api/v1/users/:id',
      call: () => ({
        method: 'PATCH',
        path: `/api/v1/users/${ctx['user']}`,
        body: { disabled: true },
        headers: as('root', undefined),
      }),
      expected: (status) =>
        ok('user.update', rootActor(), null, { type: 'user', id: ctx['user']! })(status),
    },
  ];

  async function startedBuild(branch: string): Promise<string> {
    const created = await send({
      method: 'POST',
      path: '/api/v1/builds',
      body: { project_id: seeded.projectA, git_branch: branch },
      headers: as('admin'),
    });
    const started = await send({
      method: 'POST',
      path: `/api/v1/builds/${created.body.id}/start`,
      headers: as('admin'),
    });
    if (started.status !== 200) throw new Error(`start gave ${started.status}`);
    return created.body.id as string;
  }

  /** Sends a call; expects exactly one new row and one new audit line, both for this call. */
  async function expectOneEvent(call: Call, expected: (status: number, body: any) => Expected) {
    const rowsBefore = (await rows()).length;
    const linesBefore = auditLines().length;

    const reply = await send(call);

    const expectedEvent = expected(reply.status, reply.body);
    const newRows = (await rows()).slice(rowsBefore);
    const newLines = auditLines().slice(linesBefore);
    expect(newRows).toHaveLength(1);
    expect(newLines).toHaveLength(1);
    const row = newRows[0];
    expect({
      action: row.action,
      actor: {
        type: row.actor_type,
        user_id: row.actor_user_id,
        email: row.actor_email,
        api_token_id: row.actor_token_id,
      },
      tenant_id: row.tenant_id,
      target: row.target_type === null ? null : { type: row.target_type, id: row.target_id },
      result: row.result,
      status: row.status,
    }).toEqual(expectedEvent);
    expect(row).toMatchObject({
      request_id: reply.requestId,
      source_address: expect.stringMatching(/127\.0\.0\.1$/),
      user_agent: 'audit-spec/1.0',
    });
    expect(newLines[0]).toMatchObject({
      log: 'audit',
      level: 'info',
      id: row.id,
      occurred_at: row.occurred_at.toISOString(),
      ...expectedEvent,
      request_id: reply.requestId,
      source_address: row.source_address,
      user_agent: 'audit-spec/1.0',
    });
    return reply;
  }

  it('names one action for every state-changing route of the inventory, and no action twice', () => {
    const stateChanging = listRoutes(kiln.app)
      .filter((route) => STATE_CHANGING.has(route.method))
      .filter((route) => !route.path.startsWith('/api/v1/audit-probe'));
    const actions = Object.values(AUDIT_ROUTES).map((route) => route.action);

    expect(stateChanging.map((route) => `${route.method} ${route.path}`).sort()).toEqual(
      Object.keys(AUDIT_ROUTES).sort(),
    );
    expect(new Set(actions).size).toBe(actions.length);
    // A route over no tenant records no X-Tenant-ID: exactly the public, user and system routes
    // (but the build pod's uploads, whose caller is no user).
    for (const route of stateChanging) {
      const audit = AUDIT_ROUTES[`${route.method} ${route.path}`]!;
      const tenantless =
        route.public ||
        isUserPermission(route.permission!) ||
        isSystemPermission(route.permission!);
      expect({ route: route.path, tenantless }).toEqual({
        route: route.path,
        tenantless: audit.installation === true || audit.buildPod === true,
      });
    }
  });

  it('matches a path to its route, a literal segment before a parameter', () => {
    const matcher = new AuditRouteMatcher();
    const id = randomUUID();

    expect(matcher.match('PATCH', `/api/v1/tenants/${id}/admission`)).toMatchObject({
      route: 'PATCH /api/v1/tenants/:id/admission',
      params: { id },
    });
    expect(matcher.match('PATCH', `/api/v1/tenants/${id}`)?.route).toBe(
      'PATCH /api/v1/tenants/:id',
    );
    expect(matcher.match('POST', '/api/v1/builds/')?.route).toBe('POST /api/v1/builds');
    expect(matcher.match('GET', '/api/v1/builds')).toBeUndefined();
    expect(matcher.match('POST', '/api/v1/nothing-here')).toBeUndefined();
  });

  it('has a step below for every state-changing route', () => {
    const covered = STEPS.map((step) => step.name.split(' (')[0]);

    expect([...new Set(covered)].sort()).toEqual(Object.keys(AUDIT_ROUTES).sort());
  });

  describe('each state-changing call writes one row and one audit line', () => {
    it.each(STEPS.map((step) => [step.name, step] as const))('%s', async (_name, step) => {
      const reply = await expectOneEvent(await step.call(), step.expected);

      step.after?.(reply.body);
    });
  });

  describe('a refused or failed call writes one of each too', () => {
    it('a call without a token: 401, anonymous, no tenant', async () => {
      const reply = await expectOneEvent(
        {
          method: 'POST',
          path: '/api/v1/builds',
          body: { project_id: seeded.projectA, git_branch: 'anon' },
          headers: { 'x-tenant-id': seeded.tenantA },
        },
        (status) => ({
          action: 'build.create',
          actor: nobody,
          tenant_id: null,
          target: { type: 'build', id: null },
          result: 'refused',
          status,
        }),
      );

      expect(reply.status).toBe(401);
    });

    it('a developer on an admin route: 403, the developer, the tenant it named', async () => {
      const reply = await expectOneEvent(
        {
          method: 'POST',
          path: '/api/v1/projects',
          body: { name: 'nope' },
          headers: as('developer'),
        },
        (status) => ({
          action: 'project.create',
          actor: userActor(seeded.users.developer),
          tenant_id: seeded.tenantA,
          target: { type: 'project', id: null },
          result: 'refused',
          status,
        }),
      );

      expect(reply.status).toBe(403);
    });

    it('a failed login: 401, anonymous, with the e-mail tried and never the password', async () => {
      const reply = await expectOneEvent(
        {
          method: 'POST',
          path: '/api/v1/auth/login',
          body: { email: 'admin@example.com', password: 'not the password at all' },
          headers: {},
        },
        (status) => ({
          action: 'auth.login',
          actor: { ...nobody, email: 'admin@example.com' },
          tenant_id: null,
          target: null,
          result: 'refused',
          status,
        }),
      );

      expect(reply.status).toBe(401);
      expect(JSON.stringify(await rows())).not.toContain('not the password at all');
    });

    it('a login whose e-mail field holds no e-mail keeps no e-mail', async () => {
      const reply = await expectOneEvent(
        {
          method: 'POST',
          path: '/api/v1/auth/login',
          body: { email: 'my secret password', password: 'x' },
          headers: {},
        },
        (status) => ({
          action: 'auth.login',
          actor: nobody,
          tenant_id: null,
          target: null,
          result: 'refused',
          status,
        }),
      );

      expect(reply.status).toBe(400);
    });

    it('a fault: 500, failed; a route missing from the table is recorded as unlisted', async () => {
      const reply = await expectOneEvent(
        { method: 'POST', path: '/api/v1/audit-probe', headers: {} },
        (status) => ({
          action: 'unlisted',
          actor: nobody,
          tenant_id: null,
          target: { type: 'route', id: 'POST /api/v1/audit-probe' },
          result: 'failed',
          status,
        }),
      );

      expect(reply.status).toBe(500);
    });

    it('records no read and no unknown path', async () => {
      const before = (await rows()).length;
      const linesBefore = auditLines().length;

      await send({ method: 'GET', path: '/api/v1/builds', headers: as('admin') });
      await send({ method: 'POST', path: '/api/v1/no-such-route', headers: as('admin') });

      expect((await rows()).length).toBe(before);
      expect(auditLines().length).toBe(linesBefore);
    });
  });

  it('counts every event in kiln_audit_events_total by result', async () => {
    const counted = await kiln.dataSource.query<Array<{ result: string; n: number }>>(
      'SELECT result, count(*)::int AS n FROM audit_events GROUP BY result',
    );
    const metrics = await scrape(`${kiln.baseUrl}/metrics`);

    for (const { result, n } of counted) {
      expect({ result, n: sumOf(metrics, 'kiln_audit_events_total', { result }) }).toEqual({
        result,
        n,
      });
    }
  });

  it('never records a password, a token, a secret value or an Authorization header', async () => {
    const everything = [
      ...kiln.logs.raw.filter((line) => line.includes('"log":"audit"')),
      JSON.stringify(await rows()),
    ].join('\n');
    const forbidden = [
      PASSWORD,
      ...Object.values(SECRETS),
      ...credentials,
      // The variable part of each token alone, should a prefix have been cut off.
      ...credentials.map((token) => token.slice(-24)),
      TEST_JWT_SECRET,
      'Bearer ',
      'robot$ci',
    ];

    expect(credentials.length).toBeGreaterThan(8);
    for (const value of forbidden) {
      expect({ value, found: everything.includes(value) }).toEqual({ value, found: false });
    }
  });

  it('keeps the call and says so loudly when the row cannot be stored; the line still goes', async () => {
    await kiln.dataSource.query('ALTER TABLE audit_events RENAME TO audit_events_away');
    const linesBefore = auditLines().length;
    let reply: Awaited<ReturnType<typeof send>>;
    try {
      reply = await send({
        method: 'POST',
        path: '/api/v1/builds',
        body: { project_id: seeded.projectA, git_branch: 'no-table' },
        headers: as('admin'),
      });
    } finally {
      await kiln.dataSource.query('ALTER TABLE audit_events_away RENAME TO audit_events');
    }

    expect(reply.status).toBe(201);
    const [line] = auditLines().slice(linesBefore);
    expect(line).toMatchObject({ action: 'build.create', request_id: reply.requestId });
    expect(
      kiln.logs.find(
        (l) =>
          l['level'] === 'error' &&
          l['audit_event_id'] === line!['id'] &&
          String(l['msg']).includes('could not be stored'),
      ),
    ).toBeDefined();
    expect(await rows('request_id = $1', [reply.requestId])).toEqual([]);
  });

  describe('reading', () => {
    const list = (who: string, query = '', tenant?: string, path = '/api/v1/audit') =>
      send({ method: 'GET', path: `${path}${query}`, headers: as(who, tenant) });

    it("shows a tenant admin its tenant's events only, newest first", async () => {
      const reply = await list('admin', '?limit=100');
      const inTenant = await rows('tenant_id = $1', [seeded.tenantA]);

      expect(reply.status).toBe(200);
      expect(reply.body.total).toBe(inTenant.length);
      expect(reply.body.events.map((e: any) => e.id)).toEqual(
        inTenant
          .reverse()
          .slice(0, 100)
          .map((r) => r.id),
      );
      expect(new Set(reply.body.events.map((e: any) => e.tenant_id))).toEqual(
        new Set([seeded.tenantA]),
      );
    });

    it("shows tenant B's admin none of tenant A's", async () => {
      const reply = await list('adminB', '?limit=100', seeded.tenantB);

      expect(reply.status).toBe(200);
      expect(reply.body.events.every((e: any) => e.tenant_id === seeded.tenantB)).toBe(true);
      expect(reply.body.total).toBe((await rows('tenant_id = $1', [seeded.tenantB])).length);
    });

    it('refuses a developer (403) and a tenant admin the installation route (403)', async () => {
      expect((await list('developer')).status).toBe(403);
      expect((await list('admin', '', undefined, '/api/v1/audit/installation')).status).toBe(403);
    });

    it('shows an installation administrator every tenant, one tenant, or none', async () => {
      const every = await list('root', '?limit=1', undefined, '/api/v1/audit/installation');
      const onlyA = await list(
        'root',
        `?limit=100&tenant_id=${seeded.tenantA}`,
        undefined,
        '/api/v1/audit/installation',
      );
      const none = await list(
        'root',
        '?limit=100&tenant_id=none',
        undefined,
        '/api/v1/audit/installation',
      );

      expect(every.body.total).toBe((await rows()).length);
      expect(onlyA.body.total).toBe((await rows('tenant_id = $1', [seeded.tenantA])).length);
      expect(none.body.total).toBe((await rows('tenant_id IS NULL')).length);
      expect(none.body.events.map((e: any) => e.action)).toEqual(
        expect.arrayContaining(['auth.login', 'user.create', 'user.update']),
      );
    });

    it('filters by action, actor, target, result and time', async () => {
      const build = ctx['build']!;
      const byTarget = await list('admin', `?target_id=${build}`);
      const byAction = await list('admin', '?action=build.cancel');
      const byActor = await list('admin', `?actor=${seeded.users.developer.id}&limit=100`);
      const refused = await list('admin', '?result=refused&limit=100');
      const all = (await rows('tenant_id = $1', [seeded.tenantA])).map((r) => r.occurred_at);
      const middle = all[Math.floor(all.length / 2)]!;
      const since = await list('admin', `?since=${middle.toISOString()}&limit=100`);
      const until = await list('admin', `?until=${middle.toISOString()}&limit=100`);

      // The uploads named the build too, but in no tenant (their caller is the build pod).
      expect(byTarget.body.events.map((e: any) => e.action).sort()).toEqual([
        'build.cancel',
        'build.create',
        'build.keep',
        'build.start',
        'build.unkeep',
      ]);
      expect(byAction.body.events).toHaveLength(1);
      expect(byAction.body.events[0].actor.user_id).toBe(seeded.users.developer.id);
      expect(byActor.body.events.length).toBeGreaterThan(1);
      expect(
        byActor.body.events.every((e: any) => e.actor.user_id === seeded.users.developer.id),
      ).toBe(true);
      expect(refused.body.events.map((e: any) => e.status)).toEqual([403]);
      expect(since.body.total + until.body.total).toBe(all.length);
      expect(since.body.events.every((e: any) => new Date(e.occurred_at) >= middle)).toBe(true);
      expect((await list('admin', '?result=maybe')).status).toBe(400);
      expect((await list('admin', '?since=yesterday')).status).toBe(400);
    });

    it('pages: pages of `limit` that do not overlap and together make the whole list', async () => {
      const whole = await list('admin', '?limit=100');
      const pages: string[] = [];
      for (let page = 1; page <= Math.ceil(whole.body.total / 3); page++) {
        const reply = await list('admin', `?limit=3&page=${page}`);
        expect(reply.body).toMatchObject({ page, limit: 3, total: whole.body.total });
        pages.push(...reply.body.events.map((e: any) => e.id));
      }

      expect(pages).toEqual(whole.body.events.map((e: any) => e.id));
    });
  });

  describe('retention', () => {
    const DAY = 86_400_000;

    async function plant(count: number, daysAgo: number, now: Date): Promise<void> {
      const log = kiln.app.get(AuditEventsRepository);
      for (let i = 0; i < count; i++) {
        await log.insert({
          id: randomUUID(),
          occurredAt: new Date(now.getTime() - daysAgo * DAY - i * 1000),
          actor: { type: 'kiln-admin', userId: null, email: null, apiTokenId: null },
          tenantId: null,
          action: 'retention.probe',
          target: null,
          result: 'success',
          status: null,
          requestId: null,
          sourceAddress: null,
          userAgent: `${daysAgo}`,
        });
      }
    }

    const probes = async () =>
      (await rows("action = 'retention.probe'")).map((r) => Number(r.user_agent));

    it('deletes exactly the events past KILN_AUDIT_RETENTION_DAYS (365), in batches, and logs it', async () => {
      const now = new Date();
      await plant(25, 400, now);
      await plant(3, 364, now);
      const before = (await rows()).length;

      const outcome = await kiln.app.get(AuditRetention).runOnce(now, 10);

      expect(outcome).toEqual({ deleted: 25, batches: 3 });
      expect(await probes()).toEqual([364, 364, 364]);
      expect((await rows()).length).toBe(before - 25);
      expect(
        kiln.logs.find((l) => l['msg'] === 'audit retention: deleted audit events past the policy'),
      ).toMatchObject({ deleted: 25, batches: 3, days: 365 });
    });

    it('leaves the run to the replica that holds it: a second one deletes nothing meanwhile', async () => {
      const now = new Date();
      await plant(4, 500, now);
      const other = kiln.dataSource.createQueryRunner();
      await other.connect();
      try {
        await other.query("SELECT pg_advisory_lock(hashtext('kiln_audit_retention'))");

        expect(await kiln.app.get(AuditRetention).runOnce(now, 10)).toBeUndefined();
        expect((await probes()).filter((days) => days === 500)).toHaveLength(4);
      } finally {
        await other.query("SELECT pg_advisory_unlock(hashtext('kiln_audit_retention'))");
        await other.release();
      }

      expect(await kiln.app.get(AuditRetention).runOnce(now, 10)).toEqual({
        deleted: 4,
        batches: 1,
      });
    });

    it('keeps every event with KILN_AUDIT_RETENTION_DAYS=0', async () => {
      const now = new Date();
      await plant(2, 5000, now);
      const config = loadConfig(
        { KILN_JWT_SECRET: TEST_JWT_SECRET, KILN_AUDIT_RETENTION_DAYS: '0' },
        '/tmp',
      );
      const retention = new AuditRetention(
        kiln.app.get(AuditEventsRepository),
        config,
        kiln.logs.logger,
      );

      expect(await retention.runOnce(now, 10)).toBeUndefined();
      expect((await probes()).filter((days) => days === 5000)).toHaveLength(2);
    });
  });

  describe('calls refused before routing (the rate limit, the body limit)', () => {
    let small: TestApp;
    let tenantA: string;
    let adminOf: { id: string; email: string };
    let adminToken: string;

    beforeAll(async () => {
      small = await startTestApp({
        env: {
          KILN_RATE_LIMIT_WRITES: '1',
          KILN_RATE_LIMIT_WINDOW_SECONDS: '3600',
          KILN_MAX_BODY_BYTES: '1024',
        },
      });
      const seededSmall = await seedTenancy(small);
      tenantA = seededSmall.tenantA;
      adminOf = seededSmall.users.admin;
      // Signed in without POST /auth/login, which would spend the one write of the window.
      adminToken = (await small.app.get(TokenService).issue(adminOf.id)).access_token;
    });

    afterAll(async () => {
      await small.close();
    });

    const post = (body: string, requestId: string) =>
      fetch(`${small.baseUrl}/api/v1/projects`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${adminToken}`,
          'x-tenant-id': tenantA,
          'content-type': 'application/json',
          'x-request-id': requestId,
        },
        body,
      });
    const eventOf = async (requestId: string) =>
      small.dataSource.query(
        `SELECT actor_type, actor_user_id, tenant_id, action, result, status
           FROM audit_events WHERE request_id = $1`,
        [requestId],
      );

    it('records a 429 of the rate limit with the caller it verified', async () => {
      const first = await post(JSON.stringify({ name: 'first' }), 'rate-1');
      const second = await post(JSON.stringify({ name: 'second' }), 'rate-2');

      expect([first.status, second.status]).toEqual([201, 429]);
      expect(await eventOf('rate-2')).toEqual([
        {
          actor_type: 'user',
          actor_user_id: adminOf.id,
          tenant_id: tenantA,
          action: 'project.create',
          result: 'refused',
          status: 429,
        },
      ]);
      expect(
        small.logs.lines.filter((l) => l['log'] === 'audit' && l['request_id'] === 'rate-2'),
      ).toHaveLength(1);
    });

    it('records a 413 of the body limit, before any caller was verified', async () => {
      const reply = await post(JSON.stringify({ name: 'x'.repeat(2000) }), 'too-large');

      expect(reply.status).toBe(413);
      expect(await eventOf('too-large')).toEqual([
        {
          actor_type: 'anonymous',
          actor_user_id: null,
          tenant_id: null,
          action: 'project.create',
          result: 'refused',
          status: 413,
        },
      ]);
    });
  });

  it('writes the audit line whatever the log level, and only the line at info on its own logger', async () => {
    const quiet = new LogCapture('warn');
    const audit = new AuditLog(kiln.app.get(AuditEventsRepository), quiet.logger);

    const event = await audit.record({
      actor: { type: 'kiln-admin', userId: null, email: null, apiTokenId: null },
      tenantId: null,
      action: 'level.probe',
      target: null,
      result: 'success',
      status: null,
      requestId: null,
      sourceAddress: null,
      userAgent: null,
    });
    quiet.logger.info('an ordinary info line');

    expect(quiet.lines).toEqual([
      expect.objectContaining({ log: 'audit', level: 'info', id: event.id, action: 'level.probe' }),
    ]);
    expect(await rows('id = $1', [event.id])).toHaveLength(1);
  });
});
