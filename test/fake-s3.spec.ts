import { createHash, createHmac } from 'node:crypto';
import { FakeS3, type SignedRequest, signedFetch } from './support/fake-s3.js';
import { canonicalRequest, signingKey, stringToSign } from './support/sigv4.js';

// Pins the wire shapes FakeS3 relies on by talking to it with plain fetch and a signer that is
// not the AWS SDK, so the fake cannot drift towards whatever the SDK happens to accept.

const USER = { accessKeyId: 'AKIDKILNTEST', secretAccessKey: 'kiln-test-secret' };
const REGION = 'eu-west-1';
const MiB = 1024 * 1024;

let fake: FakeS3;

beforeEach(async () => {
  fake = await FakeS3.start({
    region: REGION,
    users: [USER, { accessKeyId: 'AKIDOTHER', secretAccessKey: 'other', buckets: ['elsewhere'] }],
    buckets: ['images', 'elsewhere'],
  });
});
afterEach(() => fake.stop());

const send = (request: SignedRequest, credentials: Partial<typeof USER> = {}) =>
  signedFetch(fake.url, request, { ...USER, ...credentials, region: REGION });
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest();
const md5 = (data: Buffer) => createHash('md5').update(data).digest();
const errorCode = async (response: Response) =>
  /<Error><Code>([^<]+)<\/Code><Message>[^<]+<\/Message>/.exec(await response.text())?.[1];
const xmlField = (text: string, name: string) =>
  new RegExp(`<${name}>([^<]*)</${name}>`).exec(text)?.[1];

async function createUpload(key: string): Promise<string> {
  const response = await send({
    method: 'POST',
    target: `/images/${key}?uploads=`,
    headers: { 'x-amz-checksum-algorithm': 'SHA256', 'content-type': 'application/x-tar' },
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('x-amz-checksum-algorithm')).toBe('SHA256');
  return xmlField(await response.text(), 'UploadId')!;
}

function uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer) {
  return send({
    method: 'PUT',
    target: `/images/${key}?partNumber=${partNumber}&uploadId=${uploadId}`,
    headers: { 'x-amz-checksum-sha256': sha256(body).toString('base64') },
    body,
  });
}

function completeBody(parts: { n: number; etag: string; checksum?: string }[]): string {
  const xml = parts
    .map(
      ({ n, etag, checksum }) =>
        `<Part><ETag>${etag.replace(/"/g, '&quot;')}</ETag>${checksum === undefined ? '' : `<ChecksumSHA256>${checksum}</ChecksumSHA256>`}<PartNumber>${n}</PartNumber></Part>`,
    )
    .join('');
  return `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${xml}</CompleteMultipartUpload>`;
}

describe(FakeS3.name, () => {
  it('signs the GET Object example of the S3 SigV4 documentation as documented', () => {
    // https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html: the fake
    // verifies and signedFetch signs with sigv4.ts in S3's mode (the path as sent).
    const emptyHash = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
    const headers = {
      host: 'examplebucket.s3.amazonaws.com',
      range: 'bytes=0-9',
      'x-amz-content-sha256': emptyHash,
      'x-amz-date': '20130524T000000Z',
    };
    const canonical = canonicalRequest(
      { method: 'GET', path: '/test.txt', query: '', headers },
      Object.keys(headers),
      emptyHash,
      false,
    );
    const key = signingKey(
      'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      '20130524',
      'us-east-1',
      's3',
    );
    const toSign = stringToSign(
      '20130524T000000Z',
      '20130524/us-east-1/s3/aws4_request',
      canonical,
    );

    expect(createHmac('sha256', key).update(toSign).digest('hex')).toBe(
      'f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41',
    );
  });

  it('answers HeadBucket 200 for an existing bucket', async () => {
    const response = await send({ method: 'HEAD', target: '/images/' });

    expect(response.status).toBe(200);
    expect(response.headers.get('x-amz-bucket-region')).toBe(REGION);
  });

  it('answers HeadBucket 404 without a body for a missing bucket', async () => {
    const response = await send({ method: 'HEAD', target: '/missing/' });

    expect(response.status).toBe(404);
    expect(await response.text()).toBe('');
  });

  it('refuses a request without an Authorization header with AccessDenied', async () => {
    const response = await fetch(`${fake.url}/images/key`);

    expect(response.status).toBe(403);
    expect(response.headers.get('content-type')).toBe('application/xml');
    expect(await errorCode(response)).toBe('AccessDenied');
  });

  it('refuses an unknown access key with InvalidAccessKeyId', async () => {
    const response = await send({ method: 'GET', target: '/images/key' }, { accessKeyId: 'AKIDX' });

    expect(response.status).toBe(403);
    expect(await errorCode(response)).toBe('InvalidAccessKeyId');
  });

  it('refuses a signature made with another secret key with SignatureDoesNotMatch', async () => {
    const response = await send({ method: 'GET', target: '/images/key' }, { secretAccessKey: 'x' });

    expect(response.status).toBe(403);
    expect(await errorCode(response)).toBe('SignatureDoesNotMatch');
  });

  it('refuses a signature scoped to another region with AuthorizationHeaderMalformed', async () => {
    const response = await signedFetch(
      fake.url,
      { method: 'GET', target: '/images/key' },
      { ...USER, region: 'us-east-1' },
    );

    expect(response.status).toBe(400);
    expect(await errorCode(response)).toBe('AuthorizationHeaderMalformed');
  });

  it('refuses a request signed more than 15 minutes ago with RequestTimeTooSkewed', async () => {
    const response = await signedFetch(
      fake.url,
      { method: 'GET', target: '/images/key' },
      { ...USER, region: REGION },
      new Date(Date.now() - 20 * 60 * 1000),
    );

    expect(await errorCode(response)).toBe('RequestTimeTooSkewed');
  });

  it('refuses an x-amz- header left out of the signature', async () => {
    const request = { method: 'GET', target: '/images/key' };
    const signed = await send(request);
    expect(signed.status).toBe(404); // signed correctly, the key does not exist
    const sentHeaders = fake.requests.at(-1)!.headers;

    const response = await fetch(`${fake.url}/images/key`, {
      headers: {
        authorization: sentHeaders.authorization!,
        'x-amz-date': sentHeaders['x-amz-date'] as string,
        'x-amz-content-sha256': sentHeaders['x-amz-content-sha256'] as string,
        'x-amz-meta-extra': 'unsigned',
      },
    });

    expect(response.status).toBe(403);
    expect(await errorCode(response)).toBe('AccessDenied');
  });

  it('refuses a body whose SHA-256 is not the signed payload hash with XAmzContentSHA256Mismatch', async () => {
    const response = await send({
      method: 'PUT',
      target: '/images/key',
      headers: { 'x-amz-content-sha256': sha256(Buffer.from('other')).toString('hex') },
      body: 'content',
    });

    expect(response.status).toBe(400);
    expect(await errorCode(response)).toBe('XAmzContentSHA256Mismatch');
    expect(fake.object('images', 'key')).toBeUndefined();
  });

  it('answers a chunked STREAMING payload 501 NotImplemented rather than storing it wrongly', async () => {
    const response = await send({
      method: 'PUT',
      target: '/images/key',
      headers: { 'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER' },
      body: 'a\r\ncontent',
    });

    expect(response.status).toBe(501);
    expect(await errorCode(response)).toBe('NotImplemented');
  });

  it('stores a PutObject body with its metadata and an UNSIGNED-PAYLOAD', async () => {
    const body = Buffer.from('image bytes');
    const response = await send({
      method: 'PUT',
      target: '/images/dir/a%20b.tar',
      headers: {
        'content-type': 'application/x-tar',
        'content-md5': md5(body).toString('base64'),
        'x-amz-checksum-sha256': sha256(body).toString('base64'),
        'x-amz-meta-oci-digest': 'sha256:abc',
        'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
      },
      body,
    });

    expect(response.status).toBe(200);
    expect(response.headers.get('etag')).toBe(`"${md5(body).toString('hex')}"`);
    const stored = await send({
      method: 'GET',
      target: '/images/dir/a%20b.tar',
      headers: { 'x-amz-checksum-mode': 'ENABLED' },
    });
    expect(Buffer.from(await stored.arrayBuffer())).toEqual(body);
    expect(stored.headers.get('content-type')).toBe('application/x-tar');
    expect(stored.headers.get('x-amz-meta-oci-digest')).toBe('sha256:abc');
    expect(stored.headers.get('x-amz-checksum-sha256')).toBe(sha256(body).toString('base64'));
    expect(stored.headers.get('x-amz-checksum-type')).toBe('FULL_OBJECT');
  });

  it.each([
    ['content-md5', md5(Buffer.from('other')).toString('base64')],
    ['x-amz-checksum-sha256', sha256(Buffer.from('other')).toString('base64')],
  ])('refuses a PutObject whose %s does not match the body with BadDigest', async (name, value) => {
    const response = await send({
      method: 'PUT',
      target: '/images/key',
      headers: { [name]: value },
      body: 'content',
    });

    expect(response.status).toBe(400);
    expect(await errorCode(response)).toBe('BadDigest');
    expect(fake.object('images', 'key')).toBeUndefined();
  });

  it('refuses a bucket the user may not use with AccessDenied', async () => {
    const response = await send(
      { method: 'GET', target: '/images/key' },
      { accessKeyId: 'AKIDOTHER', secretAccessKey: 'other' },
    );

    expect(response.status).toBe(403);
    expect(await errorCode(response)).toBe('AccessDenied');
  });

  it('refuses an object in a missing bucket with NoSuchBucket', async () => {
    const response = await send({ method: 'PUT', target: '/missing/key', body: 'x' });

    expect(response.status).toBe(404);
    expect(await errorCode(response)).toBe('NoSuchBucket');
  });

  it('assembles a multipart upload and answers the composite SHA-256 of its parts', async () => {
    const parts = [Buffer.alloc(5 * MiB, 1), Buffer.alloc(1000, 2)];
    const uploadId = await createUpload('image.tar');
    const uploaded = [];
    for (const [index, part] of parts.entries()) {
      const response = await uploadPart('image.tar', uploadId, index + 1, part);
      expect(response.status).toBe(200);
      expect(response.headers.get('x-amz-checksum-sha256')).toBe(sha256(part).toString('base64'));
      uploaded.push({
        n: index + 1,
        etag: response.headers.get('etag')!,
        checksum: sha256(part).toString('base64'),
      });
    }

    const response = await send({
      method: 'POST',
      target: `/images/image.tar?uploadId=${uploadId}`,
      body: completeBody(uploaded),
    });

    expect(response.status).toBe(200);
    const text = await response.text();
    const composite = sha256(Buffer.concat(parts.map(sha256))).toString('base64');
    expect(xmlField(text, 'ChecksumSHA256')).toBe(`${composite}-2`);
    expect(xmlField(text, 'ChecksumType')).toBe('COMPOSITE');
    expect(xmlField(text, 'ETag')).toBe(
      `&quot;${md5(Buffer.concat(parts.map(md5))).toString('hex')}-2&quot;`,
    );
    // Buffer.equals: jest's toEqual walks a 5 MiB buffer byte by byte for a minute.
    expect(fake.object('images', 'image.tar')?.body.equals(Buffer.concat(parts))).toBe(true);
    expect(fake.object('images', 'image.tar')?.contentType).toBe('application/x-tar');
    expect(fake.pendingUploads('images')).toEqual([]);
  });

  it('refuses a part without the SHA-256 checksum its upload was created with', async () => {
    const uploadId = await createUpload('image.tar');

    const response = await send({
      method: 'PUT',
      target: `/images/image.tar?partNumber=1&uploadId=${uploadId}`,
      body: 'part',
    });

    expect(response.status).toBe(400);
    expect(await errorCode(response)).toBe('InvalidRequest');
  });

  it('refuses to complete with parts out of order, a wrong ETag or a small middle part', async () => {
    const uploadId = await createUpload('image.tar');
    const small = Buffer.alloc(10, 1);
    const parts = [];
    for (const n of [1, 2]) {
      const response = await uploadPart('image.tar', uploadId, n, small);
      parts.push({
        n,
        etag: response.headers.get('etag')!,
        checksum: sha256(small).toString('base64'),
      });
    }
    const complete = (body: string) =>
      send({ method: 'POST', target: `/images/image.tar?uploadId=${uploadId}`, body });

    expect(await errorCode(await complete(completeBody([parts[1]!, parts[0]!])))).toBe(
      'InvalidPartOrder',
    );
    expect(await errorCode(await complete(completeBody([{ ...parts[0]!, etag: '"x"' }])))).toBe(
      'InvalidPart',
    );
    expect(
      await errorCode(await complete(completeBody(parts.map(({ n, etag }) => ({ n, etag }))))),
    ).toBe('InvalidRequest');
    expect(await errorCode(await complete(completeBody(parts)))).toBe('EntityTooSmall');
    expect(await errorCode(await complete('<Nonsense/>'))).toBe('MalformedXML');
    expect(fake.pendingUploads('images')).toHaveLength(1);
  });

  it('lists unfinished multipart uploads until they are aborted', async () => {
    const uploadId = await createUpload('left/behind.tar');
    const list = async () =>
      (await (await send({ method: 'GET', target: '/images/?uploads=' })).text()).match(
        /<UploadId>[^<]+<\/UploadId>/g,
      ) ?? [];
    expect(await list()).toEqual([`<UploadId>${uploadId}</UploadId>`]);

    const aborted = await send({
      method: 'DELETE',
      target: `/images/left/behind.tar?uploadId=${uploadId}`,
    });

    expect(aborted.status).toBe(204);
    expect(await list()).toEqual([]);
    const again = await send({
      method: 'DELETE',
      target: `/images/left/behind.tar?uploadId=${uploadId}`,
    });
    expect(await errorCode(again)).toBe('NoSuchUpload');
  });

  it('fails the next requests as told, then answers normally', async () => {
    fake.failNext(503, 2);

    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await send({ method: 'HEAD', target: '/images/' })).status);

    expect(statuses).toEqual([503, 503, 200]);
    fake.failNext(500);
    expect(await errorCode(await send({ method: 'GET', target: '/images/x' }))).toBe(
      'InternalError',
    );
  });

  it('fails one part number once, after authenticating it', async () => {
    const uploadId = await createUpload('image.tar');
    fake.failPart(2);
    const part = Buffer.from('part');

    const statuses = [];
    for (const n of [1, 2, 2])
      statuses.push((await uploadPart('image.tar', uploadId, n, part)).status);

    expect(statuses).toEqual([200, 500, 200]);
    expect(fake.pendingUploads('images')).toEqual([{ key: 'image.tar', uploadId, parts: 2 }]);
  });

  it('records a request it hangs on and never answers it', async () => {
    fake.hang = true;

    await expect(
      fetch(`${fake.url}/images/`, { method: 'HEAD', signal: AbortSignal.timeout(200) }),
    ).rejects.toThrow();
    expect(fake.operations('HeadBucket')).toHaveLength(1);
    expect(fake.operations('HeadBucket')[0]!.status).toBeUndefined();
  });
});
