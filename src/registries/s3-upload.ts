import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import {
  AbortMultipartUploadCommand,
  HeadBucketCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { fromIni } from '@aws-sdk/credential-providers';
import { Upload } from '@aws-sdk/lib-storage';
import { DEFAULT_RESOLVE_LIMITS, type ResolveLimits } from '../secret-managers/secret-manager.js';
import { ociLayoutDigest } from './oci-layout.js';
import { RegistryUnauthorizedError, RegistryUnavailableError } from './registry.js';

/**
 * registry_type `s3` (docs/adr/0022-registries.md): the build writes the image as an OCI image
 * layout tarball, and kiln uploads it through the S3 API with @aws-sdk/lib-storage. Every part
 * carries `x-amz-checksum-sha256`, which S3 verifies; kiln records the object's `s3://` address,
 * the image's digest and S3's SHA-256 checksum of the object.
 */

/** One tenant's S3 settings for images. */
export interface S3StoreSettings {
  readonly bucket: string;
  /** Key prefix, slash-separated segments of `A-Z a-z 0-9 . _ -`; none puts images at the top. */
  readonly prefix?: string;
  readonly region: string;
  /** An S3-compatible endpoint (`https://minio.example:9000`); AWS's own when absent. */
  readonly endpoint?: string;
  /** `endpoint/bucket/key` rather than `bucket.endpoint/key`, as most S3-compatible stores need. */
  readonly forcePathStyle?: boolean;
  /** A shared credentials file (the `~/.aws/credentials` format); the SDK's default chain when absent. */
  readonly credentialsFile?: string;
  /** The profile in that file (or in the default chain's files); `default` when absent. */
  readonly profile?: string;
  /** Keys resolved for this build from the tenant's secret manager; win over the above. */
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export interface S3UploadTuning {
  /** Bytes per part, at least S3's minimum of 5 MiB; 8 MiB by default. */
  readonly partSize?: number;
}

export interface S3UploadOptions {
  /** The object key, usually from s3ImageKey(). */
  readonly key: string;
  readonly signal?: AbortSignal;
}

export interface S3UploadResult {
  /** `s3://bucket/key`. */
  readonly uri: string;
  /** The image's digest: the OCI layout's first manifest. */
  readonly digest: string;
  /** Bytes of the tarball. */
  readonly size: number;
  /**
   * S3's SHA-256 checksum of the object: base64 of the file's SHA-256 when it went up in one
   * request, `base64(sha256(part digests))-N` when it went up in N parts.
   */
  readonly checksumSha256: string;
}

export const S3_MIN_PART_SIZE = 5 * 1024 * 1024;
const DEFAULT_PART_SIZE = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;
const OCI_LAYOUT_TAR = 'application/vnd.oci.image.layout.v1+tar';
const KEY_SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]+$/;

/**
 * The key of a build's image: `<prefix>/<project>/<buildNumber>-<12 hex digits of the digest>.oci.tar`.
 * `project` and each prefix segment must be `A-Z a-z 0-9 . _ -` (pass the project's id or slug),
 * so that keys are safe in every S3-compatible store and one project cannot name another's keys.
 */
export function s3ImageKey(input: {
  readonly prefix?: string;
  readonly project: string;
  readonly buildNumber: number;
  readonly digest: string;
}): string {
  const prefix = (input.prefix ?? '').split('/').filter((segment) => segment !== '');
  for (const segment of [...prefix, input.project]) {
    if (!KEY_SEGMENT.test(segment)) throw new RangeError(`not a safe S3 key segment: ${segment}`);
  }
  if (!Number.isSafeInteger(input.buildNumber) || input.buildNumber < 0) {
    throw new RangeError(`not a build number: ${input.buildNumber}`);
  }
  const hex = /^sha(?:256|512):([a-f0-9]{64,128})$/.exec(input.digest)?.[1];
  if (hex === undefined) throw new RangeError(`not an image digest: ${input.digest}`);
  const name = `${input.buildNumber}-${hex.slice(0, 12)}.oci.tar`;
  return [...prefix, input.project, name].join('/');
}

/**
 * Uploads OCI layout tarballs to one S3 bucket. Each call is bounded: every request times out
 * after `limits.timeoutMs` without progress and is tried `limits.attempts` times in all (the SDK
 * retries network errors, timeouts, 429 and 5xx only). Errors name the `s3://` address, never a
 * credential.
 */
export class S3ImageStore {
  private readonly partSize: number;

  constructor(
    private readonly settings: S3StoreSettings,
    private readonly limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS,
    tuning: S3UploadTuning = {},
  ) {
    this.partSize = tuning.partSize ?? DEFAULT_PART_SIZE;
    if (this.partSize < S3_MIN_PART_SIZE) {
      throw new RangeError(`partSize must be at least ${S3_MIN_PART_SIZE} bytes`);
    }
  }

  /**
   * Resolves when the bucket exists and kiln's credentials may use it (HeadBucket). Throws
   * RegistryUnauthorizedError when S3 refuses the credentials or the bucket does not exist,
   * RegistryUnavailableError when S3 cannot be asked.
   */
  async checkBucket(signal?: AbortSignal): Promise<void> {
    const target = `s3://${this.settings.bucket}`;
    const client = this.client();
    try {
      await client.send(new HeadBucketCommand({ Bucket: this.settings.bucket }), {
        abortSignal: signal,
      });
    } catch (error) {
      throw this.registryError(error, target, signal);
    } finally {
      client.destroy();
    }
  }

  /**
   * Uploads the OCI layout tarball at `tarPath` to `key`, with the image's digest as the
   * object's `oci-digest` metadata. Throws OciLayoutError, before sending anything, when the
   * tarball is not an OCI image layout. When the upload fails or `signal` aborts it, the
   * multipart upload is aborted on S3 before this rejects, so no parts are left behind (should
   * that abort fail too, the bucket's AbortIncompleteMultipartUpload lifecycle rule is the
   * backstop).
   */
  async upload(tarPath: string, { key, signal }: S3UploadOptions): Promise<S3UploadResult> {
    signal?.throwIfAborted();
    const { digest } = await ociLayoutDigest(tarPath);
    const { size } = await stat(tarPath);
    const checksumSha256 = await s3Sha256(tarPath, this.partSize);
    signal?.throwIfAborted();
    const uri = `s3://${this.settings.bucket}/${key}`;
    const tracker = new RequestTracker();
    const client = this.client(tracker);
    const upload = new Upload({
      client,
      partSize: this.partSize,
      queueSize: QUEUE_SIZE,
      params: {
        Bucket: this.settings.bucket,
        Key: key,
        Body: createReadStream(tarPath),
        ContentLength: size,
        ContentType: OCI_LAYOUT_TAR,
        ChecksumAlgorithm: 'SHA256',
        Metadata: { 'oci-digest': digest },
      },
    });
    const stop = () => void upload.abort();
    signal?.addEventListener('abort', stop, { once: true });
    let stored: string | undefined;
    try {
      stored = (await upload.done()).ChecksumSHA256;
    } catch (error) {
      await this.abandon(client, key, tracker);
      if (signal?.aborted) throw abortReason(signal);
      // A request's failure is S3's answer; any other (reading the file) is kiln's own.
      throw tracker.failure === undefined ? error : this.registryError(tracker.failure, uri);
    } finally {
      signal?.removeEventListener('abort', stop);
      client.destroy();
    }
    if (stored !== undefined && stored !== checksumSha256) {
      throw new RegistryUnavailableError(uri, 'S3 stored a checksum other than kiln computed');
    }
    return { uri, digest, size, checksumSha256 };
  }

  /**
   * Once lib-storage's requests have finished (done() rejects on abort while parts are still in
   * flight), aborts the multipart upload if lib-storage did not try to.
   */
  private async abandon(client: S3Client, key: string, tracker: RequestTracker): Promise<void> {
    await tracker.settled();
    if (tracker.uploadId === undefined || tracker.abortTried) return;
    const command = new AbortMultipartUploadCommand({
      Bucket: this.settings.bucket,
      Key: key,
      UploadId: tracker.uploadId,
    });
    await client.send(command).catch(() => undefined); // the original error is the one to report
  }

  private client(tracker?: RequestTracker): S3Client {
    const { region, endpoint, forcePathStyle, credentialsFile, profile, credentials } =
      this.settings;
    const client = new S3Client({
      region,
      ...(endpoint !== undefined && { endpoint }),
      forcePathStyle: forcePathStyle ?? false,
      maxAttempts: this.limits.attempts,
      // socketTimeout counts idle time, so a large part that keeps moving is never cut off.
      requestHandler: {
        connectionTimeout: this.limits.timeoutMs,
        socketTimeout: this.limits.timeoutMs,
      },
      ...(credentials !== undefined
        ? { credentials: { ...credentials } }
        : (credentialsFile !== undefined || profile !== undefined) && {
            // ignoreCache: a rotated credentials file (a remounted Secret) is read afresh.
            credentials: fromIni({ filepath: credentialsFile, profile, ignoreCache: true }),
          }),
    });
    tracker?.follow(client);
    return client;
  }

  private registryError(error: unknown, target: string, signal?: AbortSignal): Error {
    if (signal?.aborted) return abortReason(signal);
    const name = error instanceof Error ? error.name : 'Error';
    const status = error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
    // A missing bucket is a setting to fix, like a refused credential, and no retry helps;
    // RegistryUnavailableError would say "try again later".
    if (name === 'NoSuchBucket' || name === 'NotFound') {
      return new RegistryUnauthorizedError(
        target,
        `the bucket ${this.settings.bucket} does not exist`,
      );
    }
    if (REFUSED.has(name) || status === 403) {
      return new RegistryUnauthorizedError(target, `S3 refused kiln's credentials (${name})`);
    }
    if (WRONG_REGION.has(name) || status === 301 || (status === 400 && name === 'Unknown')) {
      return new RegistryUnauthorizedError(
        target,
        `the bucket is not in region ${this.settings.region} (${name})`,
      );
    }
    const answered = status === undefined ? '' : `, HTTP ${status}`;
    return new RegistryUnavailableError(
      target,
      `S3 did not accept the request after ${this.limits.attempts} attempt(s) (${name}${answered})`,
    );
  }
}

/**
 * S3's error codes for credentials it refuses. HEAD answers carry no body, so the SDK names those
 * by status alone: NotFound (404), Forbidden (403) and Unknown (400: a HeadBucket signed for
 * another region than the bucket's).
 */
const REFUSED = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'AllAccessDisabled',
  'CredentialsProviderError',
]);
const WRONG_REGION = new Set(['AuthorizationHeaderMalformed', 'PermanentRedirect']);

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new DOMException('This operation was aborted', 'AbortError');
}

/**
 * The SHA-256 checksum S3 reports for `tarPath` uploaded in parts of `partSize` (lib-storage
 * sends a file of at most one part in a single PutObject): compared with S3's answer, and
 * recorded even when an S3-compatible store answers none.
 */
async function s3Sha256(tarPath: string, partSize: number): Promise<string> {
  const digests: Buffer[] = [];
  let hash = createHash('sha256');
  let inPart = 0;
  for await (const chunk of createReadStream(tarPath)) {
    for (let data = chunk as Buffer; data.length > 0;) {
      const take = Math.min(partSize - inPart, data.length);
      hash.update(data.subarray(0, take));
      inPart += take;
      data = data.subarray(take);
      if (inPart === partSize) {
        digests.push(hash.digest());
        [hash, inPart] = [createHash('sha256'), 0];
      }
    }
  }
  if (inPart > 0 || digests.length === 0) digests.push(hash.digest());
  if (digests.length === 1) return digests[0]!.toString('base64');
  const composite = createHash('sha256').update(Buffer.concat(digests)).digest('base64');
  return `${composite}-${digests.length}`;
}

/**
 * Follows one upload's requests through its client: which multipart upload it started, whether
 * an abort of it was tried, the first request that failed for good, and when none is in flight.
 */
class RequestTracker {
  uploadId: string | undefined;
  abortTried = false;
  failure: unknown;
  private inFlight = 0;
  private waiters: (() => void)[] = [];

  /** Wraps each of `client`'s commands, outside the SDK's retries. */
  follow(client: S3Client): void {
    client.middlewareStack.add(
      (next, context) => (args) => this.track(context.commandName, () => next(args)),
      { step: 'initialize', name: 'kilnRequestTracker' },
    );
  }

  private async track<T>(command: string | undefined, send: () => Promise<T>): Promise<T> {
    if (command === 'AbortMultipartUploadCommand') this.abortTried = true;
    this.inFlight += 1;
    try {
      const result = await send();
      if (command === 'CreateMultipartUploadCommand') {
        this.uploadId = (result as { output?: { UploadId?: string } }).output?.UploadId;
      }
      return result;
    } catch (error) {
      if (command !== 'AbortMultipartUploadCommand') this.failure ??= error;
      throw error;
    } finally {
      this.inFlight -= 1;
      if (this.inFlight === 0) for (const wake of this.waiters.splice(0)) wake();
    }
  }

  /** Resolves when no request is in flight and lib-storage started none in the meantime. */
  async settled(): Promise<void> {
    for (;;) {
      while (this.inFlight > 0) await new Promise<void>((wake) => this.waiters.push(wake));
      // lib-storage sends its AbortMultipartUpload a few promise hops after the last part ends.
      await new Promise((tick) => setImmediate(tick));
      if (this.inFlight === 0) return;
    }
  }
}
