import { type Api, createApi, unwrap } from './api/client.js';
import type { Schemas } from './api/paths.js';
import { readConfig, type StoredConfig, writeConfig } from './config-file.js';
import { UsageError } from './exit-codes.js';

/** The environment variables kiln reads; each overrides the configuration file. */
export interface CliEnvironment {
  readonly KILN_URL?: string | undefined;
  readonly KILN_TOKEN?: string | undefined;
  readonly KILN_TENANT?: string | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/**
 * Where kiln is and who the CLI is there: each of KILN_URL, KILN_TOKEN and KILN_TENANT (or
 * --tenant) over its entry in the configuration file. A CI job needs no file: KILN_URL and
 * KILN_TOKEN are enough.
 */
export class Session {
  private stored: StoredConfig = {};
  private api: Api | undefined;
  private tenant: Promise<string> | undefined;
  /** Set by `kiln login`: the kiln and token it is logging in with, over the environment. */
  private forced: { url: string; token: string | undefined } | undefined;
  /** `--tenant`, when the command line gives one. */
  tenantFlag: string | undefined;

  constructor(
    readonly configPath: string,
    private readonly env: CliEnvironment,
  ) {}

  async load(): Promise<void> {
    this.stored = await readConfig(this.configPath);
  }

  get config(): StoredConfig {
    return this.stored;
  }

  /** The token comes from the configuration file (not KILN_TOKEN, not a login under way). */
  get usesStoredToken(): boolean {
    return this.forced === undefined && nonEmpty(this.env.KILN_TOKEN) === undefined;
  }

  get tenantFromEnvironment(): boolean {
    return nonEmpty(this.env.KILN_TENANT) !== undefined;
  }

  /** The API's origin, without a trailing slash. */
  get url(): string {
    const url = this.forced?.url ?? nonEmpty(this.env.KILN_URL) ?? this.stored.url;
    if (url === undefined) {
      throw new UsageError('no kiln URL: run `kiln login <url>` or set KILN_URL');
    }
    return normaliseUrl(url);
  }

  get token(): string {
    const token = this.forced?.token ?? nonEmpty(this.env.KILN_TOKEN) ?? this.stored.token;
    if (token === undefined) {
      throw new UsageError('not logged in: run `kiln login` or set KILN_TOKEN');
    }
    return token;
  }

  /** The typed client, as the logged-in user (or KILN_TOKEN). */
  client(): Api {
    this.api ??= createApi(this.url, this.token);
    return this.api;
  }

  /** From now on, talk to `url` as `token` (`kiln login`), whatever the environment says. */
  use(url: string, token: string | undefined): void {
    this.forced = { url, token };
    this.api = undefined;
    this.tenant = undefined;
  }

  /** A client without a token, for `kiln login`. */
  anonymous(url: string): Api {
    return createApi(url, undefined);
  }

  /**
   * The tenant the command acts in, by id: --tenant, else KILN_TENANT, else the one `kiln tenant
   * use` or `kiln login` stored, else an API token's own tenant. A name is looked up among the
   * caller's tenants.
   */
  tenantId(): Promise<string> {
    this.tenant ??= this.resolveTenant();
    return this.tenant;
  }

  /** The X-Tenant-ID header of a tenant-scoped route. */
  async tenantHeader(): Promise<{ 'X-Tenant-ID': string }> {
    return { 'X-Tenant-ID': await this.tenantId() };
  }

  async me(): Promise<Schemas['CallerDto']> {
    return unwrap(this.client().GET('/api/v1/auth/me'));
  }

  /** Saves `changes` over the stored configuration. */
  async save(changes: { url?: string; token?: string | undefined; tenant?: string | undefined }) {
    const next: Record<string, string> = {};
    for (const [key, value] of Object.entries({ ...this.stored, ...changes })) {
      if (typeof value === 'string') next[key] = value;
    }
    await writeConfig(this.configPath, next);
    this.stored = next;
  }

  /** A tenant's id from its id or name (names are looked up among the caller's tenants). */
  async tenantIdOf(ref: string): Promise<string> {
    if (isUuid(ref)) return ref.toLowerCase();
    const { tenants } = await unwrap(this.client().GET('/api/v1/auth/tenants'));
    const found = tenants.find((tenant) => tenant.name === ref);
    if (found === undefined) {
      const names = tenants.map((tenant) => tenant.name).join(', ');
      throw new UsageError(
        `you are not a member of a tenant named ${ref}${names === '' ? '' : ` (yours: ${names})`}`,
      );
    }
    return found.id;
  }

  private async resolveTenant(): Promise<string> {
    const ref = nonEmpty(this.tenantFlag) ?? nonEmpty(this.env.KILN_TENANT) ?? this.stored.tenant;
    if (ref !== undefined) return this.tenantIdOf(ref);
    if (this.token.startsWith('kiln_')) {
      const { token } = await this.me();
      if (token !== null) return token.tenant_id;
    }
    throw new UsageError(
      'no tenant chosen: pass --tenant <id|name>, set KILN_TENANT, or run `kiln tenant use <id|name>`',
    );
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/** `http(s)://host[:port][/path]` without a trailing slash; a bare host gets https://. */
export function normaliseUrl(value: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `https://${value}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new UsageError(`${value} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`${value}: kiln's URL is http:// or https://`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new UsageError(`${value}: the URL must not carry credentials`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
