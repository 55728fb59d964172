import fc from 'fast-check';
import { craftToken, type Seeded, seedTenancy, tokenFor, validClaims } from './support/auth.js';
import { startTestApp, type TestApp } from './support/test-app.js';

const printable = fc.string({ unit: 'grapheme-ascii', maxLength: 200 });

describe('a protected route under arbitrary credentials (property)', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let realToken: string;

  beforeAll(async () => {
    kiln = await startTestApp();
    seeded = await seedTenancy(kiln);
    realToken = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
  });

  afterAll(async () => {
    await kiln.close();
  });

  it('answers 400, 401 or 403 with the Error body, never 2xx or 5xx', async () => {
    const claims = fc.record(
      {
        sub: fc.oneof(fc.uuid(), printable, fc.integer()),
        iss: fc.oneof(fc.constant('kiln'), printable),
        aud: fc.oneof(fc.constant('kiln-api'), printable, fc.array(printable)),
        exp: fc.oneof(fc.integer(), fc.double(), printable),
        iat: fc.integer(),
        nbf: fc.integer(),
      },
      { requiredKeys: [] },
    );
    const authorization = fc.oneof(
      fc.constant(undefined),
      printable,
      printable.map((s) => `Bearer ${s}`),
      // A real token: only the tenant header can then be wrong.
      fc.constant(`Bearer ${realToken}`),
      // Well-signed tokens with arbitrary claims, or a good subject that is not a member.
      claims.map((c) => `Bearer ${craftToken(c)}`),
      fc.uuid().map((id) => `Bearer ${craftToken(validClaims(id))}`),
      fc
        .tuple(claims, fc.constantFrom('none', 'HS384', 'RS256', 'ES256'))
        .map(([c, alg]) => `Bearer ${craftToken(c, { alg })}`),
      fc
        .tuple(claims, printable)
        .map(
          ([c, kid]) =>
            `Bearer ${craftToken(c, { header: { kid, jku: 'http://127.0.0.1:1/keys' } })}`,
        ),
    );
    const tenant = fc.oneof(
      fc.constant(undefined),
      printable,
      fc.uuid(),
      fc.constant('00000000-0000-0000-0000-000000000000'),
      fc.constant(seeded.tenantB),
    );

    await fc.assert(
      fc.asyncProperty(authorization, tenant, async (auth, tenantId) => {
        const headers: Record<string, string> = {};
        if (auth !== undefined) headers['authorization'] = auth;
        if (tenantId !== undefined) headers['x-tenant-id'] = tenantId;
        const response = await fetch(`${kiln.baseUrl}/api/v1/projects`, { headers });
        const body = (await response.json()) as Record<string, unknown>;

        expect([400, 401, 403]).toContain(response.status);
        expect(body).toMatchObject({
          error: expect.any(String),
          code: expect.stringMatching(/^(INVALID_REQUEST|UNAUTHORIZED|FORBIDDEN)$/),
          timestamp: expect.any(String),
        });
      }),
      { numRuns: 400 },
    );
  });
});
