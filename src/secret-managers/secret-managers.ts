import type { SecretManagerType } from '../manifest/types.js';
import type { SecretReference } from '../manifest/secret-reference.js';
import {
  DEFAULT_RESOLVE_LIMITS,
  type ResolveLimits,
  type SecretManager,
} from './secret-manager.js';
import type { SecretManagerSettingsByType } from './settings.js';

/**
 * The adapter for a manager's settings: the factory SecretResolver uses in production. The
 * adapter's module, and with it its vendor's SDK (@azure/identity alone is about half a second
 * and tens of MB to load), is imported on the first resolve, so a process whose builds name no
 * such manager never loads it (docs/adr/0051-api-role-memory.md).
 */
export function createSecretManager<T extends SecretManagerType>(
  type: T,
  settings: SecretManagerSettingsByType[T],
  limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS,
): SecretManager {
  return new LazySecretManager(type, async () => {
    switch (type) {
      case 'vault': {
        const { VaultSecretManager } = await import('./vault.js');
        return new VaultSecretManager(settings as SecretManagerSettingsByType['vault'], limits);
      }
      case 'aws_secretsmanager': {
        const { AwsSecretsManager } = await import('./aws-secrets-manager.js');
        return new AwsSecretsManager(
          settings as SecretManagerSettingsByType['aws_secretsmanager'],
          limits,
        );
      }
      default: {
        const { AzureKeyVault } = await import('./azure-key-vault.js');
        return new AzureKeyVault(settings as SecretManagerSettingsByType['azure_keyvault'], limits);
      }
    }
  });
}

/** A manager whose adapter is made on its first resolve, and then used for every resolve. */
class LazySecretManager implements SecretManager {
  private adapter: Promise<SecretManager> | undefined;

  constructor(
    readonly type: SecretManagerType,
    private readonly load: () => Promise<SecretManager>,
  ) {}

  async resolve(reference: SecretReference, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    // A load that failed is tried again by the next resolve, not remembered.
    this.adapter ??= this.load().catch((error: unknown) => {
      this.adapter = undefined;
      throw error;
    });
    return (await this.adapter).resolve(reference, signal);
  }
}
