import { FakeAwsSecretsManager } from './support/fake-aws-secrets-manager.js';
import { hexSha256, signingKey, signSigV4, type SigV4Credentials } from './support/sigv4.js';

/**
 * Pins the wire the fake speaks (AWS JSON 1.1 + SigV4) with plain fetch and this file's own
 * signing, no SDK: if the fake drifts from what AWS documents, this fails.
 */

const REGION = 'us-east-1';
const KEY: SigV4Credentials = {
  accessKeyId: 'AKIAFAKETESTKEY00001',
  secretAccessKey: 'fake/secret+access-key-0123456789abcdef',
};
const JSON_1_1 = 'application/x-amz-json-1.1';

interface Call {
  /** The JSON body signed and, unless `sentBody` is given, sent. */
  readonly body?: unknown;
  readonly sentBody?: string;
  readonly credentials?: SigV4Credentials;
  readonly date?: Date;
  readonly region?: string;
  readonly headers?: Record<string, string>;
  /** Headers changed or removed (undefined) after signing. */
  readonly afterSigning?: Record<string, string | undefined>;
  readonly unsigned?: boolean;
}

describe(FakeAwsSecretsManager.name, () => {
  let fake: FakeAwsSecretsManager;

  beforeEach(async () => {
    fake = await FakeAwsSecretsManager.start({ region: REGION });
    fake.addCredentials(KEY.accessKeyId, KEY.secretAccessKey);
  });

  afterEach(() => fake.stop());

  /** POSTs `call.body` to the fake, SigV4-signed as the call says. */
  async function call(
    options: Call = {},
  ): Promise<{ status: number; headers: Headers; json: any }> {
    const text = JSON.stringify(options.body ?? {});
    const headers: Record<string, string> = {
      'content-type': JSON_1_1,
      'x-amz-target': 'secretsmanager.GetSecretValue',
      ...options.headers,
    };
    const signed = options.unsigned
      ? {}
      : signSigV4(
          {
            method: 'POST',
            path: '/',
            query: '',
            headers: { ...headers, host: `127.0.0.1:${fake.address.port}` },
            bodySha256: hexSha256(text),
          },
          options.credentials ?? KEY,
          { region: options.region ?? REGION, service: 'secretsmanager' },
          options.date,
        );
    const sent: Record<string, string> = { ...headers, ...signed };
    for (const [name, value] of Object.entries(options.afterSigning ?? {})) {
      if (value === undefined) delete sent[name];
      else sent[name] = value;
    }
    const response = await fetch(`${fake.url}/`, {
      method: 'POST',
      headers: sent,
      body: options.sentBody ?? text,
    });
    return { status: response.status, headers: response.headers, json: await response.json() };
  }

  describe('GetSecretValue', () => {
    it('serves a SecretString by name with its ARN, version and AWSCURRENT stage', async () => {
      const { arn, versionId } = fake.put('team/plain', 'plain-value');
      const response = await call({ body: { SecretId: 'team/plain' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe(JSON_1_1);
      expect(response.headers.get('x-amzn-requestid')).toMatch(/^[0-9a-f-]{36}$/);
      expect(arn).toMatch(
        /^arn:aws:secretsmanager:us-east-1:123456789012:secret:team\/plain-\w{6}$/,
      );
      expect(response.json).toEqual({
        ARN: arn,
        Name: 'team/plain',
        VersionId: versionId,
        SecretString: 'plain-value',
        VersionStages: ['AWSCURRENT'],
        CreatedDate: expect.any(Number),
      });
    });

    it('serves a secret by its full ARN', async () => {
      const { arn } = fake.put('team/by-arn', 'arn-value');
      const response = await call({ body: { SecretId: arn } });
      expect(response.status).toBe(200);
      expect(response.json.SecretString).toBe('arn-value');
    });

    it('serves a binary secret as base64 SecretBinary and no SecretString', async () => {
      fake.put('team/binary', { binary: Uint8Array.of(0, 1, 254, 255) });
      const response = await call({ body: { SecretId: 'team/binary' } });
      expect(response.status).toBe(200);
      expect(response.json.SecretBinary).toBe(Buffer.from([0, 1, 254, 255]).toString('base64'));
      expect(response.json).not.toHaveProperty('SecretString');
    });

    it('serves the current version, by its id or the AWSCURRENT stage', async () => {
      fake.put('team/versioned', 'old-value');
      const { versionId } = fake.put('team/versioned', 'new-value');
      const byStage = await call({
        body: { SecretId: 'team/versioned', VersionStage: 'AWSCURRENT' },
      });
      const byId = await call({ body: { SecretId: 'team/versioned', VersionId: versionId } });
      expect([byStage.json.SecretString, byId.json.SecretString]).toEqual([
        'new-value',
        'new-value',
      ]);
    });

    it.each([
      [
        'an unknown secret',
        { SecretId: 'team/missing' },
        "Secrets Manager can't find the specified secret.",
      ],
      [
        'another staging label',
        { SecretId: 'team/plain', VersionStage: 'AWSPREVIOUS' },
        'staging label: AWSPREVIOUS',
      ],
      [
        'an unknown version id',
        { SecretId: 'team/plain', VersionId: 'f'.repeat(32) },
        `VersionId: ${'f'.repeat(32)}`,
      ],
    ])('answers %s with a 400 ResourceNotFoundException', async (_case, body, message) => {
      fake.put('team/plain', 'plain-value');
      const response = await call({ body });
      expect(response.status).toBe(400);
      expect(response.headers.get('content-type')).toBe(JSON_1_1);
      expect(response.json.__type).toBe('ResourceNotFoundException');
      expect(response.json.message).toContain(message);
    });

    it('answers a secret nobody may read with a 400 AccessDeniedException, by name or ARN', async () => {
      const { arn } = fake.put('team/denied', 'denied-value');
      fake.denyAccess('team/denied');
      for (const SecretId of ['team/denied', arn]) {
        const response = await call({ body: { SecretId } });
        expect(response.status).toBe(400);
        expect(response.json.__type).toBe('AccessDeniedException');
        expect(JSON.stringify(response.json)).not.toContain('denied-value');
      }
    });

    it('answers a request without a SecretId with a 400 ValidationException', async () => {
      const response = await call({ body: {} });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('ValidationException');
    });
  });

  describe('protocol', () => {
    it('answers another content type with a 400 SerializationException', async () => {
      const response = await call({
        body: { SecretId: 'x' },
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('SerializationException');
    });

    it('answers a body that is not a JSON object with a 400 SerializationException', async () => {
      const response = await call({ body: ['team/plain'] });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('SerializationException');
    });

    it('answers an action it does not implement with a 400 UnknownOperationException', async () => {
      const response = await call({
        body: {},
        headers: { 'x-amz-target': 'secretsmanager.ListSecrets' },
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('UnknownOperationException');
    });
  });

  describe('SigV4 authentication', () => {
    beforeEach(() => fake.put('team/plain', 'plain-value'));

    it('answers an unsigned request with a 400 MissingAuthenticationTokenException', async () => {
      const response = await call({ body: { SecretId: 'team/plain' }, unsigned: true });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('MissingAuthenticationTokenException');
    });

    it('answers an access key it does not know with a 400 UnrecognizedClientException', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        credentials: { ...KEY, accessKeyId: 'AKIAUNKNOWN000000000' },
      });
      expect(response.status).toBe(400);
      expect(response.json).toEqual({
        __type: 'UnrecognizedClientException',
        message: 'The security token included in the request is invalid.',
      });
    });

    it('answers a signature made with the wrong secret key with a 400 InvalidSignatureException', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        credentials: { ...KEY, secretAccessKey: 'wrong-secret-access-key' },
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('InvalidSignatureException');
      expect(response.json.message).toContain('The request signature we calculated does not match');
    });

    it('answers a body changed after signing with a 400 InvalidSignatureException', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        sentBody: JSON.stringify({ SecretId: 'team/other' }),
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('InvalidSignatureException');
    });

    it('answers an x-amz-content-sha256 that is not the body hash with a 400 InvalidSignatureException', async () => {
      const signedBody = { SecretId: 'team/plain' };
      const response = await call({
        body: signedBody,
        headers: { 'x-amz-content-sha256': hexSha256(JSON.stringify(signedBody)) },
        sentBody: JSON.stringify({ SecretId: 'team/other' }),
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('InvalidSignatureException');
      expect(response.json.message).toContain('x-amz-content-sha256');
    });

    it('answers a signed header changed after signing with a 400 InvalidSignatureException', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        afterSigning: { 'x-amz-target': 'secretsmanager.DeleteSecret' },
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('InvalidSignatureException');
    });

    it('answers a request signed more than 15 minutes ago with a signature-expired 400', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        date: new Date(Date.now() - 20 * 60 * 1000),
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('InvalidSignatureException');
      expect(response.json.message).toMatch(/^Signature expired: \d{8}T\d{6}Z is now earlier than/);
    });

    it('answers a request signed for another region with a 400 InvalidSignatureException', async () => {
      const response = await call({ body: { SecretId: 'team/plain' }, region: 'eu-west-1' });
      expect(response.status).toBe(400);
      expect(response.json).toEqual({
        __type: 'InvalidSignatureException',
        message: 'Credential should be scoped to a valid region.',
      });
    });

    it('answers a request without X-Amz-Date with a 400 IncompleteSignatureException', async () => {
      const response = await call({
        body: { SecretId: 'team/plain' },
        afterSigning: { 'x-amz-date': undefined },
      });
      expect(response.status).toBe(400);
      expect(response.json.__type).toBe('IncompleteSignatureException');
    });
  });

  describe('fault switches', () => {
    beforeEach(() => fake.put('team/plain', 'plain-value'));

    it('fails the next n authenticated requests as told, then serves again', async () => {
      fake.failNext(400, 2, 'ThrottlingException');
      fake.failNext(500, 1);
      const answers = [];
      for (let i = 0; i < 4; i++) {
        const response = await call({ body: { SecretId: 'team/plain' } });
        answers.push([response.status, response.json.__type ?? response.json.SecretString]);
      }
      expect(answers).toEqual([
        [400, 'ThrottlingException'],
        [400, 'ThrottlingException'],
        [500, 'InternalServiceError'],
        [200, 'plain-value'],
      ]);
    });

    it('still refuses bad signatures while failures are queued', async () => {
      fake.failNext(500, 1);
      const response = await call({
        body: { SecretId: 'team/plain' },
        credentials: { ...KEY, secretAccessKey: 'wrong-secret-access-key' },
      });
      expect(response.json.__type).toBe('InvalidSignatureException');
      expect((await call({ body: { SecretId: 'team/plain' } })).status).toBe(500);
    });

    it('accepts requests and never answers them while hanging', async () => {
      fake.hang = true;
      const controller = new AbortController();
      const pending = fetch(`${fake.url}/`, {
        method: 'POST',
        body: '{}',
        signal: controller.signal,
      });
      while (fake.requests.length === 0) await new Promise((tick) => setTimeout(tick, 10));
      controller.abort();
      await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    });

    it('records each request with its method, path, headers and body', async () => {
      await call({ body: { SecretId: 'team/plain' } });
      expect(fake.requests).toEqual([
        {
          method: 'POST',
          path: '/',
          headers: expect.objectContaining({
            'content-type': JSON_1_1,
            'x-amz-target': 'secretsmanager.GetSecretValue',
            authorization: expect.stringContaining(`Credential=${KEY.accessKeyId}/`),
          }),
          body: JSON.stringify({ SecretId: 'team/plain' }),
        },
      ]);
    });
  });
});

/**
 * The signer and verifier share their canonical-request code, so a bug there would cancel out in
 * the specs above; AWS's published examples pin it from outside.
 */
describe('SigV4 against AWS published examples', () => {
  const example: SigV4Credentials = {
    accessKeyId: 'AKIDEXAMPLE',
    secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  };
  const signedAt = new Date('2015-08-30T12:36:00Z');

  it('derives the signing key of the IAM user guide example', () => {
    // https://docs.aws.amazon.com/general/latest/gr/signature-v4-examples.html (kSigning)
    expect(
      signingKey(example.secretAccessKey, '20120215', 'us-east-1', 'iam').toString('hex'),
    ).toBe('f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d');
  });

  it.each([
    ['get-vanilla', '', '5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31'],
    [
      'get-vanilla-query-order-key-case',
      'Param2=value2&Param1=value1',
      'b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500',
    ],
  ])(
    'signs the SigV4 test suite request %s to its published signature',
    (_name, query, signature) => {
      const { authorization } = signSigV4(
        {
          method: 'GET',
          path: '/',
          query,
          headers: { Host: 'example.amazonaws.com' },
          bodySha256: hexSha256(''),
        },
        example,
        { region: 'us-east-1', service: 'service' },
        signedAt,
      );
      expect(authorization).toBe(
        `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=${signature}`,
      );
    },
  );
});
