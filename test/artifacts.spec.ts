import { gzipSync } from 'node:zlib';
import { DataSource } from 'typeorm';
import { BuildArtifacts } from '../src/artifacts/build-artifacts.js';
import { BuildRunner } from '../src/runners/build-runner.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient, wizardManifest } from './support/builds.js';
import { SPDX } from './support/artifact-documents.js';
import { FakeRunner } from './support/fake-runner.js';
import { jsonOf } from './support/http.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The cap of these tests (KILN_ARTIFACT_MAX_BYTES), small enough to cross with a real document. */
const CAP = 64 * 1024;

/** trivy `image --format json`: one result with two vulnerabilities (one fixed, one not). */
const TRIVY_REPORT = {
  SchemaVersion: 2,
  ArtifactName: 'registry.example.com/team/app@sha256:' + 'a'.repeat(64),
  ArtifactType: 'container_image',
  Results: [
    {
      Target: 'registry.example.com/team/app (alpine 3.19.1)',
      Class: 'os-pkgs',
      Type: 'alpine',
      Vulnerabilities: [
        {
          VulnerabilityID: 'CVE-2024-0727',
          PkgName: 'openssl',
          InstalledVersion: '3.0.13-r0',
          FixedVersion: '3.0.13-r1',
          Severity: 'MEDIUM',
        },
        {
          VulnerabilityID: 'CVE-2024-2511',
          PkgName: 'openssl',
          InstalledVersion: '3.0.13-r0',
          Severity: 'HIGH',
        },
      ],
    },
  ],
};

describe('SBOM and scan results: per-build upload tokens, storage and the read routes', () => {
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let adminToken: string;
  let viewer: ApiClient;
  let otherTenant: ApiClient;
  let artifacts: BuildArtifacts;
  let runner: FakeRunner;
  let dataSource: DataSource;

  beforeAll(async () => {
    kiln = await startTestApp({
      runner: FakeRunner,
      env: { KILN_ARTIFACT_MAX_BYTES: String(CAP) },
    });
    seeded = await seedTenancy(kiln);
    adminToken = await tokenFor(kiln.baseUrl, seeded.users.admin.email);
    admin = new ApiClient(kiln, adminToken, seeded.tenantA);
    viewer = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.viewer.email),
      seeded.tenantA,
    );
    otherTenant = new ApiClient(
      kiln,
      await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
      seeded.tenantB,
    );
    artifacts = kiln.app.get(BuildArtifacts);
    runner = kiln.app.get<BuildRunner, FakeRunner>(BuildRunner);
    dataSource = kiln.app.get(DataSource);
  });

  afterAll(async () => {
    await kiln.close();
  });

  let serial = 0;
  async function runningBuild(): Promise<string> {
    const manifest = wizardManifest('kaniko');
    manifest['name'] = `artifacts ${serial}`;
    // Each build its own configuration: two equal ones would be duplicates (ADR 0030).
    manifest['environment'] = { RUN: String(serial++) };
    const response = await admin.request('POST', '/builds', {
      tenant_id: seeded.tenantA,
      project_id: seeded.projectA,
      manifest,
    });
    expect(response.status).toBe(201);
    const id = (await jsonOf(response)).data.id as string;
    expect((await admin.request('POST', `/builds/${id}/start`)).status).toBe(200);
    return id;
  }

  function upload(
    id: string,
    kind: 'sbom' | 'scan',
    body: string | Buffer,
    token: string | undefined,
  ): Promise<Response> {
    return fetch(`${kiln.baseUrl}/api/v1/builds/${id}/${kind}`, {
      method: 'PUT',
      headers: {
        'content-type': 'application/json',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: typeof body === 'string' ? body : new Uint8Array(body),
    });
  }

  async function stored(id: string): Promise<number> {
    const rows = await dataSource.query<Array<{ n: number }>>(
      'SELECT count(*)::int AS n FROM build_artifacts WHERE build_id = $1',
      [id],
    );
    return rows[0]!.n;
  }

  it('stores an SBOM uploaded with the build’s token and serves it with build:read', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;

    const put = await upload(id, 'sbom', JSON.stringify(SPDX), tokens.sbom);
    const got = await viewer.request('GET', `/builds/${id}/sbom`);

    expect(put.status).toBe(204);
    expect(got.status).toBe(200);
    expect(await jsonOf(got)).toMatchObject({
      build_id: id,
      tool: 'syft',
      format: 'spdx-json',
      truncated: false,
      document: SPDX,
      partial: null,
      note: null,
    });
    // Compressed at rest: the column holds gzip, not the document's text.
    const [row] = await dataSource.query<Array<{ content: Buffer }>>(
      "SELECT content FROM build_artifacts WHERE build_id = $1 AND kind = 'sbom'",
      [id],
    );
    expect(row!.content.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(row!.content.includes(Buffer.from('openssl'))).toBe(false);
  });

  it('normalises a trivy report into findings with a count per severity', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;

    expect((await upload(id, 'scan', JSON.stringify(TRIVY_REPORT), tokens.scan)).status).toBe(204);
    const scan = await jsonOf(await viewer.request('GET', `/builds/${id}/scan`));

    expect(scan).toMatchObject({ build_id: id, tool: 'trivy', policy: null });
    expect(scan.findings).toEqual([
      {
        id: 'CVE-2024-2511',
        package: 'openssl',
        version: '3.0.13-r0',
        fixed_version: null,
        severity: 'high',
      },
      {
        id: 'CVE-2024-0727',
        package: 'openssl',
        version: '3.0.13-r0',
        fixed_version: '3.0.13-r1',
        severity: 'medium',
      },
    ]);
    expect(scan.summary).toMatchObject({ critical: 0, high: 1, medium: 1, low: 0 });
  });

  it('answers 404 until a result is stored, and for another tenant’s build', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;

    expect((await admin.request('GET', `/builds/${id}/sbom`)).status).toBe(404);
    expect((await admin.request('GET', `/builds/${id}/scan`)).status).toBe(404);
    expect((await upload(id, 'sbom', JSON.stringify(SPDX), tokens.sbom)).status).toBe(204);
    const foreign = await otherTenant.request('GET', `/builds/${id}/sbom`);

    expect(foreign.status).toBe(404);
    expect(await jsonOf(foreign)).toMatchObject({ code: 'NOT_FOUND', error: 'Build not found' });
  });

  it.each([
    ['no token', () => undefined, 401],
    ['a token kiln never minted', () => 'kiln-upload.' + 'x'.repeat(43), 401],
    ['a user’s access token', (_t: unknown, user: string) => user, 401],
    ['the scan token for the SBOM', (t: Record<string, string>) => t.scan, 403],
    [
      'another build’s SBOM token',
      (_t: unknown, _u: string, other: Record<string, string>) => other.sbom,
      403,
    ],
  ] as const)('refuses an upload with %s and stores nothing', async (_name, pick, status) => {
    const id = await runningBuild();
    const other = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    const others = (await artifacts.mintUploadTokens(other, 600))!;
    const token = (pick as (t: unknown, u: string, o: unknown) => string | undefined)(
      tokens,
      adminToken,
      others,
    );

    const response = await upload(id, 'sbom', JSON.stringify(SPDX), token);

    expect(response.status).toBe(status);
    expect(await jsonOf(response)).toMatchObject({
      code: status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN',
    });
    expect(await stored(id)).toBe(0);
    expect(await stored(other)).toBe(0);
  });

  it('refuses an expired token (they expire at the Job deadline)', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    await dataSource.query(
      "UPDATE build_upload_tokens SET expires_at = now() - interval '1 second' WHERE build_id = $1",
      [id],
    );

    const response = await upload(id, 'sbom', JSON.stringify(SPDX), tokens.sbom);

    expect(response.status).toBe(401);
    expect(await stored(id)).toBe(0);
  });

  it('keeps tokens only as hashes', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;

    const dump = JSON.stringify(
      await dataSource.query('SELECT * FROM build_upload_tokens WHERE build_id = $1', [id]),
    );

    expect(dump).not.toContain(tokens.sbom.slice('kiln-upload.'.length, 30));
  });

  it('refuses results once the build has ended (409), keeping what it had', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    await runner.succeed(id);

    const response = await upload(id, 'sbom', JSON.stringify(SPDX), tokens.sbom);

    expect(response.status).toBe(409);
    expect(await stored(id)).toBe(0);
  });

  it.each([
    ['not JSON', '{"spdxVersion": '],
    ['JSON that is no SBOM', JSON.stringify({ hello: 'world' })],
  ])('refuses an SBOM that is %s with 400, storing nothing', async (_name, body) => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;

    const response = await upload(id, 'sbom', body, tokens.sbom);

    expect(response.status).toBe(400);
    expect(await jsonOf(response)).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(await stored(id)).toBe(0);
  });

  it('stores an SBOM over the cap truncated, with a note and a log line, without failing the build', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    const big = {
      ...SPDX,
      packages: Array.from({ length: 2000 }, (_, i) => ({
        name: `package-${i}`,
        SPDXID: `SPDXRef-Package-${i}`,
        versionInfo: '1.0.0',
        downloadLocation: 'NOASSERTION',
      })),
    };
    const text = JSON.stringify(big);
    expect(text.length).toBeGreaterThan(CAP);

    expect((await upload(id, 'sbom', text, tokens.sbom)).status).toBe(204);
    const sbom = await jsonOf(await admin.request('GET', `/builds/${id}/sbom`));
    const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
    const log = await jsonOf(await admin.request('GET', `/builds/${id}/logs`));

    expect(sbom).toMatchObject({
      truncated: true,
      format: 'spdx-json',
      received_bytes: Buffer.byteLength(text),
      document: null,
    });
    expect(sbom.partial).toBe(text.slice(0, CAP));
    expect(sbom.note).toContain(`${Buffer.byteLength(text)} bytes`);
    expect(build.status).toBe('in_progress');
    expect(log.logs.map((l: { message: string }) => l.message).join('\n')).toMatch(
      /SBOM was \d+ bytes; kiln keeps 65536 .* stored truncated/,
    );
  });

  it('refuses a scan report over the cap with 413, storing nothing', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    const huge = JSON.stringify({ ...TRIVY_REPORT, padding: 'x'.repeat(CAP) });

    const response = await upload(id, 'scan', huge, tokens.scan);

    expect(response.status).toBe(413);
    expect(await stored(id)).toBe(0);
  });

  it('does not parse an upload with the JSON body parser (larger than KILN_MAX_BODY_BYTES is fine)', async () => {
    const id = await runningBuild();
    const tokens = (await artifacts.mintUploadTokens(id, 600))!;
    // gzip is not what the route expects: it is read raw and refused as not JSON, not by the parser.
    const response = await upload(id, 'sbom', gzipSync(JSON.stringify(SPDX)), tokens.sbom);

    expect(response.status).toBe(400);
    expect((await jsonOf(response)).error).toMatch(/SBOM is not usable/);
  });
});
