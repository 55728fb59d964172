import { readFileSync } from 'node:fs';
import type { Agent } from 'node:https';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import {
  createDefaultHttpClient,
  isRestError,
  type PipelinePolicy,
  RestError,
} from '@azure/core-rest-pipeline';
import {
  AggregateAuthenticationError,
  AuthenticationError,
  AuthenticationRequiredError,
  CredentialUnavailableError,
  DefaultAzureCredential,
  type TokenCredential,
  WorkloadIdentityCredential,
} from '@azure/identity';
import { SecretClient, type SecretClientOptions } from '@azure/keyvault-secrets';
import {
  DEFAULT_RESOLVE_LIMITS,
  type ResolveLimits,
  type SecretManager,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from './secret-manager.js';
import { type AzureReference, type SecretReference } from '../manifest/secret-reference.js';
import type { AzureKeyVaultSettings } from './settings.js';
import { untilAborted } from './abort.js';

/**
 * Azure Key Vault through @azure/keyvault-secrets, signed in with @azure/identity.
 * - Get Secret: `GET {vault}/secrets/{name}[/{version}]?api-version=…` → `{ value, id, … }`
 *   https://learn.microsoft.com/rest/api/keyvault/secrets/get-secret/get-secret
 * - The client authenticates on Key Vault's 401 challenge, asking the credential for a token for
 *   the challenge's resource (https://vault.azure.net) in its tenant
 *   https://learn.microsoft.com/azure/key-vault/general/authentication-requests-and-responses
 * - Workload identity: the federated token file is the client assertion of an Entra ID client
 *   credentials grant https://learn.microsoft.com/entra/workload-id/workload-identity-federation
 * - Proxy: @azure/core-rest-pipeline's proxyPolicy sends every request (Key Vault's and, through
 *   @azure/identity's client, MSAL's sign-in) through HTTPS_PROXY (or ALL_PROXY, HTTP_PROXY)
 *   unless NO_PROXY names the host, reading kiln's environment itself; it leaves alone a request
 *   that carries an agent.
 */

/**
 * An https.Agent that takes every request's route itself, bypassing HTTPS_PROXY (tests: one that
 * resolves the fake's name and trusts its CA). Production gives none.
 */
export interface AzureKeyVaultTransport {
  readonly agent?: Agent;
}

export class AzureKeyVault implements SecretManager {
  readonly type = 'azure_keyvault' as const;
  /** A resolve's whole budget: every attempt of one call and the back-off between them. */
  private readonly deadlineMs: number;
  private secretClient: SecretClient | undefined;

  constructor(
    private readonly settings: AzureKeyVaultSettings,
    private readonly limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS,
    private readonly transport: AzureKeyVaultTransport = {},
  ) {
    this.deadlineMs =
      limits.attempts * limits.timeoutMs + (limits.attempts - 1) * maxBackoff(limits);
  }

  /**
   * The secret's value (its newest version unless the reference names one), or one key of it read
   * as a JSON object. Rejects within the budget above even where the SDK does not honour an abort
   * (Entra ID's token exchange runs under MSAL, which is not given the signal); an abort of
   * `signal` rejects with the signal's reason.
   */
  async resolve(reference: SecretReference, signal?: AbortSignal): Promise<string> {
    if (reference.manager !== 'azure_keyvault') {
      throw new Error(`AzureKeyVault cannot resolve a ${reference.manager} reference`);
    }
    signal?.throwIfAborted();
    const deadline = AbortSignal.timeout(this.deadlineMs);
    const abortSignal = signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
    let value: string | undefined;
    try {
      const reading = this.client().getSecret(reference.name, {
        version: reference.version,
        abortSignal,
      });
      value = (await untilAborted(reading, abortSignal)).value;
    } catch (error) {
      if (signal?.aborted === true) throw signal.reason;
      throw this.failure(reference, error, deadline.aborted);
    }
    return valueOf(reference, value);
  }

  /** The SDK client, made on first use so a credential that cannot be built fails a resolve. */
  private client(): SecretClient {
    this.secretClient ??= this.createClient();
    return this.secretClient;
  }

  private createClient(): SecretClient {
    const { attempts, timeoutMs } = this.limits;
    const { agent } = this.transport;
    const trusted = agent === undefined ? this.trustedContext() : undefined;
    const pipeline = {
      retryOptions: {
        maxRetries: attempts - 1,
        retryDelayInMs: timeoutMs / 10,
        maxRetryDelayInMs: maxBackoff(this.limits),
      },
      additionalPolicies: [
        { policy: perAttemptTimeout(timeoutMs), position: 'perRetry' as const },
        ...(trusted === undefined
          ? []
          : [{ policy: trusting(trusted), position: 'perCall' as const }]),
      ],
      ...(agent === undefined ? {} : { agent }),
      // The SDK's clients otherwise share one process-wide HTTP client, whose kept-alive
      // connections would carry this CA's trust to another tenant's requests.
      ...(trusted === undefined ? {} : { httpClient: createDefaultHttpClient() }),
    } satisfies SecretClientOptions;
    return new SecretClient(this.settings.vaultUrl, credential(this.settings, pipeline), pipeline);
  }

  /**
   * Node's public roots and the CAs of `caFile`, or undefined without one. Read as the client is
   * made, so a file that cannot be used fails this resolve and is read again by the next.
   */
  private trustedContext(): SecureContext | undefined {
    const { caFile } = this.settings;
    if (caFile === undefined) return undefined;
    let pem: string;
    try {
      pem = readFileSync(caFile, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new UnusableCaFile(`cannot read the CA file ${caFile} (${code})`);
    }
    // createSecureContext ignores text that is not a certificate: say so here, not as a TLS error.
    if (!pem.includes('-----BEGIN CERTIFICATE-----')) {
      throw new UnusableCaFile(`the CA file ${caFile} holds no PEM certificate`);
    }
    return createSecureContext({ ca: [...rootCertificates, pem] });
  }

  /** Why a read failed, in words that name the reference and never carry a value or a token. */
  private failure(reference: AzureReference, error: unknown, timedOut: boolean): Error {
    const unavailable = (detail: string): SecretManagerUnavailableError =>
      new SecretManagerUnavailableError('azure_keyvault', `reading ${reference.text}: ${detail}`);
    if (timedOut) return unavailable(`Azure did not answer within ${this.deadlineMs} ms`);
    if (error instanceof UnusableCaFile) return unavailable(error.message);
    if (!isRestError(error)) return unavailable(signInFailure(error, this.settings.authorityHost));
    const vault = this.settings.vaultUrl;
    const { statusCode, code } = error;
    const version = reference.version === undefined ? '' : ` version ${reference.version}`;
    switch (statusCode) {
      case undefined:
        return code === 'ETIMEDOUT'
          ? unavailable(`Key Vault ${vault} did not answer within ${this.limits.timeoutMs} ms`)
          : unavailable(`cannot reach Key Vault ${vault} (${code ?? firstLine(error.message)})`);
      case 404:
        return new SecretNotFoundError(
          reference.text,
          `Key Vault ${vault} has no secret ${reference.name}${version}`,
        );
      case 403:
        return new SecretNotFoundError(
          reference.text,
          `Key Vault ${vault} does not let kiln's identity read the secret ${reference.name} (${code ?? 'Forbidden'})`,
        );
      case 401:
        return unavailable(`Key Vault ${vault} refused kiln's access token (HTTP 401)`);
      default:
        return unavailable(`Key Vault ${vault} answered HTTP ${statusCode}`);
    }
  }
}

/**
 * Why the credential gave no token. Entra ID's own words (error_description) are left out: only
 * its error and AADSTS codes are kept.
 */
function signInFailure(error: unknown, authorityHost: string | undefined): string {
  if (error instanceof AuthenticationError) {
    const { statusCode, errorResponse } = error;
    return statusCode === 429 || statusCode >= 500
      ? `Microsoft Entra ID answered HTTP ${statusCode} to kiln's sign-in`
      : `Azure refused kiln's workload identity (${errorResponse.error}, HTTP ${statusCode})`;
  }
  const message = error instanceof Error ? firstLine(error.message) : String(error);
  if (error instanceof AuthenticationRequiredError) {
    // MSAL renders Entra ID's refusal as "<error>: Error(s): <codes> - … AADSTS<n>: …"; any
    // other message is a failure before Entra ID answered (e.g. an unreadable token file).
    const aadsts = /AADSTS\d+/.exec(message)?.[0];
    const oauthError = /^([a-z_]+):/.exec(message)?.[1] ?? 'refused';
    if (aadsts === undefined) return `kiln's Azure sign-in failed: ${message}`;
    // RFC 6749 5.2's codes for a server that failed, as opposed to one that said no.
    return oauthError === 'temporarily_unavailable' || oauthError === 'server_error'
      ? `Microsoft Entra ID is unavailable (${oauthError}, ${aadsts})`
      : `Azure refused kiln's workload identity (${oauthError}, ${aadsts})`;
  }
  if (message.startsWith('endpoints_resolution_error')) {
    // MSAL could not read the authority's OpenID configuration: Entra ID unreachable or failing.
    return `cannot read Microsoft Entra ID's OpenID configuration from ${authorityHost ?? 'the default authority'}`;
  }
  if (
    error instanceof CredentialUnavailableError ||
    error instanceof AggregateAuthenticationError
  ) {
    return `no Azure credential could sign kiln in: ${message}`;
  }
  return message;
}

/**
 * Workload identity from the settings when they name a federated token file (tenant and client id
 * the settings leave out are read by the SDK from the environment the AKS webhook sets); else
 * DefaultAzureCredential's chain. A stated authority host is trusted as configured: instance
 * discovery would ask login.microsoftonline.com to vouch for it, which known clouds never need.
 */
function credential(
  settings: AzureKeyVaultSettings,
  pipeline: Pick<
    SecretClientOptions,
    'retryOptions' | 'additionalPolicies' | 'agent' | 'httpClient'
  >,
): TokenCredential {
  const { tenantId, clientId, federatedTokenFile, authorityHost } = settings;
  const common = {
    ...pipeline,
    authorityHost,
    disableInstanceDiscovery: authorityHost !== undefined,
  };
  if (federatedTokenFile !== undefined) {
    return new WorkloadIdentityCredential({
      ...common,
      tenantId,
      clientId,
      tokenFilePath: federatedTokenFile,
    });
  }
  return new DefaultAzureCredential({
    ...common,
    tenantId,
    managedIdentityClientId: clientId,
    workloadIdentityClientId: clientId,
  });
}

/**
 * Gives each HTTP attempt `timeoutMs` and turns its expiry into a network error (ETIMEDOUT), which
 * the SDK's retry policy retries; the SDK's own request timeout surfaces as an AbortError, which
 * it never retries.
 */
function perAttemptTimeout(timeoutMs: number): PipelinePolicy {
  return {
    name: 'kilnPerAttemptTimeout',
    async sendRequest(request, next) {
      request.timeout = timeoutMs;
      try {
        return await next(request);
      } catch (error) {
        const expired = error instanceof Error && error.name === 'AbortError';
        if (expired && request.abortSignal?.aborted !== true) {
          throw new RestError(`no answer within ${timeoutMs} ms`, { code: 'ETIMEDOUT' });
        }
        throw error;
      }
    },
  };
}

/**
 * Trusts `secureContext` on whichever route the SDK's proxy policy picks: it goes in the request's
 * https.request options (`requestOverrides`), which Node's https.Agent and the proxy policy's
 * HttpsProxyAgent (for the TLS session inside the CONNECT tunnel) both hand to tls.connect. An
 * agent of kiln's own would switch the proxy policy off, and the SDK's `tlsOptions` are dropped
 * on the proxy route.
 */
function trusting(secureContext: SecureContext): PipelinePolicy {
  return {
    name: 'kilnTrustedCa',
    sendRequest(request, next) {
      request.requestOverrides = { ...request.requestOverrides, secureContext };
      return next(request);
    },
  };
}

/** The longest back-off between two attempts: a fifth of an attempt's timeout. */
function maxBackoff(limits: ResolveLimits): number {
  return limits.timeoutMs / 5;
}

/** The value, or the string under `reference.key` when the value is a JSON object. */
function valueOf(reference: AzureReference, value: string | undefined): string {
  const notFound = (detail: string): SecretNotFoundError =>
    new SecretNotFoundError(reference.text, detail);
  if (value === undefined) throw notFound(`the secret ${reference.name} has no value`);
  if (reference.key === undefined) return value;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    // JSON.parse's message quotes the text: never pass it on.
    throw notFound(`the value of ${reference.name} is not JSON, so it has no key ${reference.key}`);
  }
  if (typeof parsed !== 'object' || parsed === null || !Object.hasOwn(parsed, reference.key)) {
    throw notFound(`the JSON value of ${reference.name} has no key ${reference.key}`);
  }
  const field: unknown = (parsed as Record<string, unknown>)[reference.key];
  if (typeof field !== 'string') {
    throw notFound(`the key ${reference.key} of ${reference.name} is not a string`);
  }
  return field;
}

/** The settings' `caFile` cannot be read or holds no certificate. */
class UnusableCaFile extends Error {}

function firstLine(text: string): string {
  return text.split('\n', 1)[0]!.trim();
}
