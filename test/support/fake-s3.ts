import { createHash, createHmac, randomUUID } from 'node:crypto';
import {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
  createServer,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type SigV4Failure,
  amzDate,
  canonicalRequest,
  hexSha256,
  signingKey,
  stringToSign,
  verifySigV4,
} from './sigv4.js';

/**
 * A fake Amazon S3 on 127.0.0.1: the path-style REST API, as much of it as @aws-sdk/client-s3
 * and @aws-sdk/lib-storage use to upload one object, with the checks the real service makes.
 *
 * - Authentication, Signature Version 4 in the Authorization header (verified by ./sigv4.ts, with
 *   S3's canonical URI: the path as sent, not encoded twice):
 *   https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
 *   S3 also requires `x-amz-content-sha256` (the payload's hex SHA-256 or `UNSIGNED-PAYLOAD`) and
 *   every `x-amz-*` header to be signed. The chunked
 *   `STREAMING-*` payloads (sigv4-streaming.html) are answered 501: client-s3 3.1164 sends them
 *   only for stream bodies, and lib-storage hands it every part as a Buffer, which the SDK sends
 *   whole with an `x-amz-checksum-sha256` header.
 * - HeadBucket, PutObject, GetObject, HeadObject, ListMultipartUploads, and the multipart upload:
 *   https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateMultipartUpload.html,
 *   API_UploadPart.html, API_CompleteMultipartUpload.html, API_AbortMultipartUpload.html.
 * - Checksums: https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html
 *   (`Content-MD5`, `x-amz-checksum-sha256`; a multipart object's SHA-256 is the composite
 *   `base64(sha256(part digests concatenated))-N`).
 * - Errors: `<Error><Code/><Message/></Error>` (API/ErrorResponses.html); HEAD answers carry no body.
 */

export interface S3User {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** The buckets this user may use; every bucket when absent. Others answer AccessDenied. */
  readonly buckets?: readonly string[];
}

export interface FakeS3Options {
  readonly region?: string;
  readonly users?: readonly S3User[];
  readonly buckets?: readonly string[];
}

export type S3Operation =
  | 'HeadBucket'
  | 'ListMultipartUploads'
  | 'PutObject'
  | 'GetObject'
  | 'HeadObject'
  | 'CreateMultipartUpload'
  | 'UploadPart'
  | 'CompleteMultipartUpload'
  | 'AbortMultipartUpload'
  | 'Unsupported';

export interface RecordedRequest {
  readonly operation: S3Operation;
  readonly method: string;
  readonly path: string;
  readonly query: Readonly<Record<string, string>>;
  readonly headers: IncomingHttpHeaders;
  /** The status the fake answered; undefined while it hangs. */
  status?: number;
}

export interface StoredObject {
  readonly body: Buffer;
  readonly contentType: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly etag: string;
  readonly checksumSha256?: string;
  readonly checksumType?: 'FULL_OBJECT' | 'COMPOSITE';
}

interface Part {
  readonly body: Buffer;
  readonly etag: string;
  readonly md5: Buffer;
  readonly sha256: Buffer;
}

interface MultipartUpload {
  readonly bucket: string;
  readonly key: string;
  readonly initiated: Date;
  readonly contentType: string;
  readonly metadata: Record<string, string>;
  readonly checksumAlgorithm?: 'SHA256';
  readonly parts: Map<number, Part>;
}

/** An S3 error answer. */
class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const MIN_PART_BYTES = 5 * 1024 * 1024;
/** The status and code S3 answers for each way a signature fails. */
const AUTH_ERRORS: Record<SigV4Failure, [number, string]> = {
  missing: [403, 'AccessDenied'],
  malformed: [400, 'AuthorizationHeaderMalformed'],
  'unknown-key': [403, 'InvalidAccessKeyId'],
  expired: [403, 'RequestTimeTooSkewed'],
  scope: [400, 'AuthorizationHeaderMalformed'],
  mismatch: [403, 'SignatureDoesNotMatch'],
};
const STATUS_CODES: Record<number, string> = {
  400: 'InvalidRequest',
  403: 'AccessDenied',
  404: 'NoSuchKey',
  429: 'SlowDown',
  500: 'InternalError',
  503: 'SlowDown',
};

export class FakeS3 {
  /** Every request received, in order of arrival. */
  readonly requests: RecordedRequest[] = [];
  /** Accept every request and never answer it. */
  hang = false;
  /** Answer CompleteMultipartUpload with a SHA-256 checksum other than the object's. */
  misreportChecksum = false;
  /** Called as each request arrives, after it is recorded and before it is answered. */
  onRequest?: (request: RecordedRequest) => void;

  private readonly users = new Map<string, S3User>();
  private readonly buckets = new Map<string, Map<string, StoredObject>>();
  private readonly uploads = new Map<string, MultipartUpload>();
  private failures: { status: number; code: string; remaining: number } | undefined;
  private readonly partFailures = new Map<number, { status: number; remaining: number }>();

  private constructor(
    private readonly server: Server,
    readonly region: string,
  ) {}

  static async start(options: FakeS3Options = {}): Promise<FakeS3> {
    const server = createServer();
    const fake = new FakeS3(server, options.region ?? 'us-east-1');
    for (const user of options.users ?? []) fake.addUser(user);
    for (const bucket of options.buckets ?? []) fake.createBucket(bucket);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      void fake.handle(request, response);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return fake;
  }

  get address(): string {
    const { port } = this.server.address() as AddressInfo;
    return `127.0.0.1:${port}`;
  }

  get url(): string {
    return `http://${this.address}`;
  }

  addUser(user: S3User): void {
    this.users.set(user.accessKeyId, user);
  }

  createBucket(name: string): void {
    if (!this.buckets.has(name)) this.buckets.set(name, new Map());
  }

  /** The next `count` requests answer `status` with `code` (S3's usual code for it by default). */
  failNext(status: number, count = 1, code = STATUS_CODES[status] ?? 'InternalError'): void {
    this.failures = { status, code, remaining: count };
  }

  /** The next `count` uploads of part `partNumber` answer `status` after authentication. */
  failPart(partNumber: number, count = 1, status = 500): void {
    this.partFailures.set(partNumber, { status, remaining: count });
  }

  object(bucket: string, key: string): StoredObject | undefined {
    return this.buckets.get(bucket)?.get(key);
  }

  /** Multipart uploads started and neither completed nor aborted. */
  pendingUploads(bucket: string): { key: string; uploadId: string; parts: number }[] {
    return [...this.uploads]
      .filter(([, upload]) => upload.bucket === bucket)
      .map(([uploadId, upload]) => ({ key: upload.key, uploadId, parts: upload.parts.size }));
  }

  operations(operation: S3Operation): RecordedRequest[] {
    return this.requests.filter((request) => request.operation === operation);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of request) chunks.push(chunk as Buffer);
    } catch {
      return; // the client went away mid-request
    }
    const body = Buffer.concat(chunks);
    const url = new URL(request.url ?? '/', 'http://s3');
    const rawQuery = (request.url ?? '').split('?')[1] ?? '';
    const slash = url.pathname.indexOf('/', 1);
    const bucket = decodeURIComponent(url.pathname.slice(1, slash < 0 ? undefined : slash));
    const key = slash < 0 ? '' : decodeURIComponent(url.pathname.slice(slash + 1));
    const query = Object.fromEntries(url.searchParams);
    const method = request.method ?? 'GET';
    const record: RecordedRequest = {
      operation: operationOf(method, key, query),
      method,
      path: url.pathname,
      query,
      headers: request.headers,
    };
    this.requests.push(record);
    this.onRequest?.(record);
    if (this.hang) return;
    const send = (status: number, headers: Record<string, string>, payload?: Buffer | string) => {
      record.status = status;
      response.writeHead(status, { 'x-amz-request-id': randomUUID(), ...headers });
      response.end(method === 'HEAD' ? undefined : payload);
    };
    try {
      if (this.failures !== undefined && this.failures.remaining > 0) {
        this.failures.remaining -= 1;
        throw new S3Error(this.failures.status, this.failures.code, 'Injected failure.');
      }
      const user = this.authenticate(method, url.pathname, rawQuery, request.headers, body);
      const [status, headers, payload] = this.route(record, user, bucket, key, body);
      send(status, headers, payload);
    } catch (caught) {
      // A bug in the fake answers 500 like S3's own failures, with the reason for the test log.
      const error =
        caught instanceof S3Error ? caught : new S3Error(500, 'InternalError', String(caught));
      send(
        error.status,
        XML_TYPE,
        xml('Error', { Code: error.code, Message: error.message, Resource: url.pathname }),
      );
    }
  }

  /** Checks the SigV4 Authorization header and the payload hash; returns the caller. */
  private authenticate(
    method: string,
    path: string,
    rawQuery: string,
    headers: IncomingHttpHeaders,
    body: Buffer,
  ): S3User {
    const bodySha256 = hexSha256(body);
    const payloadHash = header(headers, 'x-amz-content-sha256');
    const verdict = verifySigV4(
      { method, path, query: rawQuery, headers, bodySha256 },
      {
        region: this.region,
        service: 's3',
        secretKeyFor: (accessKeyId) => this.users.get(accessKeyId)?.secretAccessKey,
        uriEscapePath: false,
      },
    );
    if (!verdict.ok) {
      // verifySigV4 compares the claimed payload hash before the signature; S3 names it apart.
      if (
        verdict.reason === 'mismatch' &&
        payloadHash !== undefined &&
        payloadHash !== bodySha256 &&
        !/^(UNSIGNED-PAYLOAD|STREAMING-.*)$/.test(payloadHash)
      ) {
        throw new S3Error(400, 'XAmzContentSHA256Mismatch', verdict.message);
      }
      const [status, code] = AUTH_ERRORS[verdict.reason];
      throw new S3Error(status, code, verdict.message);
    }
    if (payloadHash === undefined) {
      throw new S3Error(
        400,
        'InvalidRequest',
        'Missing required header for this request: x-amz-content-sha256',
      );
    }
    const signed = /SignedHeaders=([^,\s]+)/
      .exec(header(headers, 'authorization')!)![1]!
      .split(';');
    if (Object.keys(headers).some((name) => name.startsWith('x-amz-') && !signed.includes(name))) {
      throw new S3Error(
        403,
        'AccessDenied',
        'There were headers present in the request which were not signed',
      );
    }
    if (payloadHash.startsWith('STREAMING-')) {
      throw new S3Error(501, 'NotImplemented', `This fake does not decode ${payloadHash} bodies.`);
    }
    return this.users.get(verdict.accessKeyId)!;
  }

  private route(
    record: RecordedRequest,
    user: S3User,
    bucketName: string,
    key: string,
    body: Buffer,
  ): [number, Record<string, string>, (Buffer | string)?] {
    const bucket = this.buckets.get(bucketName);
    if (bucket === undefined) {
      throw new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist');
    }
    if (user.buckets !== undefined && !user.buckets.includes(bucketName)) {
      throw new S3Error(403, 'AccessDenied', 'Access Denied');
    }
    const { headers, query } = record;
    switch (record.operation) {
      case 'HeadBucket':
        return [200, { 'x-amz-bucket-region': this.region }];
      case 'ListMultipartUploads':
        return [200, XML_TYPE, this.listUploads(bucketName, query['prefix'] ?? '')];
      case 'PutObject': {
        const checksum = verifyChecksums(headers, body);
        const object: StoredObject = {
          body,
          contentType: header(headers, 'content-type') ?? 'binary/octet-stream',
          metadata: metadataOf(headers),
          etag: `"${md5(body).toString('hex')}"`,
          ...(checksum && { checksumSha256: checksum, checksumType: 'FULL_OBJECT' as const }),
        };
        bucket.set(key, object);
        return [200, { etag: object.etag, ...checksumHeaders(object) }];
      }
      case 'GetObject':
      case 'HeadObject': {
        const object = bucket.get(key);
        if (object === undefined)
          throw new S3Error(404, 'NoSuchKey', 'The specified key does not exist.');
        const withChecksum = header(headers, 'x-amz-checksum-mode') === 'ENABLED';
        return [
          200,
          {
            'content-type': object.contentType,
            'content-length': String(object.body.length),
            etag: object.etag,
            ...Object.fromEntries(
              Object.entries(object.metadata).map(([name, value]) => [`x-amz-meta-${name}`, value]),
            ),
            ...(withChecksum ? checksumHeaders(object) : {}),
          },
          object.body,
        ];
      }
      case 'CreateMultipartUpload': {
        const algorithm = header(headers, 'x-amz-checksum-algorithm');
        if (algorithm !== undefined && algorithm !== 'SHA256') {
          throw new S3Error(
            501,
            'NotImplemented',
            `This fake supports SHA256 checksums only, not ${algorithm}.`,
          );
        }
        const uploadId = randomUUID();
        this.uploads.set(uploadId, {
          bucket: bucketName,
          key,
          initiated: new Date(),
          contentType: header(headers, 'content-type') ?? 'binary/octet-stream',
          metadata: metadataOf(headers),
          ...(algorithm && { checksumAlgorithm: algorithm }),
          parts: new Map(),
        });
        return [
          200,
          { ...XML_TYPE, ...(algorithm && { 'x-amz-checksum-algorithm': algorithm }) },
          xml('InitiateMultipartUploadResult', {
            Bucket: bucketName,
            Key: key,
            UploadId: uploadId,
          }),
        ];
      }
      case 'UploadPart':
        return this.uploadPart(this.upload(bucketName, key, query), query, headers, body);
      case 'CompleteMultipartUpload':
        return this.complete(bucket, query['uploadId']!, this.upload(bucketName, key, query), body);
      case 'AbortMultipartUpload':
        this.upload(bucketName, key, query);
        this.uploads.delete(query['uploadId']!);
        return [204, {}];
      case 'Unsupported':
        throw new S3Error(501, 'NotImplemented', 'This fake does not implement that operation.');
    }
  }

  private upload(bucket: string, key: string, query: Record<string, string>): MultipartUpload {
    const upload = this.uploads.get(query['uploadId'] ?? '');
    if (upload === undefined || upload.bucket !== bucket || upload.key !== key) {
      throw new S3Error(404, 'NoSuchUpload', 'The specified multipart upload does not exist.');
    }
    return upload;
  }

  private uploadPart(
    upload: MultipartUpload,
    query: Record<string, string>,
    headers: IncomingHttpHeaders,
    body: Buffer,
  ): [number, Record<string, string>] {
    const partNumber = Number(query['partNumber']);
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) {
      throw new S3Error(
        400,
        'InvalidArgument',
        'Part number must be an integer between 1 and 10000, inclusive',
      );
    }
    const failure = this.partFailures.get(partNumber);
    if (failure !== undefined && failure.remaining > 0) {
      failure.remaining -= 1;
      throw new S3Error(
        failure.status,
        STATUS_CODES[failure.status] ?? 'InternalError',
        'Injected part failure.',
      );
    }
    const checksum = verifyChecksums(headers, body);
    if (upload.checksumAlgorithm === 'SHA256' && checksum === undefined) {
      throw new S3Error(
        400,
        'InvalidRequest',
        'Checksum Type mismatch occurred, expected checksum Type: sha256, actual checksum Type: null',
      );
    }
    const part: Part = {
      body,
      md5: md5(body),
      sha256: sha256(body),
      etag: `"${md5(body).toString('hex')}"`,
    };
    upload.parts.set(partNumber, part);
    return [
      200,
      {
        etag: part.etag,
        ...(checksum && { 'x-amz-checksum-sha256': checksum }),
      },
    ];
  }

  private complete(
    bucket: Map<string, StoredObject>,
    uploadId: string,
    upload: MultipartUpload,
    body: Buffer,
  ): [number, Record<string, string>, string] {
    const listed = parseCompleteBody(body.toString('utf8'));
    if (
      listed.some((part, index) => index > 0 && part.partNumber <= listed[index - 1]!.partNumber)
    ) {
      throw new S3Error(
        400,
        'InvalidPartOrder',
        'The list of parts was not in ascending order. The parts list must be specified in order by part number.',
      );
    }
    const parts: Part[] = [];
    for (const [index, { partNumber, etag, checksumSha256 }] of listed.entries()) {
      if (upload.checksumAlgorithm === 'SHA256' && checksumSha256 === undefined) {
        throw new S3Error(
          400,
          'InvalidRequest',
          `The upload was created using a sha256 checksum. The complete request must include the checksum for each part. It was missing for part ${partNumber} in the request.`,
        );
      }
      const part = upload.parts.get(partNumber);
      const checksumWrong =
        checksumSha256 !== undefined && checksumSha256 !== part?.sha256.toString('base64');
      if (part === undefined || part.etag !== etag || checksumWrong) {
        throw new S3Error(
          400,
          'InvalidPart',
          "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
        );
      }
      if (index < listed.length - 1 && part.body.length < MIN_PART_BYTES) {
        throw new S3Error(
          400,
          'EntityTooSmall',
          'Your proposed upload is smaller than the minimum allowed object size.',
        );
      }
      parts.push(part);
    }
    const object: StoredObject = {
      body: Buffer.concat(parts.map((part) => part.body)),
      contentType: upload.contentType,
      metadata: upload.metadata,
      etag: `"${md5(Buffer.concat(parts.map((p) => p.md5))).toString('hex')}-${parts.length}"`,
      ...(upload.checksumAlgorithm === 'SHA256' && {
        checksumSha256: `${sha256(Buffer.concat(parts.map((p) => p.sha256))).toString('base64')}-${parts.length}`,
        checksumType: 'COMPOSITE' as const,
      }),
    };
    bucket.set(upload.key, object);
    this.uploads.delete(uploadId);
    return [
      200,
      XML_TYPE,
      xml('CompleteMultipartUploadResult', {
        Location: `${this.url}/${upload.bucket}/${upload.key}`,
        Bucket: upload.bucket,
        Key: upload.key,
        ETag: object.etag,
        ...(object.checksumSha256 !== undefined && {
          ChecksumSHA256: this.misreportChecksum
            ? `${sha256('other').toString('base64')}-${parts.length}`
            : object.checksumSha256,
          ChecksumType: 'COMPOSITE',
        }),
      }),
    ];
  }

  private listUploads(bucket: string, prefix: string): string {
    const uploads = [...this.uploads]
      .filter(([, upload]) => upload.bucket === bucket && upload.key.startsWith(prefix))
      .map(
        ([uploadId, upload]) =>
          `<Upload>${fields({ Key: upload.key, UploadId: uploadId, Initiated: upload.initiated.toISOString() })}</Upload>`,
      );
    return xml(
      'ListMultipartUploadsResult',
      {
        Bucket: bucket,
        KeyMarker: '',
        UploadIdMarker: '',
        Prefix: prefix,
        MaxUploads: '1000',
        IsTruncated: 'false',
      },
      uploads.join(''),
    );
  }
}

/** The operation a path-style request names (the S3 API reference's "Request Syntax"). */
function operationOf(method: string, key: string, query: Record<string, string>): S3Operation {
  const has = (name: string) => name in query;
  if (key === '') {
    if (method === 'HEAD') return 'HeadBucket';
    if (method === 'GET' && has('uploads')) return 'ListMultipartUploads';
    return 'Unsupported';
  }
  if (method === 'POST' && has('uploads')) return 'CreateMultipartUpload';
  if (method === 'POST' && has('uploadId')) return 'CompleteMultipartUpload';
  if (method === 'PUT' && has('uploadId') && has('partNumber')) return 'UploadPart';
  if (method === 'DELETE' && has('uploadId')) return 'AbortMultipartUpload';
  if (method === 'PUT' && !has('uploadId')) return 'PutObject';
  if (method === 'GET') return 'GetObject';
  if (method === 'HEAD') return 'HeadObject';
  return 'Unsupported';
}

/**
 * Verifies `Content-MD5` and `x-amz-checksum-sha256` when sent (BadDigest when they do not match
 * the body), and that `x-amz-sdk-checksum-algorithm` came with its checksum; returns the SHA-256.
 */
function verifyChecksums(headers: IncomingHttpHeaders, body: Buffer): string | undefined {
  const contentMd5 = header(headers, 'content-md5');
  if (contentMd5 !== undefined && contentMd5 !== md5(body).toString('base64')) {
    throw new S3Error(
      400,
      'BadDigest',
      'The Content-MD5 you specified did not match what we received.',
    );
  }
  const checksum = header(headers, 'x-amz-checksum-sha256');
  if (checksum !== undefined && checksum !== sha256(body).toString('base64')) {
    throw new S3Error(
      400,
      'BadDigest',
      'The SHA256 you specified did not match the calculated checksum.',
    );
  }
  const algorithm = header(headers, 'x-amz-sdk-checksum-algorithm');
  if (algorithm !== undefined && algorithm !== 'SHA256') {
    throw new S3Error(
      501,
      'NotImplemented',
      `This fake supports SHA256 checksums only, not ${algorithm}.`,
    );
  }
  if (algorithm !== undefined && checksum === undefined) {
    throw new S3Error(
      400,
      'InvalidRequest',
      'x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.',
    );
  }
  return checksum;
}

function checksumHeaders(object: StoredObject): Record<string, string> {
  return object.checksumSha256 === undefined
    ? {}
    : {
        'x-amz-checksum-sha256': object.checksumSha256,
        'x-amz-checksum-type': object.checksumType!,
      };
}

function metadataOf(headers: IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers)
      .filter(([name]) => name.startsWith('x-amz-meta-'))
      .map(([name, value]) => [name.slice('x-amz-meta-'.length), String(value)]),
  );
}

/** The parts a CompleteMultipartUpload body lists; MalformedXML when it lists none. */
function parseCompleteBody(
  body: string,
): { partNumber: number; etag: string; checksumSha256?: string }[] {
  if (!/^(<\?xml[^>]*\?>)?\s*<CompleteMultipartUpload[\s>]/.test(body)) {
    throw new S3Error(
      400,
      'MalformedXML',
      'The XML you provided was not well-formed or did not validate against our published schema',
    );
  }
  const parts = [...body.matchAll(/<Part>(.*?)<\/Part>/gs)].map(([, part]) => {
    const field = (name: string) => new RegExp(`<${name}>(.*?)</${name}>`, 's').exec(part!)?.[1];
    const checksumSha256 = field('ChecksumSHA256');
    return {
      partNumber: Number(field('PartNumber')),
      etag: unescapeXml(field('ETag') ?? ''),
      ...(checksumSha256 !== undefined && { checksumSha256 }),
    };
  });
  if (parts.length === 0 || parts.some((part) => !Number.isInteger(part.partNumber))) {
    throw new S3Error(
      400,
      'MalformedXML',
      'The XML you provided was not well-formed or did not validate against our published schema',
    );
  }
  return parts;
}

const XML_TYPE = { 'content-type': 'application/xml' };

function xml(root: string, values: Record<string, string>, inner = ''): string {
  const namespace = root === 'Error' ? '' : ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root}${namespace}>${fields(values)}${inner}</${root}>`;
}

function fields(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([name, value]) => `<${name}>${escapeXml(value)}</${name}>`)
    .join('');
}

function escapeXml(text: string): string {
  return text.replace(
    /[<>&'"]/g,
    (c) => `&${{ '<': 'lt', '>': 'gt', '&': 'amp', "'": 'apos', '"': 'quot' }[c]};`,
  );
}

function unescapeXml(text: string): string {
  const named: Record<string, string> = { lt: '<', gt: '>', amp: '&', apos: "'", quot: '"' };
  return text.replace(/&(lt|gt|amp|apos|quot|#\d+|#x[0-9a-f]+);/gi, (_, entity: string) =>
    entity.startsWith('#')
      ? String.fromCodePoint(
          Number(entity.startsWith('#x') ? `0${entity.slice(1)}` : entity.slice(1)),
        )
      : named[entity]!,
  );
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const md5 = (data: Buffer) => createHash('md5').update(data).digest();
export interface SignedRequest {
  readonly method: string;
  /** Path and query, percent-encoded as they go on the wire: `/bucket/key?uploads=`. */
  readonly target: string;
  readonly headers?: Record<string, string>;
  readonly body?: Buffer | string;
}

/**
 * Sends `request` to `baseUrl` signed with SigV4 for S3 in `region`, as a client that is not the
 * AWS SDK would: lets specs talk to the fake (and pin its wire shapes) with plain fetch. Every
 * header given is signed; a payload hash given (UNSIGNED-PAYLOAD, a wrong one) is signed as is.
 */
export async function signedFetch(
  baseUrl: string,
  request: SignedRequest,
  credentials: { accessKeyId: string; secretAccessKey: string; region: string },
  now = new Date(),
): Promise<Response> {
  const [path, query = ''] = request.target.split('?') as [string, string?];
  const body = request.body === undefined ? Buffer.alloc(0) : Buffer.from(request.body);
  const date = amzDate(now);
  const headers: Record<string, string> = {
    'x-amz-content-sha256': hexSha256(body),
    ...Object.fromEntries(
      Object.entries(request.headers ?? {}).map(([n, v]) => [n.toLowerCase(), v]),
    ),
    host: new URL(baseUrl).host,
    'x-amz-date': date,
  };
  const signed = Object.keys(headers).sort();
  const scope = `${date.slice(0, 8)}/${credentials.region}/s3/aws4_request`;
  const canonical = canonicalRequest(
    { method: request.method, path, query, headers },
    signed,
    headers['x-amz-content-sha256']!,
    false,
  );
  const key = signingKey(credentials.secretAccessKey, date.slice(0, 8), credentials.region, 's3');
  const signature = createHmac('sha256', key)
    .update(stringToSign(date, scope, canonical))
    .digest('hex');
  // fetch sets Host itself and refuses to be given one.
  const sent = Object.fromEntries(Object.entries(headers).filter(([name]) => name !== 'host'));
  return fetch(`${baseUrl}${request.target}`, {
    method: request.method,
    headers: {
      ...sent,
      authorization: `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signed.join(';')}, Signature=${signature}`,
    },
    ...(request.method !== 'GET' && request.method !== 'HEAD' && { body }),
  });
}
