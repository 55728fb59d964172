import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  request as httpRequest,
  type Server,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { LocalRegistry } from '../../test/support/registry.js';
import {
  OCI_EMPTY,
  OCI_INDEX,
  OCI_MANIFEST,
  OciReferrers,
  OciRegistryError,
  referrersTag,
  SIGSTORE_BUNDLE_V03,
  sigstoreBundleAnnotations,
} from './oci-referrers.js';

const SPDX = 'application/spdx+json';
const SLSA = 'https://slsa.dev/provenance/v1';
const sha256 = (bytes: Buffer | string) =>
  `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

let registry: LocalRegistry;
let base: string;

beforeAll(async () => {
  registry = await LocalRegistry.start();
  base = `http://${registry.address}`;
});
afterAll(async () => {
  await registry.stop();
});

/** A fresh repository per test, so that each starts from an empty registry. */
const newPath = () => `kiln/app-${randomUUID().slice(0, 8)}`;

/** Pushes a blob with plain requests, as any client would, independent of the code under test. */
async function pushBlob(origin: string, path: string, content: Buffer): Promise<string> {
  const digest = sha256(content);
  const started = await fetch(`${origin}/v2/${path}/blobs/uploads/`, { method: 'POST' });
  expect(started.status).toBe(202);
  const location = new URL(started.headers.get('location')!, origin);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, {
    method: 'PUT',
    headers: { 'content-type': 'application/octet-stream' },
    body: new Uint8Array(content),
  });
  expect(put.status).toBe(201);
  return digest;
}

async function putManifest(
  origin: string,
  path: string,
  reference: string,
  mediaType: string,
  raw: string,
): Promise<void> {
  const put = await fetch(`${origin}/v2/${path}/manifests/${reference}`, {
    method: 'PUT',
    headers: { 'content-type': mediaType },
    body: raw,
  });
  expect(put.status).toBe(201);
}

/** A tiny OCI image (a config and one layer) tagged `tag`; its manifest descriptor. */
async function pushImage(path: string, tag = 'v1', origin = base) {
  const layer = randomBytes(64);
  const config = Buffer.from(
    JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers' } }),
  );
  const raw = JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: {
      mediaType: 'application/vnd.oci.image.config.v1+json',
      size: config.length,
      digest: await pushBlob(origin, path, config),
    },
    layers: [
      {
        mediaType: 'application/vnd.oci.image.layer.v1.tar',
        size: layer.length,
        digest: await pushBlob(origin, path, layer),
      },
    ],
  });
  await putManifest(origin, path, tag, OCI_MANIFEST, raw);
  return { digest: sha256(raw), mediaType: OCI_MANIFEST, size: Buffer.byteLength(raw) };
}

async function getJson(url: string, accept: string): Promise<Record<string, unknown>> {
  const answer = await fetch(url, { headers: { accept } });
  expect(answer.status).toBe(200);
  return (await answer.json()) as Record<string, unknown>;
}

/** A stand-in for a Sigstore bundle: only its bytes matter here. */
function bundle(name: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      mediaType: SIGSTORE_BUNDLE_V03,
      verificationMaterial: { publicKey: { hint: name } },
      dsseEnvelope: { payload: Buffer.from(name).toString('base64'), signatures: [] },
    }),
  );
}

const created = new Date('2026-03-04T05:06:07.890Z');
const provenance = (name = 'provenance') => ({
  artifactType: SIGSTORE_BUNDLE_V03,
  layerMediaType: SIGSTORE_BUNDLE_V03,
  content: bundle(name),
  annotations: sigstoreBundleAnnotations(SLSA, created),
});
const sbom = () => ({
  artifactType: SPDX,
  layerMediaType: SPDX,
  content: Buffer.from('{"spdxVersion":"SPDX-2.3"}'),
  annotations: { 'org.opencontainers.image.created': '2026-03-04T05:06:07Z' },
});

async function tagIndex(path: string, digest: string): Promise<{ manifests: unknown[] }> {
  return (await getJson(
    `${base}/v2/${path}/manifests/${referrersTag(digest)}`,
    OCI_INDEX,
  )) as unknown as { manifests: unknown[] };
}

describe(OciReferrers.name, () => {
  it('attaches an artifact as a referrer listed in the sha256-<hex> tag, as cosign writes it', async () => {
    const path = newPath();
    const image = await pushImage(path);
    const artifact = provenance();

    const attached = await new OciReferrers({ insecure: true }).attach(
      { host: registry.address, path },
      image,
      artifact,
    );

    expect(attached.via).toBe('fallback-tag');
    const tag = `sha256-${image.digest.slice('sha256:'.length)}`;
    expect(await registry.tags(path)).toContain(tag);
    const index = await getJson(`${base}/v2/${path}/manifests/${tag}`, OCI_INDEX);
    expect(index).toEqual({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        {
          mediaType: OCI_MANIFEST,
          size: expect.any(Number) as number,
          digest: attached.digest,
          artifactType: SIGSTORE_BUNDLE_V03,
          annotations: {
            'dev.sigstore.bundle.content': 'dsse-envelope',
            'dev.sigstore.bundle.predicateType': SLSA,
            'org.opencontainers.image.created': '2026-03-04T05:06:07Z',
          },
        },
      ],
    });
    const referrer = await getJson(`${base}/v2/${path}/manifests/${attached.digest}`, OCI_MANIFEST);
    expect(referrer).toEqual({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: {
        mediaType: OCI_EMPTY,
        size: 2,
        digest: sha256('{}'),
        artifactType: SIGSTORE_BUNDLE_V03,
      },
      layers: [
        {
          mediaType: SIGSTORE_BUNDLE_V03,
          size: artifact.content.length,
          digest: sha256(artifact.content),
        },
      ],
      annotations: artifact.annotations,
      subject: image,
      artifactType: SIGSTORE_BUNDLE_V03,
    });
    const layer = await fetch(`${base}/v2/${path}/blobs/${sha256(artifact.content)}`);
    expect(Buffer.from(await layer.arrayBuffer())).toEqual(artifact.content);
    const config = await fetch(`${base}/v2/${path}/blobs/${sha256('{}')}`);
    expect(await config.text()).toBe('{}');
  });

  it('adds a second artifact beside the first, and attaching the first again changes nothing', async () => {
    const path = newPath();
    const repository = { host: registry.address, path };
    const image = await pushImage(path);
    const client = new OciReferrers({ insecure: true });

    const first = await client.attach(repository, image, provenance());
    const second = await client.attach(repository, image, sbom());
    const again = await new OciReferrers({ insecure: true }).attach(
      repository,
      image,
      provenance(),
    );

    expect(again.digest).toBe(first.digest);
    expect(second.digest).not.toBe(first.digest);
    const { manifests } = await tagIndex(path, image.digest);
    expect(manifests.map((entry) => (entry as { digest: string }).digest)).toEqual([
      first.digest,
      second.digest,
    ]);
  });

  it('lists the referrers of an image, all of them or of one artifact type', async () => {
    const path = newPath();
    const repository = { host: registry.address, path };
    const image = await pushImage(path);
    const other = await pushImage(path, 'v2');
    const writer = new OciReferrers({ insecure: true });
    const bundleRef = await writer.attach(repository, image, provenance());
    const sbomRef = await writer.attach(repository, image, sbom());
    const reader = new OciReferrers({ insecure: true });

    const all = await reader.referrers(repository, image.digest);
    const bundles = await reader.referrers(repository, image.digest, SIGSTORE_BUNDLE_V03);

    expect(all.map((d) => [d.digest, d.artifactType])).toEqual([
      [bundleRef.digest, SIGSTORE_BUNDLE_V03],
      [sbomRef.digest, SPDX],
    ]);
    expect(bundles.map((d) => d.digest)).toEqual([bundleRef.digest]);
    expect(bundles[0]!.annotations).toEqual(provenance().annotations);
    expect(await reader.referrers(repository, other.digest)).toEqual([]);
  });

  it("asks Docker Hub's registry API host for docker.io images", async () => {
    const asked: string[] = [];
    const client = new OciReferrers({
      fetch: (input) => {
        asked.push(input instanceof Request ? input.url : input.toString());
        return Promise.reject(new TypeError('fetch failed'));
      },
    });

    await expect(client.resolve('docker.io/library/alpine:3.20')).rejects.toThrow(
      /could not be reached/,
    );
    expect(new Set(asked.map((url) => new URL(url).origin))).toEqual(
      new Set(['https://registry-1.docker.io']),
    );
  });

  it('resolves an image by tag and by digest', async () => {
    const path = newPath();
    const image = await pushImage(path, '1.0');
    const client = new OciReferrers({ insecure: true });

    const byTag = await client.resolve(`${registry.address}/${path}:1.0`);
    const byDigest = await client.resolve(`${registry.address}/${path}@${image.digest}`);

    const expected = { repository: { host: registry.address, path }, ...image };
    expect(byTag).toEqual(expected);
    expect(byDigest).toEqual(expected);
    await expect(client.resolve(`${registry.address}/${path}:missing`)).rejects.toThrow(
      `${registry.address}: GET manifest ${path}:missing: answered 404`,
    );
  });

  it('reads back the referrer manifest and its layer, checked against their digests', async () => {
    const path = newPath();
    const repository = { host: registry.address, path };
    const image = await pushImage(path);
    const artifact = provenance();
    const attached = await new OciReferrers({ insecure: true }).attach(repository, image, artifact);
    const reader = new OciReferrers({ insecure: true });

    const manifest = await reader.manifest(repository, attached.digest);
    const layer = manifest.content.layers![0]!;
    const content = await reader.blob(repository, layer.digest);

    expect(sha256(manifest.raw)).toBe(attached.digest);
    expect(manifest.mediaType).toBe(OCI_MANIFEST);
    expect(manifest.content.subject?.digest).toBe(image.digest);
    expect(content).toEqual(artifact.content);
    await expect(reader.blob(repository, layer.digest, layer.size - 1)).rejects.toThrow(
      `larger than ${layer.size - 1} bytes`,
    );
  });

  it('leaves a referrers tag that holds something other than an image index alone', async () => {
    const path = newPath();
    const image = await pushImage(path);
    // An image pushed under the subject's referrers tag by someone else.
    const squatter = await pushImage(path, referrersTag(image.digest));
    const client = new OciReferrers({ insecure: true });

    const attaching = client.attach({ host: registry.address, path }, image, sbom());

    await expect(attaching).rejects.toThrow(OciRegistryError);
    await expect(attaching).rejects.toThrow('not the image index of the referrers tag schema');
    const resolved = await client.resolve(
      `${registry.address}/${path}:${referrersTag(image.digest)}`,
    );
    expect(resolved.digest).toBe(squatter.digest);
  });

  describe('against a registry that sends other bytes than asked for', () => {
    let proxy: TestProxy;
    afterEach(() => proxy.stop());

    /** Every manifest and blob body gets one byte more; headers are passed on as sent. */
    const tamper: Intercept = async (incoming, forward) => {
      const reply = await forward(incoming);
      const tampered = /\/(manifests|blobs)\//.test(incoming.path) && incoming.method === 'GET';
      if (!tampered || reply.status !== 200) return reply;
      return { ...reply, body: Buffer.concat([reply.body, Buffer.from(' ')]) };
    };

    it('detects a manifest or blob whose digest is not the one asked for', async () => {
      const path = newPath();
      const image = await pushImage(path, 'v1');
      const attached = await new OciReferrers({ insecure: true }).attach(
        { host: registry.address, path },
        image,
        sbom(),
      );
      proxy = await TestProxy.start(registry.address, tamper);
      const repository = { host: proxy.address, path };
      const client = new OciReferrers({ insecure: true });

      await expect(client.manifest(repository, attached.digest)).rejects.toThrow(
        `${proxy.address}: GET manifest ${path}@${attached.digest}: the registry sent content whose digest is`,
      );
      await expect(client.resolve(`${proxy.address}/${path}@${image.digest}`)).rejects.toThrow(
        `not ${image.digest}`,
      );
      // By tag there is no digest to hold the bytes to but the registry's own header.
      await expect(client.resolve(`${proxy.address}/${path}:v1`)).rejects.toThrow(
        `the registry says the digest is ${image.digest}, but it is`,
      );
      const layerDigest = sha256(sbom().content);
      await expect(client.blob(repository, layerDigest)).rejects.toThrow(
        `GET blob ${path}@${layerDigest}: the registry sent content whose digest is`,
      );
    });
  });

  describe('when another writer updates the referrers tag at the same time', () => {
    let proxy: TestProxy;
    afterEach(() => proxy.stop());

    it('adds its entry again after the other writer overwrote it, dropping neither', async () => {
      const path = newPath();
      const repository = { host: registry.address, path };
      const image = await pushImage(path);
      const earlier = await new OciReferrers({ insecure: true }).attach(repository, image, sbom());
      // The other writer's referrer: pushed, not yet in the tag.
      const theirs = JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        artifactType: 'application/vnd.example.other',
        config: {
          mediaType: OCI_EMPTY,
          size: 2,
          digest: await pushBlob(base, path, Buffer.from('{}')),
        },
        layers: [
          {
            mediaType: 'text/plain',
            size: 5,
            digest: await pushBlob(base, path, Buffer.from('other')),
          },
        ],
        subject: image,
      });
      await putManifest(base, path, sha256(theirs), OCI_MANIFEST, theirs);
      const tagPath = `/v2/${path}/manifests/${referrersTag(image.digest)}`;
      const before = await tagIndex(path, image.digest);
      let puts = 0;
      // The other writer read the tag before kiln's put and writes its own index right after it.
      proxy = await TestProxy.start(registry.address, async (incoming, forward) => {
        const reply = await forward(incoming);
        if (incoming.method === 'PUT' && incoming.path === tagPath && ++puts === 1) {
          const competing = {
            ...before,
            manifests: [
              ...before.manifests,
              { mediaType: OCI_MANIFEST, size: theirs.length, digest: sha256(theirs) },
            ],
          };
          const put = await forward({
            ...incoming,
            body: Buffer.from(JSON.stringify(competing)),
          });
          expect(put.status).toBe(201);
        }
        return reply;
      });

      const attached = await new OciReferrers({ insecure: true }).attach(
        { host: proxy.address, path },
        image,
        provenance(),
      );

      expect(puts).toBe(2);
      const { manifests } = await tagIndex(path, image.digest);
      expect(manifests.map((entry) => (entry as { digest: string }).digest)).toEqual([
        earlier.digest,
        sha256(theirs),
        attached.digest,
      ]);
      // Entries already listed are kept as they were.
      expect(manifests[0]).toEqual(before.manifests[0]);
    });
  });

  describe('against a registry that requires auth', () => {
    let gate: AuthGate;
    const robot = { username: 'robot', password: 'Sup3r-s3cret-pw' };
    const reader = { username: 'reader', password: 'An0ther-s3cret' };
    afterEach(() => gate.stop());

    /** Every form of a credential or token that must not appear in a message. */
    const secretsOf = (credentials: { username: string; password: string }) => {
      const pair = `${credentials.username}:${credentials.password}`;
      return [credentials.password, Buffer.from(pair).toString('base64'), ...gate.issuedTokens];
    };
    async function failure(work: Promise<unknown>): Promise<OciRegistryError> {
      const error = await work.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OciRegistryError);
      return error as OciRegistryError;
    }

    it('follows the Bearer challenge: pull,push to attach, pull to read, the password to the token service only', async () => {
      gate = await AuthGate.start(registry.address, 'bearer');
      const path = 'team/app';
      gate.addUser(robot, { [path]: ['pull', 'push'] });
      const image = await pushImage(path, `v-${randomUUID().slice(0, 6)}`);
      const repository = { host: gate.address, path };

      const attached = await new OciReferrers({ insecure: true, credentials: robot }).attach(
        repository,
        image,
        provenance(),
      );
      const found = await new OciReferrers({ insecure: true, credentials: robot }).referrers(
        repository,
        image.digest,
      );

      expect(found.map((d) => d.digest)).toEqual([attached.digest]);
      expect(gate.grantedScopes).toEqual([
        `repository:${path}:pull,push`,
        `repository:${path}:pull`,
      ]);
      const basic = `Basic ${Buffer.from(`${robot.username}:${robot.password}`).toString('base64')}`;
      const toRegistry = gate.requests.filter((r) => r.path.startsWith('/v2/'));
      expect(toRegistry.length).toBeGreaterThan(5);
      expect(toRegistry.every((r) => r.authorization !== basic)).toBe(true);
      expect(
        toRegistry
          .filter((r) => r.authorization !== undefined)
          .every((r) => r.authorization!.startsWith('Bearer ')),
      ).toBe(true);
      expect(gate.requests.filter((r) => r.path === '/token').map((r) => r.authorization)).toEqual([
        basic,
        basic,
      ]);
    });

    it('refuses a push the token does not grant, naming host, operation and status, and no secret', async () => {
      gate = await AuthGate.start(registry.address, 'bearer', { echoAuthorization: true });
      const path = 'team/app';
      gate.addUser(reader, { [path]: ['pull'] });
      const image = await pushImage(path, `v-${randomUUID().slice(0, 6)}`);

      const error = await failure(
        new OciReferrers({ insecure: true, credentials: reader }).attach(
          { host: gate.address, path },
          image,
          sbom(),
        ),
      );

      expect(error.status).toBe(401);
      expect(error.host).toBe(gate.address);
      expect(error.message).toContain(`${gate.address}: POST blob upload ${path}: answered 401`);
      expect(error.message).toContain(`these credentials may not push ${path}`);
      // The registry echoed the token it was sent; the message has it blanked.
      expect(error.message).toContain('for Bearer ***');
      expect(gate.issuedTokens.length).toBeGreaterThan(0);
      for (const secret of secretsOf(reader)) {
        expect(error.message).not.toContain(secret);
        expect(error.stack).not.toContain(secret);
      }
    });

    it('reports wrong credentials and missing ones without the password', async () => {
      gate = await AuthGate.start(registry.address, 'bearer');
      const path = 'team/app';
      gate.addUser(robot, { [path]: ['pull', 'push'] });
      const image = await pushImage(path, `v-${randomUUID().slice(0, 6)}`);
      const wrong = { username: robot.username, password: 'Wr0ng-pa55word' };
      const repository = { host: gate.address, path };

      const refused = await failure(
        new OciReferrers({ insecure: true, credentials: wrong }).referrers(
          repository,
          image.digest,
        ),
      );
      const anonymous = await failure(
        new OciReferrers({ insecure: true }).attach(repository, image, sbom()),
      );

      expect(refused.message).toContain('the token service');
      expect(refused.message).toContain('answered 401 (it refused these credentials)');
      for (const secret of secretsOf(wrong)) expect(refused.message).not.toContain(secret);
      expect(anonymous.message).toContain(
        'answered 401 (the registry requires credentials, and none were given)',
      );
    });

    it('sends Basic credentials when the registry asks for them, and blanks them in what it echoes', async () => {
      gate = await AuthGate.start(registry.address, 'basic', { echoAuthorization: true });
      const path = 'team/app';
      gate.addUser(robot, { [path]: ['pull', 'push'] });
      gate.addUser(reader, { [path]: ['pull'] });
      const image = await pushImage(path, `v-${randomUUID().slice(0, 6)}`);
      const repository = { host: gate.address, path };

      const attached = await new OciReferrers({ insecure: true, credentials: robot }).attach(
        repository,
        image,
        provenance(),
      );
      const denied = await failure(
        new OciReferrers({ insecure: true, credentials: reader }).attach(repository, image, sbom()),
      );

      expect(await tagIndex(path, image.digest)).toMatchObject({
        manifests: [{ digest: attached.digest }],
      });
      expect(denied.status).toBe(403);
      expect(denied.message).toContain('denied for Basic ***');
      for (const secret of secretsOf(reader)) expect(denied.message).not.toContain(secret);
    });

    it('follows a blob redirect to storage without the Authorization header', async () => {
      const storage = await StorageServer.start(base);
      try {
        gate = await AuthGate.start(registry.address, 'bearer', { blobsAt: storage.url });
        const path = 'team/app';
        gate.addUser(robot, { [path]: ['pull', 'push'] });
        const image = await pushImage(path, `v-${randomUUID().slice(0, 6)}`);
        const artifact = provenance(randomUUID());
        await new OciReferrers({ insecure: true }).attach(
          { host: registry.address, path },
          image,
          artifact,
        );

        const content = await new OciReferrers({ insecure: true, credentials: robot }).blob(
          { host: gate.address, path },
          sha256(artifact.content),
        );

        expect(content).toEqual(artifact.content);
        expect(storage.requests).toEqual([
          { path: `/${path}/${sha256(artifact.content)}`, authorization: undefined },
        ]);
      } finally {
        await storage.stop();
      }
    });
  });
});

interface Incoming {
  readonly method: string;
  /** Path and query. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

type Intercept = (
  incoming: Incoming,
  forward: (incoming: Incoming) => Promise<Reply>,
) => Promise<Reply>;

/**
 * An HTTP proxy in front of the real registry whose answers a test may change. The Host header
 * is passed on, so the registry writes its upload Locations to the proxy.
 */
class TestProxy {
  private constructor(private readonly server: Server) {}

  static async start(upstream: string, intercept: Intercept): Promise<TestProxy> {
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const incoming: Incoming = {
          method: request.method ?? 'GET',
          path: request.url ?? '/',
          headers: request.headers,
          body: Buffer.concat(chunks),
        };
        intercept(incoming, (what) => forward(upstream, what)).then(
          (reply) => {
            const headers: IncomingHttpHeaders = { ...reply.headers };
            delete headers['transfer-encoding'];
            delete headers.connection;
            if (incoming.method !== 'HEAD') headers['content-length'] = String(reply.body.length);
            response.writeHead(reply.status, headers);
            response.end(incoming.method === 'HEAD' ? undefined : reply.body);
          },
          (error: unknown) => response.writeHead(502).end(String(error)),
        );
      });
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return new TestProxy(server);
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((done) => this.server.close(() => done()));
    this.server.closeAllConnections();
    await closed;
  }
}

function forward(upstream: string, incoming: Incoming): Promise<Reply> {
  const headers: IncomingHttpHeaders = { ...incoming.headers };
  delete headers.authorization;
  delete headers.connection;
  headers['content-length'] = String(incoming.body.length);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      `http://${upstream}${incoming.path}`,
      { method: incoming.method, headers },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 502,
            headers: response.headers,
            body: Buffer.concat(chunks),
          }),
        );
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(incoming.body);
  });
}

type Action = 'pull' | 'push';

/**
 * The real registry behind a gate that asks for auth as Docker Hub, Harbor and distribution's
 * token auth do: `bearer` answers 401 with `Bearer realm="<gate>/token",service=...,scope=...`,
 * and its token service grants the requested actions the user holds (GET and HEAD need pull,
 * the rest push); `basic` answers 401 `Basic realm=...` and 403 for an action the user lacks.
 * `echoAuthorization` puts the Authorization header it got into its error messages, as some
 * registries and proxies do.
 */
class AuthGate {
  readonly requests: { method: string; path: string; authorization?: string }[] = [];
  readonly issuedTokens: string[] = [];
  readonly grantedScopes: string[] = [];
  private readonly users = new Map<
    string,
    { password: string; access: Record<string, Action[]> }
  >();
  private readonly tokens = new Map<string, Record<string, Action[]>>();
  private proxy!: TestProxy;

  private constructor(
    private readonly mode: 'bearer' | 'basic',
    private readonly options: { echoAuthorization?: boolean; blobsAt?: string },
  ) {}

  static async start(
    upstream: string,
    mode: 'bearer' | 'basic',
    options: { echoAuthorization?: boolean; blobsAt?: string } = {},
  ): Promise<AuthGate> {
    const gate = new AuthGate(mode, options);
    gate.proxy = await TestProxy.start(upstream, (incoming, next) => gate.handle(incoming, next));
    return gate;
  }

  get address(): string {
    return this.proxy.address;
  }

  addUser(credentials: { username: string; password: string }, access: Record<string, Action[]>) {
    this.users.set(credentials.username, { password: credentials.password, access });
  }

  stop(): Promise<void> {
    return this.proxy.stop();
  }

  private async handle(incoming: Incoming, next: (incoming: Incoming) => Promise<Reply>) {
    const url = new URL(incoming.path, `http://${this.address}`);
    const authorization = incoming.headers.authorization;
    this.requests.push({
      method: incoming.method,
      path: url.pathname,
      ...(authorization === undefined ? {} : { authorization }),
    });
    if (url.pathname === '/token' && this.mode === 'bearer') return this.token(url, authorization);
    const route = /^\/v2\/(.+?)\/(manifests|blobs|referrers|tags)\//.exec(url.pathname);
    if (route === null) return json(404, { errors: [{ code: 'NOT_FOUND', message: 'no route' }] });
    const repository = route[1]!;
    const action: Action = ['GET', 'HEAD'].includes(incoming.method) ? 'pull' : 'push';
    const echo = this.options.echoAuthorization === true && authorization !== undefined;
    const said = (message: string) => (echo ? `${message} for ${authorization}` : message);

    if (this.mode === 'basic') {
      const user = this.basicUser(authorization);
      if (user === undefined) {
        return json(
          401,
          { errors: [{ code: 'UNAUTHORIZED', message: said('authentication required') }] },
          {
            'www-authenticate': 'Basic realm="gate"',
          },
        );
      }
      if (!(user.access[repository] ?? []).includes(action)) {
        return json(403, {
          errors: [{ code: 'DENIED', message: said('requested access to the resource is denied') }],
        });
      }
    } else {
      const grants = authorization?.startsWith('Bearer ')
        ? this.tokens.get(authorization.slice(7))
        : undefined;
      if (!(grants?.[repository] ?? []).includes(action)) {
        const scope = `repository:${repository}:${action === 'push' ? 'pull,push' : 'pull'}`;
        const error = grants === undefined ? '' : ',error="insufficient_scope"';
        return json(
          401,
          { errors: [{ code: 'UNAUTHORIZED', message: said('insufficient scope') }] },
          {
            'www-authenticate': `Bearer realm="http://${this.address}/token",service="gate",scope="${scope}"${error}`,
          },
        );
      }
    }
    if (this.options.blobsAt !== undefined && route[2] === 'blobs' && incoming.method === 'GET') {
      const digest = url.pathname.split('/').at(-1)!;
      return {
        status: 307,
        headers: { location: `${this.options.blobsAt}/${repository}/${digest}` },
        body: Buffer.alloc(0),
      };
    }
    return next(incoming);
  }

  private token(url: URL, authorization: string | undefined): Reply {
    const user = this.basicUser(authorization);
    if (authorization !== undefined && user === undefined)
      return json(401, { details: 'incorrect username or password' });
    const grants: Record<string, Action[]> = {};
    for (const scope of url.searchParams.getAll('scope')) {
      this.grantedScopes.push(scope);
      const [, repository = '', actions = ''] = scope.split(':');
      const held = user?.access[repository] ?? [];
      grants[repository] = actions
        .split(',')
        .filter((a): a is Action => held.includes(a as Action));
    }
    const token = randomBytes(16).toString('hex');
    this.tokens.set(token, grants);
    this.issuedTokens.push(token);
    return json(200, { token, expires_in: 300 });
  }

  private basicUser(authorization: string | undefined) {
    if (authorization?.startsWith('Basic ') !== true) return undefined;
    const [name = '', password] = Buffer.from(authorization.slice(6), 'base64')
      .toString()
      .split(':');
    const user = this.users.get(name);
    return user !== undefined && user.password === password ? user : undefined;
  }
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json', ...headers },
    body: Buffer.from(JSON.stringify(body)),
  };
}

/** Object storage a registry redirects blob downloads to: serves blobs from the registry. */
class StorageServer {
  private constructor(
    private readonly server: Server,
    readonly requests: { path: string; authorization: string | undefined }[],
  ) {}

  static async start(registryBase: string): Promise<StorageServer> {
    const requests: StorageServer['requests'] = [];
    const server = createServer((request, response) => {
      const path = request.url ?? '/';
      requests.push({ path, authorization: request.headers.authorization });
      const digest = path.split('/').at(-1)!;
      const repository = path.slice(1, path.lastIndexOf('/'));
      fetch(`${registryBase}/v2/${repository}/blobs/${digest}`)
        .then(async (blob) =>
          response.writeHead(blob.status).end(Buffer.from(await blob.arrayBuffer())),
        )
        .catch((error: unknown) => response.writeHead(502).end(String(error)));
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return new StorageServer(server, requests);
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((done) => this.server.close(() => done()));
    this.server.closeAllConnections();
    await closed;
  }
}
