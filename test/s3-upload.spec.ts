import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RegistryUnauthorizedError, RegistryUnavailableError } from '../src/registries/registry.js';
import { OciLayoutError } from '../src/registries/oci-layout.js';
import {
  S3ImageStore,
  type S3StoreSettings,
  S3_MIN_PART_SIZE,
  s3ImageKey,
} from '../src/registries/s3-upload.js';
import type { ResolveLimits } from '../src/secret-managers/secret-manager.js';
import { FakeS3, signedFetch } from './support/fake-s3.js';

// The real @aws-sdk/client-s3 and @aws-sdk/lib-storage against FakeS3 (test/support/fake-s3.ts).

const USER = { accessKeyId: 'AKIDKILNUPLOAD', secretAccessKey: 'upload-secret-do-not-print' };
const REGION = 'eu-central-1';
const BUCKET = 'kiln-images';
const KEY = 'images/shop/7-0123456789ab.oci.tar';
const LIMITS: ResolveLimits = { timeoutMs: 5_000, attempts: 3 };

let root: string;
let fake: FakeS3;
let bigLayout: { path: string; digest: string };
let smallLayout: { path: string; digest: string };

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();

/** An OCI layout tarball, written with GNU tar, whose one layer holds `layerBytes` random bytes. */
function writeLayoutTar(name: string, layerBytes: number): { path: string; digest: string } {
  const dir = join(root, name);
  mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
  const blob = (content: Buffer | string) => {
    const hex = sha256(content).toString('hex');
    writeFileSync(join(dir, 'blobs', 'sha256', hex), content);
    return { digest: `sha256:${hex}`, size: Buffer.byteLength(content) };
  };
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...blob('{}') },
    layers: [
      { mediaType: 'application/vnd.oci.image.layer.v1.tar', ...blob(randomBytes(layerBytes)) },
    ],
  });
  const descriptor = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...blob(manifest) };
  writeFileSync(join(dir, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
  writeFileSync(
    join(dir, 'index.json'),
    JSON.stringify({ schemaVersion: 2, manifests: [descriptor] }),
  );
  const path = join(root, `${name}.tar`);
  execFileSync('tar', ['-C', dir, '-cf', path, '.']);
  return { path, digest: descriptor.digest };
}

function writeCredentials(secretAccessKey = USER.secretAccessKey, accessKeyId = USER.accessKeyId) {
  const path = join(root, `credentials-${Math.random().toString(36).slice(2)}`);
  writeFileSync(
    path,
    `[kiln]\naws_access_key_id = ${accessKeyId}\naws_secret_access_key = ${secretAccessKey}\n`,
  );
  return path;
}

function store(
  settings: Partial<S3StoreSettings> = {},
  limits: ResolveLimits = LIMITS,
): S3ImageStore {
  return new S3ImageStore(
    {
      bucket: BUCKET,
      region: REGION,
      endpoint: fake.url,
      forcePathStyle: true,
      credentialsFile: writeCredentials(),
      profile: 'kiln',
      ...settings,
    },
    limits,
    { partSize: S3_MIN_PART_SIZE },
  );
}

/** The multipart uploads S3 still holds for the bucket, as ListMultipartUploads reports them. */
async function listedUploads(): Promise<string[]> {
  const response = await signedFetch(
    fake.url,
    { method: 'GET', target: `/${BUCKET}/?uploads=` },
    { ...USER, region: REGION },
  );
  expect(response.status).toBe(200);
  return [...(await response.text()).matchAll(/<UploadId>([^<]+)<\/UploadId>/g)].map((m) => m[1]!);
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'kiln-s3-upload-'));
  bigLayout = writeLayoutTar('big', 12 * 1024 * 1024);
  smallLayout = writeLayoutTar('small', 4096);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

beforeEach(async () => {
  fake = await FakeS3.start({ region: REGION, users: [USER], buckets: [BUCKET, 'other'] });
});
afterEach(() => fake.stop());

describe(S3ImageStore.name, () => {
  it('uploads a 12 MiB layout in three parts, each carrying its SHA-256', async () => {
    const file = readFileSync(bigLayout.path);
    const parts = [0, 1, 2].map((n) =>
      file.subarray(n * S3_MIN_PART_SIZE, (n + 1) * S3_MIN_PART_SIZE),
    );

    const result = await store().upload(bigLayout.path, { key: KEY });

    const composite = `${sha256(Buffer.concat(parts.map((p) => sha256(p)))).toString('base64')}-3`;
    expect(result).toEqual({
      uri: `s3://${BUCKET}/${KEY}`,
      digest: bigLayout.digest,
      size: file.length,
      checksumSha256: composite,
    });
    const sentChecksums = fake
      .operations('UploadPart')
      .map((r) => [Number(r.query['partNumber']), r.headers['x-amz-checksum-sha256']])
      .sort(([a], [b]) => Number(a) - Number(b));
    expect(sentChecksums).toEqual(parts.map((p, i) => [i + 1, sha256(p).toString('base64')]));
    const object = fake.object(BUCKET, KEY)!;
    expect(object.body.equals(file)).toBe(true);
    expect(object.checksumSha256).toBe(composite);
    expect(object.metadata).toEqual({ 'oci-digest': bigLayout.digest });
    expect(object.contentType).toBe('application/vnd.oci.image.layout.v1+tar');
    expect(await listedUploads()).toEqual([]);
  });

  it('uploads a layout smaller than one part in a single PutObject with its SHA-256', async () => {
    const file = readFileSync(smallLayout.path);

    const result = await store().upload(smallLayout.path, { key: KEY });

    expect(result.checksumSha256).toBe(sha256(file).toString('base64'));
    expect(result.digest).toBe(smallLayout.digest);
    expect(fake.operations('PutObject')).toHaveLength(1);
    expect(fake.operations('CreateMultipartUpload')).toHaveLength(0);
    expect(fake.object(BUCKET, KEY)?.body.equals(file)).toBe(true);
    expect(fake.object(BUCKET, KEY)?.metadata['oci-digest']).toBe(smallLayout.digest);
  });

  it('retries a part that fails with 500 once and completes the upload', async () => {
    fake.failPart(2);

    await store().upload(bigLayout.path, { key: KEY });

    const partTwo = fake.operations('UploadPart').filter((r) => r.query['partNumber'] === '2');
    expect(partTwo.map((r) => r.status)).toEqual([500, 200]);
    expect(fake.object(BUCKET, KEY)?.body.equals(readFileSync(bigLayout.path))).toBe(true);
  });

  it('rejects with RegistryUnavailableError and leaves no parts when a part keeps failing', async () => {
    fake.failPart(2, 100);

    const upload = store().upload(bigLayout.path, { key: KEY });

    await expect(upload).rejects.toThrow(RegistryUnavailableError);
    await expect(upload).rejects.toThrow(`s3://${BUCKET}/${KEY}`);
    expect(await listedUploads()).toEqual([]);
    expect(fake.object(BUCKET, KEY)).toBeUndefined();
  });

  it('rejects with RegistryUnavailableError when S3 reports a checksum other than kiln computed', async () => {
    fake.misreportChecksum = true;

    await expect(store().upload(bigLayout.path, { key: KEY })).rejects.toThrow(
      'S3 stored a checksum other than kiln computed',
    );
  });

  it('rejects a wrong secret key with RegistryUnauthorizedError naming the object, not the key', async () => {
    const upload = store({ credentialsFile: writeCredentials('not-the-secret') }).upload(
      bigLayout.path,
      { key: KEY },
    );

    await expect(upload).rejects.toThrow(RegistryUnauthorizedError);
    const error = (await upload.catch((e: unknown) => e)) as Error;
    expect(error.message).toContain(`s3://${BUCKET}/${KEY}`);
    expect(error.message).toContain('SignatureDoesNotMatch');
    expect(error.message).not.toContain('not-the-secret');
    expect(error.cause).toBeUndefined();
  });

  it('rejects an unknown access key with RegistryUnauthorizedError', async () => {
    const credentialsFile = writeCredentials(USER.secretAccessKey, 'AKIDUNKNOWN');

    await expect(store({ credentialsFile }).upload(smallLayout.path, { key: KEY })).rejects.toThrow(
      RegistryUnauthorizedError,
    );
  });

  it('rejects credentials that may not write to the bucket with RegistryUnauthorizedError', async () => {
    fake.addUser({ accessKeyId: 'AKIDREADER', secretAccessKey: 'reader', buckets: ['other'] });
    const credentialsFile = writeCredentials('reader', 'AKIDREADER');

    await expect(store({ credentialsFile }).upload(bigLayout.path, { key: KEY })).rejects.toThrow(
      /AccessDenied/,
    );
  });

  it('rejects a missing bucket with an error saying the bucket does not exist', async () => {
    const upload = store({ bucket: 'no-such-bucket' }).upload(bigLayout.path, { key: KEY });

    await expect(upload).rejects.toThrow(RegistryUnauthorizedError);
    await expect(upload).rejects.toThrow('the bucket no-such-bucket does not exist');
  });

  it('rejects a profile missing from the credentials file with RegistryUnauthorizedError', async () => {
    await expect(
      store({ profile: 'absent' }).upload(smallLayout.path, { key: KEY }),
    ).rejects.toThrow(RegistryUnauthorizedError);
    expect(fake.requests).toEqual([]);
  });

  it('rejects a region other than the bucket’s with RegistryUnauthorizedError naming it', async () => {
    await expect(
      store({ region: 'us-west-2' }).upload(smallLayout.path, { key: KEY }),
    ).rejects.toThrow('the bucket is not in region us-west-2');
  });

  it('aborts the multipart upload on S3 when the signal aborts mid-upload', async () => {
    const controller = new AbortController();
    fake.onRequest = (request) => {
      if (request.operation === 'UploadPart') controller.abort();
    };

    const upload = store().upload(bigLayout.path, { key: KEY, signal: controller.signal });

    await expect(upload).rejects.toMatchObject({ name: 'AbortError' });
    expect(fake.operations('CreateMultipartUpload')).toHaveLength(1);
    // Once: kiln waits for lib-storage's own abort rather than racing it with a second one.
    expect(fake.operations('AbortMultipartUpload').map((r) => r.status)).toEqual([204]);
    expect(await listedUploads()).toEqual([]);
    expect(fake.object(BUCKET, KEY)).toBeUndefined();
  });

  it('sends nothing when the signal is already aborted', async () => {
    const upload = store().upload(bigLayout.path, { key: KEY, signal: AbortSignal.abort() });

    await expect(upload).rejects.toMatchObject({ name: 'AbortError' });
    expect(fake.requests).toEqual([]);
  });

  it('rejects with RegistryUnavailableError when S3 accepts the connection and never answers', async () => {
    fake.hang = true;

    const upload = store({}, { timeoutMs: 200, attempts: 2 }).upload(bigLayout.path, { key: KEY });

    await expect(upload).rejects.toThrow(RegistryUnavailableError);
    expect(fake.operations('CreateMultipartUpload')).toHaveLength(2);
  });

  it('refuses a tarball that is not an OCI layout before sending anything', async () => {
    const path = join(root, 'not-a-layout.tar');
    writeFileSync(path, 'plain text, not a tarball'.repeat(100));

    await expect(store().upload(path, { key: KEY })).rejects.toThrow(OciLayoutError);
    expect(fake.requests).toEqual([]);
  });

  describe('checkBucket', () => {
    it('resolves for a bucket the credentials may use', async () => {
      await expect(store().checkBucket()).resolves.toBeUndefined();
      expect(fake.operations('HeadBucket').map((r) => r.status)).toEqual([200]);
    });

    it('rejects refused credentials with RegistryUnauthorizedError naming the bucket', async () => {
      const check = store({ credentialsFile: writeCredentials('wrong') }).checkBucket();

      await expect(check).rejects.toThrow(RegistryUnauthorizedError);
      await expect(check).rejects.toThrow(`s3://${BUCKET}: S3 refused kiln's credentials`);
    });

    it('rejects a missing bucket saying it does not exist', async () => {
      await expect(store({ bucket: 'no-such-bucket' }).checkBucket()).rejects.toThrow(
        'the bucket no-such-bucket does not exist',
      );
    });

    it('rejects a region other than the bucket’s with RegistryUnauthorizedError naming it', async () => {
      await expect(store({ region: 'us-west-2' }).checkBucket()).rejects.toThrow(
        'the bucket is not in region us-west-2',
      );
    });

    it('retries a 503 and resolves', async () => {
      fake.failNext(503);

      await expect(store().checkBucket()).resolves.toBeUndefined();
      expect(fake.operations('HeadBucket').map((r) => r.status)).toEqual([503, 200]);
    });

    it('rejects with RegistryUnavailableError when every attempt fails with 500', async () => {
      fake.failNext(500, 10);

      await expect(store().checkBucket()).rejects.toThrow(RegistryUnavailableError);
      expect(fake.operations('HeadBucket')).toHaveLength(LIMITS.attempts);
    });

    it('rejects with RegistryUnavailableError when S3 never answers', async () => {
      fake.hang = true;

      await expect(store({}, { timeoutMs: 200, attempts: 2 }).checkBucket()).rejects.toThrow(
        RegistryUnavailableError,
      );
    });

    it('rejects with RegistryUnavailableError when nothing listens', async () => {
      const address = fake.url;
      await fake.stop();
      fake = await FakeS3.start();

      await expect(
        store({ endpoint: address }, { timeoutMs: 200, attempts: 2 }).checkBucket(),
      ).rejects.toThrow(RegistryUnavailableError);
    });
  });
});

describe('s3ImageKey', () => {
  const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;

  it.each([
    [
      { prefix: 'kiln/images', project: 'shop', buildNumber: 7 },
      'kiln/images/shop/7-0123456789ab.oci.tar',
    ],
    [{ prefix: '/kiln/', project: 'shop', buildNumber: 0 }, 'kiln/shop/0-0123456789ab.oci.tar'],
    [{ project: 'a1b2-c3', buildNumber: 42 }, 'a1b2-c3/42-0123456789ab.oci.tar'],
  ])('names %p %s', (input, key) => {
    expect(s3ImageKey({ ...input, digest })).toBe(key);
  });

  it.each([
    { project: 'a/b', buildNumber: 1, digest },
    { project: '..', buildNumber: 1, digest },
    { project: 'my shop', buildNumber: 1, digest },
    { prefix: 'ok/../up', project: 'shop', buildNumber: 1, digest },
    { project: 'shop', buildNumber: -1, digest },
    { project: 'shop', buildNumber: 1.5, digest },
    { project: 'shop', buildNumber: 1, digest: 'sha256:abc' },
    { project: 'shop', buildNumber: 1, digest: 'latest' },
  ])('refuses %p', (input) => {
    expect(() => s3ImageKey(input)).toThrow(RangeError);
  });
});
