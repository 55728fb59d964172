import { randomBytes } from 'node:crypto';
import { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, createServer, type Server } from 'node:https';
import { type AddressInfo, type LookupFunction } from 'node:net';
import { createTestTls, type TestTls } from './tls.js';

/*
 * A fake Azure Key Vault, and the Microsoft Entra ID endpoints a workload identity signs in
 * with, on one HTTPS port. It speaks the documented wire protocol, as much of it as
 * @azure/keyvault-secrets and @azure/identity use to read a secret:
 *
 * Key Vault
 * - Get Secret: `GET {vault}/secrets/{name}[/{version}]?api-version=…` answers
 *   `{ value, id, attributes }`; 404 `SecretNotFound` for an unknown name or version.
 *   https://learn.microsoft.com/rest/api/keyvault/secrets/get-secret/get-secret
 * - Authentication: a request without a valid bearer token gets 401 and
 *   `WWW-Authenticate: Bearer authorization="{login}/{tenant}", resource="https://vault.azure.net"`;
 *   a caller that may not read the secret gets 403 `Forbidden`.
 *   https://learn.microsoft.com/azure/key-vault/general/authentication-requests-and-responses
 * - Errors are `{ error: { code, message } }`.
 *   https://learn.microsoft.com/azure/key-vault/general/rest-error-codes
 *
 * Microsoft Entra ID
 * - OpenID configuration: `GET {authority}/{tenant}/v2.0/.well-known/openid-configuration`.
 *   https://learn.microsoft.com/entra/identity-platform/v2-protocols-oidc
 * - Client credentials with a federated credential: `POST {authority}/{tenant}/oauth2/v2.0/token`,
 *   form-encoded `grant_type=client_credentials`, `client_id`, `scope`,
 *   `client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer` and
 *   `client_assertion` (the projected service-account token); answers `{ token_type,
 *   expires_in, access_token }`, or `{ error, error_description, error_codes }`.
 *   https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow
 *
 * The vault is reached by name (`vaultUrl`, a subdomain of vault.azure.net as the SDK's challenge
 * check requires) through `agent()`, which resolves that name to 127.0.0.1 and trusts the fake's
 * throwaway CA; the authority is `https://127.0.0.1:{port}`.
 */

/** What a request was for: Key Vault, or Entra ID's OpenID configuration or token endpoint. */
export type FakeAzureEndpoint = 'vault' | 'openid' | 'token';

export interface FakeAzureKeyVaultOptions {
  readonly tenantId: string;
  /** The workload identity's application (client) id. */
  readonly clientId: string;
  /** The service-account token the identity's federated credential accepts as assertion. */
  readonly federatedToken: string;
  /** Lifetime of the access tokens it issues; default one hour. */
  readonly tokenLifetimeSeconds?: number;
}

export interface RecordedRequest {
  readonly endpoint: FakeAzureEndpoint;
  readonly method: string;
  /** Path and query, as sent. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** The vault's host name; the SDK only sends tokens to a subdomain of the challenge resource. */
export const FAKE_VAULT_HOST = 'kiln-fake.vault.azure.net';
const VAULT_RESOURCE = 'https://vault.azure.net';
const VAULT_SCOPE = `${VAULT_RESOURCE}/.default`;
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
// The Get Secret api-versions Key Vault documents; others are refused as the service does.
const API_VERSIONS = new Set(['7.0', '7.1', '7.2', '7.3', '7.4', '7.5', '7.6', '2025-07-01']);
const SECRET_NAME = /^[0-9A-Za-z-]{1,127}$/;

let tls: TestTls | undefined;

interface SecretVersion {
  readonly version: string;
  readonly value: string;
  readonly created: number;
}

/** The next `remaining` requests to an endpoint get `answer` as status, or no answer at all. */
interface Fault {
  readonly answer: number | 'hang';
  remaining: number;
}

export class FakeAzureKeyVault {
  /** Every request received, oldest first. */
  readonly requests: RecordedRequest[] = [];
  /** Vault requests are accepted and never answered. */
  hang = false;
  /** Entra ID requests (OpenID configuration, token) are accepted and never answered. */
  hangLogin = false;
  private readonly secrets = new Map<string, SecretVersion[]>();
  private readonly denied = new Set<string>();
  private readonly tokens = new Map<string, number>();
  private readonly faults: Record<FakeAzureEndpoint, Fault[]> = {
    vault: [],
    openid: [],
    token: [],
  };

  private constructor(
    private readonly server: Server,
    readonly ca: string,
    private readonly options: FakeAzureKeyVaultOptions,
  ) {}

  static async start(options: FakeAzureKeyVaultOptions): Promise<FakeAzureKeyVault> {
    // One throwaway CA per test process: openssl takes a noticeable moment.
    tls ??= createTestTls([FAKE_VAULT_HOST]);
    const server = createServer({ cert: tls.cert, key: tls.key });
    const fake = new FakeAzureKeyVault(server, tls.ca, options);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      fake.receive(request, response);
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The vault's URL, by name: reach it through `agent()`. */
  get vaultUrl(): string {
    return `https://${FAKE_VAULT_HOST}:${this.port}`;
  }

  /** The Entra ID authority host (`AZURE_AUTHORITY_HOST`). */
  get authorityHost(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** The same server by address, for clients that need no name. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /**
   * An https.Agent that trusts the fake's CA and resolves the vault's name to 127.0.0.1 (any
   * other name fails as unknown), so nothing leaves the machine.
   */
  agent(): Agent {
    const lookup: LookupFunction = (hostname, options, callback) => {
      if (hostname !== FAKE_VAULT_HOST && hostname !== '127.0.0.1') {
        const error: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        error.code = 'ENOTFOUND';
        callback(error, '');
      } else if (options.all === true) {
        callback(null, [{ address: '127.0.0.1', family: 4 }]);
      } else {
        callback(null, '127.0.0.1', 4);
      }
    };
    return new Agent({ ca: this.ca, lookup });
  }

  /** Stores `value` as the newest version of secret `name`; returns the version's id. */
  put(name: string, value: string): string {
    const version = randomBytes(16).toString('hex');
    const versions = this.secrets.get(name) ?? [];
    versions.push({ version, value, created: Math.floor(Date.now() / 1000) });
    this.secrets.set(name, versions);
    return version;
  }

  /** The workload identity may no longer read secret `name`: 403, as an RBAC denial. */
  deny(name: string): void {
    this.denied.add(name);
  }

  /** The next `count` requests to `endpoint` are answered with `status` and its error body. */
  failNext(status: number, count = 1, endpoint: FakeAzureEndpoint = 'vault'): void {
    this.faults[endpoint].push({ answer: status, remaining: count });
  }

  /** The next `count` requests to `endpoint` are accepted and never answered. */
  hangNext(count = 1, endpoint: FakeAzureEndpoint = 'vault'): void {
    this.faults[endpoint].push({ answer: 'hang', remaining: count });
  }

  /** The requests received by one endpoint. */
  requestsTo(endpoint: FakeAzureEndpoint): RecordedRequest[] {
    return this.requests.filter((request) => request.endpoint === endpoint);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((done) => this.server.close(() => done()));
  }

  private receive(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', this.url);
      const endpoint = endpointOf(url.pathname);
      const body = Buffer.concat(chunks).toString('utf8');
      this.requests.push({
        endpoint,
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body,
      });
      if (endpoint === 'vault' ? this.hang : this.hangLogin) return;
      const fault = this.faults[endpoint][0];
      if (fault !== undefined) {
        if (--fault.remaining === 0) this.faults[endpoint].shift();
        if (fault.answer === 'hang') return;
        if (endpoint === 'vault') {
          const code = fault.answer === 429 ? 'Throttled' : 'ServiceUnavailable';
          vaultError(response, fault.answer, code, 'The fake was told to fail.');
        } else {
          loginError(
            response,
            fault.answer,
            'temporarily_unavailable',
            90033,
            'The fake was told to fail.',
          );
        }
        return;
      }
      if (endpoint === 'vault') this.vault(request, url, response);
      else this.login(request, url, body, response);
    });
  }

  private vault(request: IncomingMessage, url: URL, response: ServerResponse): void {
    const apiVersion = url.searchParams.get('api-version');
    if (apiVersion === null) {
      vaultError(response, 400, 'BadParameter', 'The api-version query parameter is missing.');
      return;
    }
    if (!API_VERSIONS.has(apiVersion)) {
      vaultError(
        response,
        400,
        'BadParameter',
        `The specified version (${apiVersion}) is not recognized.`,
      );
      return;
    }
    if (!this.authorized(request.headers.authorization)) {
      response.setHeader(
        'WWW-Authenticate',
        `Bearer authorization="https://login.microsoftonline.com/${this.options.tenantId}", resource="${VAULT_RESOURCE}"`,
      );
      const message =
        request.headers.authorization === undefined
          ? 'AKV10000: Request is missing a Bearer or PoP token.'
          : 'AKV10032: Invalid issuer or token.';
      vaultError(response, 401, 'Unauthorized', message);
      return;
    }
    if (request.method !== 'GET') {
      vaultError(
        response,
        405,
        'MethodNotAllowed',
        `${request.method} is not served by this fake.`,
      );
      return;
    }
    const [name = '', version = '', ...rest] = url.pathname.slice('/secrets/'.length).split('/');
    if (!SECRET_NAME.test(name) || rest.length > 0) {
      vaultError(response, 400, 'BadParameter', 'The secret name or path is not valid.');
      return;
    }
    if (this.denied.has(name)) {
      vaultError(
        response,
        403,
        'Forbidden',
        `Caller is not authorized to perform action on resource. Action: 'Microsoft.KeyVault/vaults/secrets/getSecret/action' Resource: '${name}'`,
        'ForbiddenByRbac',
      );
      return;
    }
    const versions = this.secrets.get(name) ?? [];
    const secret = version === '' ? versions.at(-1) : versions.find((v) => v.version === version);
    if (secret === undefined) {
      const id = version === '' ? name : `${name}/${version}`;
      vaultError(
        response,
        404,
        'SecretNotFound',
        `A secret with (name/id) ${id} was not found in this key vault.`,
      );
      return;
    }
    json(response, 200, {
      value: secret.value,
      id: `https://${request.headers.host ?? FAKE_VAULT_HOST}/secrets/${name}/${secret.version}`,
      attributes: {
        enabled: true,
        created: secret.created,
        updated: secret.created,
        recoveryLevel: 'Recoverable+Purgeable',
        recoverableDays: 90,
      },
      tags: {},
    });
  }

  /** A bearer token this fake issued for the vault and that has not expired. */
  private authorized(header: string | undefined): boolean {
    const token = /^Bearer (\S+)$/.exec(header ?? '')?.[1];
    const expiresAt = token === undefined ? undefined : this.tokens.get(token);
    return expiresAt !== undefined && Date.now() < expiresAt;
  }

  private login(request: IncomingMessage, url: URL, body: string, response: ServerResponse): void {
    const { tenantId } = this.options;
    const [tenant = '', ...endpoint] = url.pathname.slice(1).split('/');
    const path = endpoint.join('/');
    if (tenant !== tenantId) {
      loginError(response, 400, 'invalid_tenant', 90002, `Tenant '${tenant}' not found.`);
      return;
    }
    if (request.method === 'GET' && path === 'v2.0/.well-known/openid-configuration') {
      const base = `${this.authorityHost}/${tenantId}`;
      json(response, 200, {
        issuer: `${base}/v2.0`,
        authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
        token_endpoint: `${base}/oauth2/v2.0/token`,
        jwks_uri: `${this.authorityHost}/${tenantId}/discovery/v2.0/keys`,
        end_session_endpoint: `${base}/oauth2/v2.0/logout`,
        token_endpoint_auth_methods_supported: [
          'client_secret_post',
          'private_key_jwt',
          'client_secret_basic',
        ],
        response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
        subject_types_supported: ['pairwise'],
        id_token_signing_alg_values_supported: ['RS256'],
        scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
        tenant_region_scope: 'EU',
        cloud_instance_name: 'microsoftonline.com',
      });
      return;
    }
    if (request.method === 'POST' && path === 'oauth2/v2.0/token') {
      this.token(request, body, response);
      return;
    }
    loginError(
      response,
      404,
      'invalid_request',
      900561,
      `The endpoint ${url.pathname} is not served by this fake.`,
    );
  }

  private token(request: IncomingMessage, body: string, response: ServerResponse): void {
    const { clientId, federatedToken, tokenLifetimeSeconds = 3600 } = this.options;
    if (!(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
      loginError(
        response,
        400,
        'invalid_request',
        900144,
        "The request body must contain the following parameter: 'grant_type'.",
      );
      return;
    }
    const form = new URLSearchParams(body);
    if (form.get('grant_type') !== 'client_credentials') {
      loginError(
        response,
        400,
        'unsupported_grant_type',
        70003,
        'The app requested an unsupported grant type.',
      );
      return;
    }
    if (form.get('client_id') !== clientId) {
      loginError(
        response,
        400,
        'unauthorized_client',
        700016,
        `Application with identifier '${form.get('client_id')}' was not found in the directory.`,
      );
      return;
    }
    if (
      form.get('client_assertion_type') !== ASSERTION_TYPE ||
      form.get('client_assertion') !== federatedToken
    ) {
      loginError(
        response,
        401,
        'invalid_client',
        700213,
        'No matching federated identity record found for presented assertion subject.',
      );
      return;
    }
    const scopes = (form.get('scope') ?? '').split(' ');
    if (!scopes.includes(VAULT_SCOPE)) {
      loginError(
        response,
        400,
        'invalid_scope',
        1002012,
        `The provided value for scope ${form.get('scope')} is not valid.`,
      );
      return;
    }
    const accessToken = randomBytes(24).toString('base64url');
    this.tokens.set(accessToken, Date.now() + tokenLifetimeSeconds * 1000);
    json(response, 200, {
      token_type: 'Bearer',
      expires_in: tokenLifetimeSeconds,
      ext_expires_in: tokenLifetimeSeconds,
      access_token: accessToken,
    });
  }
}

/** Key Vault's paths start with /secrets/; everything else is Entra ID's. */
function endpointOf(path: string): FakeAzureEndpoint {
  if (path.startsWith('/secrets/')) return 'vault';
  return path.endsWith('/.well-known/openid-configuration') ? 'openid' : 'token';
}

function json(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}

function vaultError(
  response: ServerResponse,
  status: number,
  code: string,
  message: string,
  innerCode?: string,
): void {
  json(response, status, {
    error: {
      code,
      message,
      ...(innerCode === undefined ? {} : { innererror: { code: innerCode } }),
    },
  });
}

function loginError(
  response: ServerResponse,
  status: number,
  error: string,
  aadsts: number,
  description: string,
): void {
  json(response, status, {
    error,
    error_description: `AADSTS${aadsts}: ${description}`,
    error_codes: [aadsts],
    timestamp: new Date().toISOString(),
  });
}
