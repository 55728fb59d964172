import { withoutCredentials } from '../common/url-credentials.js';
import type { SecretManagerType } from '../manifest/types.js';
import { isSecretReference, parseSecretReference, schemeOf } from '../manifest/secret-reference.js';
import {
  type SecretManager,
  SecretManagerUnavailableError,
  SecretNotFoundError,
} from './secret-manager.js';
import { type SecretReference } from '../manifest/secret-reference.js';
import type { SecretManagerSettingsByType } from './settings.js';

/** Where a tenant's manager settings come from (IntegrationsService). */
export interface ManagerSettingsSource {
  secretManager<T extends SecretManagerType>(
    tenantId: string,
    type: T,
  ): Promise<SecretManagerSettingsByType[T] | undefined>;
}

/** Builds the adapter for a manager's settings (secret-managers.ts; tests give their own). */
export type SecretManagerFactory = <T extends SecretManagerType>(
  type: T,
  settings: SecretManagerSettingsByType[T],
) => SecretManager;

export type Resolution =
  | { readonly ok: true; readonly values: Readonly<Record<string, string>> }
  | { readonly ok: false; readonly message: string };

/**
 * Turns a build's values (field → plain value or reference) into the values its Job gets, when
 * the build starts (docs/adr/0021-secret-references.md). Each distinct reference is asked of its
 * manager once; the adapters bound every call (timeout, retries), so a manager that is down ends
 * resolution with a message instead of hanging it. A failure names the field and the reference,
 * never a value. One adapter is kept per tenant and manager (a Vault login is reused).
 */
export class SecretResolver {
  private readonly adapters = new Map<string, { settings: string; adapter: SecretManager }>();

  constructor(
    private readonly settings: ManagerSettingsSource,
    private readonly factory: SecretManagerFactory,
  ) {}

  async resolve(
    tenantId: string,
    fields: Readonly<Record<string, string>>,
    signal?: AbortSignal,
  ): Promise<Resolution> {
    const problems: string[] = [];
    const references = new Map<string, SecretReference>();
    for (const [field, value] of Object.entries(fields)) {
      if (!isSecretReference(value)) continue;
      const parsed = parseSecretReference(value);
      if ('problem' in parsed) problems.push(`${field}: ${parsed.problem}`);
      else references.set(value, parsed.reference);
    }
    if (problems.length > 0) return { ok: false, message: problems.join('; ') };

    const resolved = new Map<string, string>();
    const failures = new Map<string, string>();
    await Promise.all(
      [...references.values()].map(async (reference) => {
        try {
          const adapter = await this.adapterFor(tenantId, reference.manager);
          resolved.set(reference.text, await adapter.resolve(reference, signal));
        } catch (error) {
          failures.set(reference.text, describe(error, reference));
        }
      }),
    );
    if (failures.size > 0) {
      const message = Object.entries(fields)
        .filter(([, value]) => failures.has(value))
        .map(([field, value]) => `${field}: ${failures.get(value)}`)
        .join('; ');
      return { ok: false, message };
    }
    const values: Record<string, string> = {};
    for (const [field, value] of Object.entries(fields))
      values[field] = resolved.get(value) ?? value;
    return { ok: true, values };
  }

  private async adapterFor(tenantId: string, type: SecretManagerType): Promise<SecretManager> {
    const settings = await this.settings.secretManager(tenantId, type);
    if (settings === undefined) throw new NoSettingsError(type);
    const key = `${tenantId}/${type}`;
    const text = JSON.stringify(settings);
    const cached = this.adapters.get(key);
    if (cached?.settings === text) return cached.adapter;
    const adapter = this.factory(type, settings);
    this.adapters.set(key, { settings: text, adapter });
    return adapter;
  }
}

class NoSettingsError extends Error {
  constructor(readonly manager: SecretManagerType) {
    super(
      `the tenant has no ${manager} settings (a tenant admin sets them: kiln settings secret-manager set ${manager}, or PUT /api/v1/settings/secret-managers/${manager})`,
    );
  }
}

/**
 * What went wrong, in words that name the reference and never hold a value; a URL in an adapter's
 * message is shown without credentials.
 */
function describe(error: unknown, reference: SecretReference): string {
  return withoutCredentials(describeFailure(error, reference));
}

function describeFailure(error: unknown, reference: SecretReference): string {
  if (error instanceof SecretNotFoundError) {
    return `${reference.text} could not be resolved: ${error.message.startsWith(reference.text) ? error.message.slice(reference.text.length + 2) : error.message}`;
  }
  if (error instanceof SecretManagerUnavailableError) {
    return `${reference.text} could not be resolved: ${error.message}`;
  }
  if (error instanceof NoSettingsError) return `${reference.text}: ${error.message}`;
  if (error instanceof Error && error.name === 'AbortError') {
    return `${reference.text}: resolution was cancelled`;
  }
  // An adapter's unexpected failure: its message may come from a vendor SDK, so it is not shown.
  return `${reference.text} could not be resolved: ${schemeOf(reference.manager)} adapter failed (${error instanceof Error ? error.name : 'error'})`;
}
