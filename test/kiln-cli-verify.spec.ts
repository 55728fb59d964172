import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { SigningKeys } from '../src/provenance/signing-keys.js';
import { signStatement, SIGSTORE_BUNDLE_V03 } from '../src/provenance/signing.js';
import { type Seeded, seedTenancy, tokenFor } from './support/auth.js';
import { ApiClient } from './support/builds.js';
import { GitRepo } from './support/git-repo.js';
import { jsonOf } from './support/http.js';
import { statementOf } from './support/provenance.js';
import { LocalRegistry } from './support/registry.js';
import { startTestApp, type TestApp } from './support/test-app.js';

/** The `kiln` HTTP CLI as `make build` compiles it (scripts/build-cli.sh). */
const CLI = join(__dirname, '..', 'dist', 'cli', 'http', 'kiln.js');
const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const SPDX = 'https://spdx.dev/Document';

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
}

const sha256 = (bytes: Buffer): string =>
  `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/**
 * `kiln verify` end to end (docs/cli.md, docs/provenance.md): the compiled CLI against a real
 * kiln whose local runner builds with real buildah and pushes to the real Debian docker-registry
 * (no referrers API, so attestations sit under the fallback tag). Attestations the tests make
 * themselves are signed with a tenant's real key and pushed as kiln and cosign push them.
 */
describe('kiln verify (the compiled CLI, real buildah, a real registry)', () => {
  const dataDir = mkdtempSync('/dev/shm/kiln-cli-verify-');
  const home = join(dataDir, 'home');
  let registry: LocalRegistry;
  let repo: GitRepo;
  let kiln: TestApp;
  let seeded: Seeded;
  let admin: ApiClient;
  let tokens: { a: string; b: string };
  let mainCommit: string;
  /** The first build, its image and its provenance as the API serves it. */
  let first: { build: any; provenance: any; image: string };

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`make build\` (make test does)`);
    mkdirSync(home);
    registry = await LocalRegistry.start();
    repo = new GitRepo();
    mainCommit = repo.commit('main', {
      'hello.txt': 'hello\n',
      Dockerfile: 'FROM scratch\nCOPY hello.txt /hello.txt\n',
    });
    kiln = await startTestApp({
      env: {
        KILN_RUNNER: 'local',
        KILN_DATA_DIR: join(dataDir, 'kiln'),
        KILN_LOCAL_REGISTRY: `${registry.address}/kiln`,
        KILN_LOCAL_INSECURE_REGISTRIES: registry.address,
        KILN_PUBLIC_URL: 'https://kiln.example.com',
      },
    });
    seeded = await seedTenancy(kiln);
    await kiln.dataSource.query('UPDATE projects SET git_repository_url = $1 WHERE id = $2', [
      repo.url,
      seeded.projectA,
    ]);
    tokens = {
      a: await tokenFor(kiln.baseUrl, seeded.users.admin.email),
      b: await tokenFor(kiln.baseUrl, seeded.users.adminB.email),
    };
    admin = new ApiClient(kiln, tokens.a, seeded.tenantA);

    const created = await admin.createBuild(seeded.projectA, 'main');
    expect((await admin.request('POST', `/builds/${created.id}/start`)).status).toBe(200);
    const build = await finished(created.id as string);
    expect({ status: build.status, provenance: build.provenance }).toEqual({
      status: 'success',
      provenance: 'attached',
    });
    const provenance = await jsonOf(await admin.request('GET', `/builds/${build.id}/provenance`));
    first = { build, provenance, image: `${registry.address}/kiln/web:${build.build_number}` };
  }, 120_000);

  afterAll(async () => {
    await kiln?.close();
    await registry?.stop();
    await rm(dataDir, { recursive: true, force: true });
    if (repo !== undefined) await rm(repo.dir, { recursive: true, force: true });
  });

  async function finished(id: string): Promise<any> {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const build = await jsonOf(await admin.request('GET', `/builds/${id}`));
      if (!['queued', 'in_progress'].includes(build.status)) return build;
      if (Date.now() > deadline) throw new Error(`build ${id} still ${build.status}`);
      await new Promise((done) => setTimeout(done, 200));
    }
  }

  /** Runs `kiln` as a CI job would, in tenant A unless told otherwise; no docker config. */
  function run(
    args: string[],
    as: { token?: string; tenant?: string; dockerConfig?: string } = {},
  ): Promise<Run> {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: home,
        KILN_URL: kiln.baseUrl,
        KILN_TOKEN: as.token ?? tokens.a,
        KILN_TENANT: as.tenant ?? seeded.tenantA,
        ...(as.dockerConfig === undefined ? {} : { DOCKER_CONFIG: as.dockerConfig }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    return new Promise((done) => child.on('close', (status) => done({ status, stdout, stderr })));
  }

  // --- the registry, written to as a client would ---------------------------------------------

  async function pushBlob(repository: string, bytes: Buffer): Promise<Descriptor> {
    const base = `http://${registry.address}`;
    const started = await fetch(`${base}/v2/${repository}/blobs/uploads/`, { method: 'POST' });
    expect(started.status).toBe(202);
    const location = new URL(started.headers.get('location')!, base);
    location.searchParams.set('digest', sha256(bytes));
    const done = await fetch(location, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: new Uint8Array(bytes),
    });
    expect(done.status).toBe(201);
    return { mediaType: 'application/octet-stream', digest: sha256(bytes), size: bytes.length };
  }

  /** Puts a manifest under `tag`, or under its own digest. */
  async function pushManifest(
    repository: string,
    mediaType: string,
    manifest: object,
    tag?: string,
  ): Promise<Descriptor> {
    const raw = Buffer.from(JSON.stringify(manifest));
    const digest = sha256(raw);
    const put = await fetch(
      `http://${registry.address}/v2/${repository}/manifests/${tag ?? digest}`,
      { method: 'PUT', headers: { 'content-type': mediaType }, body: new Uint8Array(raw) },
    );
    expect(put.status).toBe(201);
    return { mediaType, digest, size: raw.length };
  }

  /** A small image of one empty layer, unique to this call, pushed as `repository:tag`. */
  async function pushImage(repository: string, tag: string): Promise<Descriptor> {
    const tar = Buffer.alloc(1024);
    const layer = await pushBlob(repository, gzipSync(tar));
    const config = await pushBlob(
      repository,
      Buffer.from(
        JSON.stringify({
          architecture: 'amd64',
          os: 'linux',
          config: { Labels: { nonce: randomBytes(8).toString('hex') } },
          rootfs: { type: 'layers', diff_ids: [sha256(tar)] },
        }),
      ),
    );
    return pushManifest(
      repository,
      OCI_MANIFEST,
      {
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { ...config, mediaType: 'application/vnd.oci.image.config.v1+json' },
        layers: [{ ...layer, mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip' }],
      },
      tag,
    );
  }

  /**
   * Attaches `bundle` to `subject` as kiln and cosign do on a registry without the referrers API:
   * the referrer manifest (empty config, the bundle as its one layer), then an entry for it in
   * the image index under the fallback tag `sha256-<hex>`.
   */
  async function attach(repository: string, subject: Descriptor, bundle: object): Promise<void> {
    const config = await pushBlob(repository, Buffer.from('{}'));
    const layer = await pushBlob(repository, Buffer.from(JSON.stringify(bundle)));
    const predicateType = statementOf(bundle as any).predicateType as string;
    const annotations = {
      'dev.sigstore.bundle.content': 'dsse-envelope',
      'dev.sigstore.bundle.predicateType': predicateType,
    };
    const referrer = await pushManifest(repository, OCI_MANIFEST, {
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { ...config, mediaType: 'application/vnd.oci.empty.v1+json' },
      layers: [{ ...layer, mediaType: SIGSTORE_BUNDLE_V03 }],
      annotations,
      subject,
      artifactType: SIGSTORE_BUNDLE_V03,
    });
    const tag = `sha256-${subject.digest.slice('sha256:'.length)}`;
    const current = await fetch(`http://${registry.address}/v2/${repository}/manifests/${tag}`, {
      headers: { accept: OCI_INDEX },
    });
    const index: { schemaVersion?: number; mediaType?: string; manifests: object[] } =
      current.status === 200
        ? ((await current.json()) as { manifests: object[] })
        : { schemaVersion: 2, mediaType: OCI_INDEX, manifests: [] };
    index.manifests.push({ ...referrer, artifactType: SIGSTORE_BUNDLE_V03, annotations });
    await pushManifest(repository, OCI_INDEX, index, tag);
  }

  /** A statement signed with the tenant's own key, as kiln signs (the key made if it has none). */
  async function signedAs(tenantId: string, statement: object): Promise<object> {
    const keys = kiln.app.get(SigningKeys);
    const { signingKey } = await keys.settings(tenantId);
    const signer = await keys.signer(tenantId, signingKey);
    if (!signer.ok) throw new Error(signer.message);
    return signStatement(statement, signer.key);
  }

  function statementAbout(
    image: Descriptor,
    name: string,
    predicateType: string,
    predicate: object,
  ) {
    return {
      _type: 'https://in-toto.io/Statement/v1',
      subject: [{ name, digest: { sha256: image.digest.slice('sha256:'.length) } }],
      predicateType,
      predicate,
    };
  }

  const firstImage = (): Descriptor => ({
    mediaType: OCI_MANIFEST,
    digest: first.build.image_digest as string,
    size: 0,
  });

  // --- the tests -------------------------------------------------------------------------------

  it("verifies a build's image and prints who built it from which commit, with which key", async () => {
    const verified = await run(['verify', first.image, '--insecure']);

    expect(verified).toMatchObject({ status: 0, stderr: '' });
    const { build, provenance } = first;
    const field = (label: string) =>
      new RegExp(`^${label}: +(.*)$`, 'm').exec(verified.stdout)?.[1];
    expect({
      image: field('Image'),
      build: field('Build'),
      builder: field('Builder'),
      method: field('Method'),
      repository: field('Repository'),
      ref: field('Ref'),
      commit: field('Commit'),
      createdBy: field('Created by'),
      key: field('Key'),
      log: field('Build log'),
    }).toEqual({
      image: `${registry.address}/kiln/web@${build.image_digest}`,
      build: build.id,
      builder: 'https://kiln.example.com/builders/kaniko',
      method: 'https://kiln.dev/buildtypes/kaniko/v1',
      repository: `git+${repo.url}`,
      ref: 'main',
      commit: mainCommit,
      createdBy: seeded.users.admin.id,
      key: `${provenance.key_id} (active)`,
      log: `${provenance.log.digest} (${provenance.log.lines} lines)`,
    });
  });

  it('prints a machine-readable result with -o json, for an image named by its digest', async () => {
    const { build, provenance } = first;
    const byDigest = `${registry.address}/kiln/web@${build.image_digest}`;
    const verified = await run(['verify', byDigest, '--insecure', '-o', 'json']);

    expect(verified.status).toBe(0);
    const result = JSON.parse(verified.stdout);
    expect(result).toMatchObject({
      image: byDigest,
      reference: byDigest,
      digest: build.image_digest,
      result: 'verified',
      referrers_from: 'fallback-tag',
    });
    expect(result.attestations).toEqual([
      {
        referrer: provenance.attachments[0].digest,
        verified: true,
        error: null,
        key_id: provenance.key_id,
        key_state: 'active',
        key_retired_at: null,
        predicate_type: 'https://slsa.dev/provenance/v1',
        subjects: [
          {
            name: `${registry.address}/kiln/web:${build.build_number}`,
            digest: build.image_digest,
          },
        ],
        subject_matches: true,
        provenance: expect.objectContaining({
          build_id: build.id,
          commit: mainCommit,
          finished_on: provenance.statement.predicate.runDetails.metadata.finishedOn,
          build_log: {
            digest: provenance.log.digest,
            lines: provenance.log.lines,
            uri: `https://kiln.example.com/api/v1/builds/${build.id}/logs`,
          },
        }),
      },
    ]);
  });

  it('lists an SBOM attestation signed with the tenant’s key beside the provenance', async () => {
    const sbom = { spdxVersion: 'SPDX-2.3', name: 'web', packages: [] };
    const name = `${registry.address}/kiln/web:${first.build.build_number}`;
    await attach(
      'kiln/web',
      firstImage(),
      await signedAs(seeded.tenantA, statementAbout(firstImage(), name, SPDX, sbom)),
    );

    const verified = await run(['verify', first.image, '--insecure']);

    expect(verified.status).toBe(0);
    expect(verified.stdout).toMatch(
      new RegExp(
        `^SBOM: +${SPDX} \\(verified, key ${first.provenance.key_id} \\(active\\)\\)$`,
        'm',
      ),
    );
  });

  it('still verifies an image whose key was rotated since, naming the key as retired', async () => {
    const rotated = await admin.request('POST', '/signing-keys/rotate');
    expect(rotated.status).toBe(201);

    const verified = await run(['verify', first.image, '--insecure', '-o', 'json']);

    expect(verified.status).toBe(0);
    const [provenance] = JSON.parse(verified.stdout).attestations.filter(
      (a: any) => a.predicate_type === 'https://slsa.dev/provenance/v1',
    );
    expect(provenance).toMatchObject({
      verified: true,
      key_id: first.provenance.key_id,
      key_state: 'retired',
      key_retired_at: expect.any(String),
    });
    const table = await run(['verify', first.image, '--insecure']);
    expect(table.stdout).toMatch(new RegExp(`^Key: +${first.provenance.key_id} \\(retired `, 'm'));
  });

  it('refuses a provenance whose payload was changed after signing (exit 5)', async () => {
    const image = await pushImage('self/tampered', '1');
    const bundle = structuredClone(first.provenance.bundle);
    // The change an attacker would make: the statement now names their image.
    const statement = statementOf(bundle);
    statement.subject[0].digest.sha256 = image.digest.slice('sha256:'.length);
    bundle.dsseEnvelope.payload = Buffer.from(JSON.stringify(statement)).toString('base64');
    await attach('self/tampered', image, bundle);

    const refused = await run(['verify', `${registry.address}/self/tampered:1`, '--insecure']);

    expect(refused.status).toBe(5);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toMatch(
      new RegExp(
        `^kiln: .*no attestation verifies against the tenant's keys: sha256:[0-9a-f]{64}: its signature does not hold for key ${first.provenance.key_id}`,
      ),
    );
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refuses a provenance signed with another tenant’s key (exit 5), either way round', async () => {
    const image = await pushImage('self/foreign', '1');
    const name = `${registry.address}/self/foreign:1`;
    const bundle = await signedAs(
      seeded.tenantB,
      statementAbout(
        image,
        name,
        'https://slsa.dev/provenance/v1',
        first.provenance.statement.predicate,
      ),
    );
    await attach('self/foreign', image, bundle);
    const keyB = (bundle as any).verificationMaterial.publicKey.hint as string;

    const inA = await run(['verify', name, '--insecure']);
    const inB = await run(['verify', first.image, '--insecure'], {
      token: tokens.b,
      tenant: seeded.tenantB,
    });

    expect(inA.status).toBe(5);
    expect(inA.stderr).toContain(`signed by key ${keyB}, which is not one of the tenant's`);
    expect(inB.status).toBe(5);
    expect(inB.stderr).toContain(
      `signed by key ${first.provenance.key_id}, which is not one of the tenant's`,
    );
  });

  it('refuses a genuine provenance of another image (exit 6)', async () => {
    const image = await pushImage('self/copied', '1');
    await attach('self/copied', image, first.provenance.bundle);

    const refused = await run(['verify', `${registry.address}/self/copied:1`, '--insecure']);

    expect(refused.status).toBe(6);
    expect(refused.stderr).toBe(
      `kiln: ${registry.address}/self/copied@${image.digest}: the provenance of build ${first.build.id} verifies, but it is about ${first.image}@${first.build.image_digest}, not this image\n`,
    );
  });

  it('says so when an image has no attestation (exit 4)', async () => {
    const image = await pushImage('self/plain', 'v1');

    const none = await run([
      'verify',
      `${registry.address}/self/plain:v1`,
      '--insecure',
      '-o',
      'json',
    ]);

    expect(none.status).toBe(4);
    expect(JSON.parse(none.stdout)).toMatchObject({ result: 'no-attestation', attestations: [] });
    expect(none.stderr).toBe(
      `kiln: ${registry.address}/self/plain@${image.digest}: no provenance attestation is attached (the registry has no referrers API, and its tag sha256-${image.digest.slice(7)} lists none)\n`,
    );
  });

  it('an unknown image, a registry without TLS asked over HTTPS or none at all: exit 7', async () => {
    const closed = await closedPort();

    const unknown = await run(['verify', `${registry.address}/self/absent:1`, '--insecure']);
    const tls = await run(['verify', first.image]);
    const down = await run(['verify', `127.0.0.1:${closed}/self/absent:1`, '--insecure']);

    expect(unknown.status).toBe(7);
    expect(unknown.stderr).toBe(
      `kiln: ${registry.address}/self/absent:1: no such image in the registry, MANIFEST_UNKNOWN\n`,
    );
    expect(tls.status).toBe(7);
    expect(tls.stderr).toMatch(
      /could not be reached \(.+\); for a registry without TLS pass --insecure\n$/,
    );
    expect(down.status).toBe(7);
    expect(down.stderr).toBe(
      `kiln: 127.0.0.1:${closed}/self/absent:1: could not be reached (ECONNREFUSED)\n`,
    );
  });

  it('answers a Bearer challenge with a token asked with the credentials in docker’s config', async () => {
    const password = `pw-${randomBytes(8).toString('hex')}`;
    const front = await TokenFront.start(registry.address, 'robot', password);
    try {
      const image = `${front.address}/kiln/web:${first.build.build_number}`;
      const good = dockerConfig(`http://${front.address}`, 'robot', password);
      const wrong = dockerConfig(front.address, 'robot', 'not-it');

      const verified = await run(['verify', image, '--insecure'], { dockerConfig: good });
      const anonymous = await run(['verify', image, '--insecure']);
      const refused = await run(['verify', image, '--insecure'], { dockerConfig: wrong });

      expect(verified.status).toBe(0);
      expect(verified.stdout).toMatch(new RegExp(`^Build: +${first.build.id}$`, 'm'));
      expect(front.scopes).toContain('repository:kiln/web:pull');
      expect(anonymous.status).toBe(7);
      expect(anonymous.stderr).toContain(
        `it requires credentials, and none for ${front.address} in ${join(home, '.docker', 'config.json')}`,
      );
      expect(refused.status).toBe(7);
      expect(refused.stderr).toContain(
        `it refused the credentials for ${front.address} in ${join(wrong, 'config.json')}`,
      );
      for (const output of [verified, anonymous, refused].flatMap((r) => [r.stdout, r.stderr])) {
        expect(output).not.toContain(password);
        expect(output).not.toContain('Basic ');
        expect(output).not.toContain(front.issued[0]);
      }
    } finally {
      await front.stop();
    }
  });

  it('reads the referrers API, page by page, where the registry has one', async () => {
    const password = `pw-${randomBytes(8).toString('hex')}`;
    const front = await TokenFront.start(registry.address, 'robot', password, {
      referrersApi: true,
    });
    try {
      const verified = await run(
        [
          'verify',
          `${front.address}/kiln/web:${first.build.build_number}`,
          '--insecure',
          '-o',
          'json',
        ],
        { dockerConfig: dockerConfig(front.address, 'robot', password) },
      );

      expect(verified.status).toBe(0);
      const result = JSON.parse(verified.stdout);
      expect(result.referrers_from).toBe('referrers-api');
      expect(result.attestations.map((a: any) => [a.predicate_type, a.verified])).toEqual([
        ['https://slsa.dev/provenance/v1', true],
        [SPDX, true],
      ]);
      expect(front.referrerPages).toBe(2);
    } finally {
      await front.stop();
    }
  });

  /** A docker config directory whose `auths` hold `user:password` for `key`. */
  function dockerConfig(key: string, user: string, password: string): string {
    const dir = mkdtempSync(join(dataDir, 'docker-'));
    const auth = Buffer.from(`${user}:${password}`).toString('base64');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ auths: { [key]: { auth } } }));
    return dir;
  }
});

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/**
 * A token-auth front of the real registry, as Docker Hub or Harbor answer: a /v2/ request
 * without a token it issued gets 401 with a Bearer challenge (its error message echoing the
 * Authorization it got, as some registries do); its /token issues a pull token for Basic
 * credentials; requests with a token go through to the registry. With `referrersApi` it also
 * answers the referrers API, one referrer a page, from the registry's fallback tag, and hides
 * that tag: a client that reads the tag finds none.
 */
class TokenFront {
  readonly scopes: string[] = [];
  readonly issued: string[] = [];
  referrerPages = 0;

  private constructor(private readonly server: Server) {}

  static async start(
    upstream: string,
    user: string,
    password: string,
    options: { referrersApi?: boolean } = {},
  ): Promise<TokenFront> {
    const expected = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
    const server = createServer();
    const front = new TokenFront(server);
    server.on('request', (request, response) => {
      void (async () => {
        const url = new URL(request.url ?? '/', 'http://front');
        const authorization = request.headers.authorization ?? '';
        if (url.pathname === '/token') {
          if (authorization !== expected) return response.writeHead(401).end();
          front.scopes.push(...url.searchParams.getAll('scope'));
          const token = randomBytes(16).toString('hex');
          front.issued.push(token);
          return response
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ token }));
        }
        if (!front.issued.includes(authorization.replace(/^Bearer /, ''))) {
          return response
            .writeHead(401, {
              'content-type': 'application/json',
              'www-authenticate': `Bearer realm="http://${front.address}/token",service="front"`,
            })
            .end(
              JSON.stringify({
                errors: [{ code: 'UNAUTHORIZED', message: `not with ${authorization}` }],
              }),
            );
        }
        const referrers = /^\/v2\/(.+)\/referrers\/sha256:([0-9a-f]{64})$/.exec(url.pathname);
        if (options.referrersApi === true && referrers !== null) {
          const [, name, hex] = referrers;
          front.referrerPages += 1;
          const tag = await fetch(`http://${upstream}/v2/${name}/manifests/sha256-${hex}`, {
            headers: { accept: OCI_INDEX },
          });
          const all: object[] =
            tag.status === 200 ? ((await tag.json()) as { manifests: object[] }).manifests : [];
          const page = Number(url.searchParams.get('page') ?? '0');
          const next =
            page + 1 < all.length ? `<${url.pathname}?page=${page + 1}>; rel="next"` : '';
          return response
            .writeHead(200, { 'content-type': OCI_INDEX, ...(next === '' ? {} : { link: next }) })
            .end(
              JSON.stringify({
                schemaVersion: 2,
                mediaType: OCI_INDEX,
                manifests: all.slice(page, page + 1),
              }),
            );
        }
        if (options.referrersApi === true && /\/manifests\/sha256-/.test(url.pathname)) {
          return response.writeHead(404).end();
        }
        const answer = await fetch(`http://${upstream}${request.url}`, {
          headers: { accept: request.headers.accept ?? '*/*' },
        });
        const headers: Record<string, string> = {};
        for (const name of ['content-type', 'docker-content-digest']) {
          const value = answer.headers.get(name);
          if (value !== null) headers[name] = value;
        }
        response.writeHead(answer.status, headers).end(Buffer.from(await answer.arrayBuffer()));
      })();
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return front;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((done) => this.server.close(done));
  }
}
