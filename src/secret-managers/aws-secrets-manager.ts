import { fromIni } from '@aws-sdk/credential-providers';
import {
  GetSecretValueCommand,
  type GetSecretValueCommandOutput,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import {
  DEFAULT_RESOLVE_LIMITS,
  type ResolveLimits,
  type SecretManager,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from './secret-manager.js';
import { type AwsReference, type SecretReference } from '../manifest/secret-reference.js';
import type { AwsSecretsManagerSettings } from './settings.js';

/**
 * Errors by which Secrets Manager says the secret cannot be read by kiln's identity, with what
 * SecretNotFoundError says about each
 * (https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html).
 */
const NOT_FOUND: Readonly<Record<string, string>> = {
  ResourceNotFoundException: 'no such secret or version (ResourceNotFoundException)',
  AccessDeniedException: "kiln's AWS identity may not read this secret (AccessDeniedException)",
  DecryptionFailure: 'AWS could not decrypt the secret with its KMS key (DecryptionFailure)',
  InvalidRequestException:
    'the secret cannot be read in its current state, e.g. scheduled for deletion (InvalidRequestException)',
  InvalidParameterException: 'AWS rejected the secret id (InvalidParameterException)',
  ValidationException: 'AWS rejected the secret id (ValidationException)',
};

/** Errors by which AWS refuses the credentials kiln signed with, whatever the secret. */
const CREDENTIALS_REFUSED = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'ExpiredTokenException',
]);

/**
 * AWS Secrets Manager behind the SecretManager port: GetSecretValue on the AWSCURRENT version,
 * the SecretString whole or one key of it read as a JSON object. A secret stored as
 * SecretBinary resolves to its bytes as UTF-8 text when no key is asked for; binary secrets
 * have no JSON keys, and bytes that are not UTF-8 are refused rather than mangled.
 *
 * Credentials: `credentialsFile` (a shared credentials file, profile `profile` or `default`),
 * else the SDK's default chain with `profile`. The SDK retries network errors, timeouts,
 * throttling and 5xx up to `limits.attempts` in all; each attempt may take `limits.timeoutMs`.
 */
export class AwsSecretsManager implements SecretManager {
  readonly type = 'aws_secretsmanager';
  readonly #client: SecretsManagerClient;

  constructor(settings: AwsSecretsManagerSettings, limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS) {
    this.#client = new SecretsManagerClient({
      region: settings.region,
      ...(settings.endpoint !== undefined && { endpoint: settings.endpoint }),
      // A file names its profile explicitly ('default' when unset) so that AWS_PROFILE in kiln's
      // own environment cannot redirect one tenant's lookups to another profile.
      ...(settings.credentialsFile !== undefined
        ? {
            credentials: fromIni({
              filepath: settings.credentialsFile,
              profile: settings.profile ?? 'default',
            }),
          }
        : settings.profile !== undefined && { profile: settings.profile }),
      maxAttempts: limits.attempts,
      requestHandler: {
        connectionTimeout: limits.timeoutMs,
        // Without throwOnRequestTimeout the SDK only logs a warning when requestTimeout passes.
        requestTimeout: limits.timeoutMs,
        throwOnRequestTimeout: true,
        // Bounds a response whose body stalls after its headers arrived.
        socketTimeout: limits.timeoutMs,
      },
    });
  }

  async resolve(reference: SecretReference, signal?: AbortSignal): Promise<string> {
    if (reference.manager !== 'aws_secretsmanager') {
      throw new Error(`AwsSecretsManager cannot resolve a ${reference.manager} reference`);
    }
    let output: GetSecretValueCommandOutput;
    try {
      output = await this.#client.send(
        new GetSecretValueCommand({ SecretId: reference.secretId }),
        {
          abortSignal: signal,
        },
      );
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw this.translate(reference, error);
    }
    return valueOf(reference, output);
  }

  /**
   * The port's error for what the SDK threw. Only the AWS error code and HTTP status are kept:
   * the SDK's error (and its `$response`) stays out of the message and the cause, so nothing a
   * server or a credentials file said reaches a log.
   */
  private translate(reference: AwsReference, error: unknown): Error {
    const { name, code, status } = errorFacts(error);
    const notFound = NOT_FOUND[name];
    if (notFound !== undefined) return new SecretNotFoundError(reference.text, notFound);
    if (CREDENTIALS_REFUSED.has(name)) {
      return new SecretManagerUnavailableError(
        this.type,
        `AWS refused kiln's credentials (${name})`,
      );
    }
    if (name === 'CredentialsProviderError') {
      return new SecretManagerUnavailableError(
        this.type,
        'no AWS credentials for kiln could be loaded',
      );
    }
    const detail = [name, code, status !== undefined ? `HTTP ${status}` : undefined]
      .filter((part) => part !== undefined && part !== '')
      .join(', ');
    return new SecretManagerUnavailableError(
      this.type,
      `Secrets Manager could not be asked for ${reference.text} (${detail})`,
    );
  }
}

/**
 * The name, Node error code and HTTP status of an SDK or network error. Duck-typed: Node's own
 * errors may come from another realm than the SDK's `Error`.
 */
function errorFacts(error: unknown): { name: string; code?: string; status?: number } {
  if (typeof error !== 'object' || error === null) return { name: typeof error };
  const { name, code, $metadata } = error as {
    name?: unknown;
    code?: unknown;
    $metadata?: { httpStatusCode?: unknown };
  };
  const status = $metadata?.httpStatusCode;
  return {
    name: typeof name === 'string' ? name : 'Error',
    ...(typeof code === 'string' && { code }),
    ...(typeof status === 'number' && { status }),
  };
}

/** The whole secret, or the string under `reference.key` in it. */
function valueOf(reference: AwsReference, output: GetSecretValueCommandOutput): string {
  if (output.SecretString !== undefined) {
    return reference.key === undefined
      ? output.SecretString
      : keyOf(reference.text, reference.key, output.SecretString);
  }
  if (output.SecretBinary !== undefined) {
    if (reference.key !== undefined) {
      throw new SecretNotFoundError(reference.text, 'binary secrets are not supported with a #key');
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(output.SecretBinary);
    } catch {
      throw new SecretNotFoundError(reference.text, 'the binary secret is not UTF-8 text');
    }
  }
  throw new SecretNotFoundError(reference.text, 'the secret version has no value');
}

function keyOf(text: string, key: string, secretString: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(secretString);
  } catch {
    throw new SecretNotFoundError(text, 'the secret is not a JSON object, so it has no keys');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SecretNotFoundError(text, 'the secret is not a JSON object, so it has no keys');
  }
  if (!Object.hasOwn(parsed, key)) {
    throw new SecretNotFoundError(text, `the secret has no key "${key}"`);
  }
  const value = (parsed as Record<string, unknown>)[key];
  if (typeof value !== 'string') {
    throw new SecretNotFoundError(text, `the key "${key}" does not hold a string`);
  }
  return value;
}
