import { TenancyService } from '../src/auth/tenancy.service.js';
import { TokenService } from '../src/auth/token.service.js';
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
import { jsonOf } from './support/http.js';
import { LogStreamClient, refusal } from './support/log-stream-client.js';
import { startTestApp, type TestApp } from './support/test-app.js';

describe('access token headers and subjects (RFC 8725; AUTHN-03/04)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let buildId: string;

  beforeAll(async () => {
    kiln = await startTestApp({ runner: FakeRunner, env: { KILN_WS_POLL_SECONDS: '120' } });
    seeded = await seedTenancy(kiln);
    const admin = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      seeded.tenantA,
    );
    // A queued build: its stream stays open until the client closes it.
    buildId = (await admin.createBuild(seeded.projectA, 'jwt-headers')).id as string;
  });

  afterAll(async () => {
    await kiln.close();
  });

  const headersOf = (token: string) => ({
    authorization: `Bearer ${token}`,
    'x-tenant-id': seeded.tenantA,
  });

  function http(token: string): Promise<Response> {
    return fetch(`${kiln.baseUrl}/api/v1/projects`, { headers: headersOf(token) });
  }

  function stream(token: string): LogStreamClient {
    return new LogStreamClient(
      `${kiln.baseUrl.replace('http', 'ws')}/api/v1/builds/${buildId}/logs/stream`,
      { headers: headersOf(token) },
    );
  }

  /** The status of the upgrade: 101 when the stream opened (it is closed again at once). */
  async function upgrade(token: string): Promise<{ status: number; code?: string }> {
    const client = stream(token);
    try {
      await client.opened;
    } catch {
      const { status, body } = await refusal(client);
      return { status, code: body.code };
    }
    client.close();
    await client.closed;
    return { status: 101 };
  }

  it.each<[string, Record<string, unknown>]>([
    ['typ at+jwt (an OAuth access token type kiln does not issue)', { typ: 'at+jwt' }],
    ['typ JOSE', { typ: 'JOSE' }],
    ['typ application/jose+json', { typ: 'application/jose+json' }],
    ['a typ that is not a string', { typ: 1 }],
    ['kid other', { kid: 'other' }],
    ['an empty kid', { kid: '' }],
    ['a jku pointing outward', { jku: 'http://127.0.0.1:1/keys.json' }],
    ['an x5u pointing outward', { x5u: 'http://127.0.0.1:1/cert.pem' }],
    ['an embedded jwk', { jwk: { kty: 'oct', k: 'c2VjcmV0' } }],
    ['a crit extension kiln does not understand', { crit: ['exp'] }],
  ])(
    'refuses a token signed with kiln’s key but with %s: 401 over HTTP and on the upgrade',
    async (_name, header) => {
      const token = craftToken(validClaims(seeded.users.admin.id), { header });

      const response = await http(token);

      expect(response.status).toBe(401);
      expect(await jsonOf(response)).toMatchObject({ code: 'UNAUTHORIZED' });
      expect(await upgrade(token)).toEqual({ status: 401, code: 'UNAUTHORIZED' });
    },
  );

  it.each<[string, Record<string, unknown>]>([
    ['typ JWT', { typ: 'JWT' }],
    ['typ jwt (media types are case-insensitive)', { typ: 'jwt' }],
    ['typ application/jwt (the same media type, RFC 7515 4.1.9)', { typ: 'application/jwt' }],
    ['no typ', { typ: undefined }],
  ])('accepts a token with %s over HTTP and on the upgrade', async (_name, header) => {
    const token = craftToken(validClaims(seeded.users.admin.id), { header });

    expect((await http(token)).status).toBe(200);
    expect(await upgrade(token)).toEqual({ status: 101 });
  });

  describe('a token whose user is gone', () => {
    let serial = 0;

    async function memberToken(): Promise<{ id: string; token: string }> {
      const tenancy = kiln.app.get(TenancyService);
      const user = await tenancy.createUser(`jwt-headers-${serial++}@example.com`, PASSWORD);
      await tenancy.addMember(seeded.tenantA, user.email, 'admin');
      const { access_token } = await kiln.app.get(TokenService).issue(user.id);
      return { id: user.id, token: access_token };
    }

    /**
     * The answer to `token` once it is no longer 200. The statements below are written as the CLI
     * or psql would, so each replica learns of them from Postgres's notification, a moment after
     * the commit (docs/adr/0025-hot-path-round-trips.md).
     */
    async function onceRefused(
      token: string,
      headers: Record<string, string> = headersOf(token),
    ): Promise<Response> {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const response = await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers });
        if (response.status !== 200 || Date.now() > deadline) return response;
        await new Promise((done) => setTimeout(done, 20));
      }
    }

    it.each([
      ['deleted', 'DELETE FROM users WHERE id = $1'],
      ['disabled', 'UPDATE users SET disabled = true WHERE id = $1'],
    ])(
      'answers the token of a %s user with 401 over HTTP and on the upgrade (not 403)',
      async (_state, statement) => {
        const { id, token } = await memberToken();
        expect((await http(token)).status).toBe(200);

        await kiln.dataSource.query(statement, [id]);
        const response = await onceRefused(token);

        expect(response.status).toBe(401);
        expect(await jsonOf(response)).toMatchObject({ code: 'UNAUTHORIZED' });
        expect(await upgrade(token)).toEqual({ status: 401, code: 'UNAUTHORIZED' });
      },
    );

    it('answers 401 for a deleted user even when X-Tenant-ID is missing', async () => {
      const { id, token } = await memberToken();
      await kiln.dataSource.query('DELETE FROM users WHERE id = $1', [id]);

      const response = await onceRefused(token, { authorization: `Bearer ${token}` });

      expect(response.status).toBe(401);
    });
  });
});
