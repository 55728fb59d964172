import { randomBytes, randomUUID } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { hexSha256, verifySigV4, type SigV4Failure } from './sigv4.js';

/**
 * A fake AWS Secrets Manager on 127.0.0.1: GetSecretValue only, over the AWS JSON 1.1 protocol
 * (POST /, `Content-Type: application/x-amz-json-1.1`, `X-Amz-Target: secretsmanager.<Action>`,
 * errors as HTTP 400/500 with `{"__type": "<Code>", "message": …}`), every request
 * authenticated with SigV4 as AWS does it.
 * - https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
 * - https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html
 * Authentication failures answer what AWS's JSON services answer: an unknown access key
 * UnrecognizedClientException, a bad signature or stale date InvalidSignatureException, a missing
 * header MissingAuthenticationTokenException, all HTTP 400. What a request the SDK never sends
 * gets (wrong content type, unknown action) is this fake's choice of a plausible 400.
 */

const SERVICE = 'secretsmanager';
const JSON_1_1 = 'application/x-amz-json-1.1';
const CURRENT = 'AWSCURRENT';

export interface FakeAwsSecretsManagerOptions {
  /** The region requests must be signed for; default us-east-1. */
  readonly region?: string;
  /** The account in the secrets' ARNs; default 123456789012. */
  readonly accountId?: string;
}

/** One request as received, before the fake decided anything about it. */
export interface RecordedAwsRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A seeded secret's value: text (SecretString) or bytes (SecretBinary). */
export type FakeSecretValue = string | { readonly binary: Uint8Array };

interface StoredSecret {
  readonly name: string;
  readonly arn: string;
  versionId: string;
  createdDate: number;
  value: FakeSecretValue;
}

interface AwsError {
  readonly status: number;
  readonly type: string;
  readonly message: string;
}

/** The error AWS answers for each way SigV4 verification fails. */
const AUTH_ERRORS: Record<SigV4Failure, string> = {
  missing: 'MissingAuthenticationTokenException',
  malformed: 'IncompleteSignatureException',
  'unknown-key': 'UnrecognizedClientException',
  expired: 'InvalidSignatureException',
  scope: 'InvalidSignatureException',
  mismatch: 'InvalidSignatureException',
};

interface GetSecretValueInput {
  readonly SecretId?: string;
  readonly VersionId?: string;
  readonly VersionStage?: string;
}

/** The request body as GetSecretValue's input, or the error its JSON deserializer answers. */
function parseInput(body: Buffer): GetSecretValueInput | AwsError {
  const malformed: AwsError = {
    status: 400,
    type: 'SerializationException',
    message: 'Start of structure or map found where not expected.',
  };
  let input: unknown;
  try {
    input = JSON.parse(body.toString('utf8'));
  } catch {
    return malformed;
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return malformed;
  const fields = input as Record<string, unknown>;
  const members = ['SecretId', 'VersionId', 'VersionStage'];
  const wrongType = members.some((m) => fields[m] !== undefined && typeof fields[m] !== 'string');
  if (wrongType) return malformed;
  return fields;
}

export class FakeAwsSecretsManager {
  /** Accept requests and never answer them. */
  hang = false;
  /** Every request received, in order. */
  readonly requests: RecordedAwsRequest[] = [];

  readonly #secrets = new Map<string, StoredSecret>();
  readonly #keys = new Map<string, string>();
  readonly #denied = new Set<string>();
  readonly #failures: AwsError[] = [];

  private constructor(
    private readonly server: Server,
    readonly region: string,
    private readonly accountId: string,
  ) {}

  static async start(options: FakeAwsSecretsManagerOptions = {}): Promise<FakeAwsSecretsManager> {
    const server = createServer();
    const fake = new FakeAwsSecretsManager(
      server,
      options.region ?? 'us-east-1',
      options.accountId ?? '123456789012',
    );
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      fake.handle(request, response).catch((error: unknown) => {
        response.destroy(error instanceof Error ? error : new Error(String(error)));
      });
    });
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    return fake;
  }

  get address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  /** `http://127.0.0.1:<port>`, the SDK's `endpoint`. */
  get url(): string {
    return `http://127.0.0.1:${this.address.port}`;
  }

  /**
   * Creates the secret, or gives it a new AWSCURRENT version. Returns its ARN (the name plus
   * AWS's random six-character suffix) and the version's id.
   */
  put(name: string, value: FakeSecretValue): { arn: string; versionId: string } {
    const existing = this.#secrets.get(name);
    const secret: StoredSecret = existing ?? {
      name,
      arn: `arn:aws:secretsmanager:${this.region}:${this.accountId}:secret:${name}-${randomBytes(3).toString('hex')}`,
      versionId: '',
      createdDate: 0,
      value,
    };
    secret.versionId = randomUUID();
    secret.createdDate = Date.now() / 1000;
    secret.value = value;
    this.#secrets.set(name, secret);
    return { arn: secret.arn, versionId: secret.versionId };
  }

  /** An access key whose requests are accepted when signed with `secretAccessKey`. */
  addCredentials(accessKeyId: string, secretAccessKey: string): void {
    this.#keys.set(accessKeyId, secretAccessKey);
  }

  /** Every principal is refused GetSecretValue on this secret (no policy allows it). */
  denyAccess(name: string): void {
    this.#denied.add(name);
  }

  /**
   * The next `n` authenticated requests fail with HTTP `status` and error `type`
   * (ThrottlingException, InternalServiceError, …) instead of being served.
   */
  failNext(
    status: number,
    n = 1,
    type = status >= 500 ? 'InternalServiceError' : 'ThrottlingException',
  ): void {
    for (let i = 0; i < n; i++) {
      this.#failures.push({
        status,
        type,
        message: type === 'ThrottlingException' ? 'Rate exceeded' : type,
      });
    }
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const url = new URL(request.url ?? '/', 'http://fake');
    this.requests.push({
      method: request.method ?? '',
      path: url.pathname,
      headers: request.headers,
      body: body.toString('utf8'),
    });
    if (this.hang) return;
    const result = this.refusal(request, body, url) ?? this.getSecretValue(body);
    if ('output' in result) this.send(response, 200, result.output);
    else this.send(response, result.status, { __type: result.type, message: result.message });
  }

  /** Why the request is not served at all: authentication, injected faults, the protocol. */
  private refusal(request: IncomingMessage, body: Buffer, url: URL): AwsError | undefined {
    const rawQuery = (request.url ?? '').split('?')[1] ?? '';
    const verdict = verifySigV4(
      {
        method: request.method ?? '',
        path: (request.url ?? '/').split('?')[0]!,
        query: rawQuery,
        headers: request.headers,
        bodySha256: hexSha256(body),
      },
      { region: this.region, service: SERVICE, secretKeyFor: (id) => this.#keys.get(id) },
    );
    if (!verdict.ok)
      return { status: 400, type: AUTH_ERRORS[verdict.reason], message: verdict.message };
    const failure = this.#failures.shift();
    if (failure !== undefined) return failure;
    if (request.method !== 'POST' || url.pathname !== '/') {
      return {
        status: 400,
        type: 'UnknownOperationException',
        message: `${request.method} ${url.pathname}`,
      };
    }
    const contentType = (request.headers['content-type'] ?? '').split(';')[0]!.trim();
    if (contentType !== JSON_1_1) {
      return {
        status: 400,
        type: 'SerializationException',
        message: `Unexpected content type: ${contentType}`,
      };
    }
    const target = request.headers['x-amz-target'];
    if (target !== `${SERVICE}.GetSecretValue`) {
      return {
        status: 400,
        type: 'UnknownOperationException',
        message: `Unknown operation: ${String(target)}`,
      };
    }
    return undefined;
  }

  private getSecretValue(body: Buffer): AwsError | { output: Record<string, unknown> } {
    const input = parseInput(body);
    if ('status' in input) return input;
    if (input.SecretId === undefined || input.SecretId.length < 1 || input.SecretId.length > 2048) {
      return {
        status: 400,
        type: 'ValidationException',
        message:
          "1 validation error detected: Value at 'secretId' failed to satisfy constraint: Member must have length between 1 and 2048",
      };
    }
    const id = input.SecretId;
    const secret = [...this.#secrets.values()].find((s) => s.name === id || s.arn === id);
    if (secret !== undefined && this.#denied.has(secret.name)) {
      return {
        status: 400,
        type: 'AccessDeniedException',
        message: `User: arn:aws:iam::${this.accountId}:user/kiln is not authorized to perform: secretsmanager:GetSecretValue on resource: ${id} because no identity-based policy allows the secretsmanager:GetSecretValue action`,
      };
    }
    if (secret === undefined) {
      return {
        status: 400,
        type: 'ResourceNotFoundException',
        message: "Secrets Manager can't find the specified secret.",
      };
    }
    if (input.VersionId !== undefined && input.VersionId !== secret.versionId) {
      return {
        status: 400,
        type: 'ResourceNotFoundException',
        message: `Secrets Manager can't find the specified secret value for VersionId: ${input.VersionId}`,
      };
    }
    if (input.VersionStage !== undefined && input.VersionStage !== CURRENT) {
      return {
        status: 400,
        type: 'ResourceNotFoundException',
        message: `Secrets Manager can't find the specified secret value for staging label: ${input.VersionStage}`,
      };
    }
    const value =
      typeof secret.value === 'string'
        ? { SecretString: secret.value }
        : { SecretBinary: Buffer.from(secret.value.binary).toString('base64') };
    return {
      output: {
        ARN: secret.arn,
        Name: secret.name,
        VersionId: secret.versionId,
        ...value,
        VersionStages: [CURRENT],
        CreatedDate: secret.createdDate,
      },
    };
  }

  private send(response: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    response.writeHead(status, {
      'content-type': JSON_1_1,
      'content-length': Buffer.byteLength(text),
      'x-amzn-requestid': randomUUID(),
    });
    response.end(text);
  }
}
