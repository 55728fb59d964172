import type { SecretManagerType } from '../manifest/types.js';
import { AwsSecretsManager } from './aws-secrets-manager.js';
import { AzureKeyVault } from './azure-key-vault.js';
import {
  DEFAULT_RESOLVE_LIMITS,
  type ResolveLimits,
  type SecretManager,
} from './secret-manager.js';
import type { SecretManagerSettingsByType } from './settings.js';
import { VaultSecretManager } from './vault.js';

/** The adapter for a manager's settings: the factory SecretResolver uses in production. */
export function createSecretManager<T extends SecretManagerType>(
  type: T,
  settings: SecretManagerSettingsByType[T],
  limits: ResolveLimits = DEFAULT_RESOLVE_LIMITS,
): SecretManager {
  switch (type) {
    case 'vault':
      return new VaultSecretManager(settings as SecretManagerSettingsByType['vault'], limits);
    case 'aws_secretsmanager':
      return new AwsSecretsManager(
        settings as SecretManagerSettingsByType['aws_secretsmanager'],
        limits,
      );
    default:
      return new AzureKeyVault(settings as SecretManagerSettingsByType['azure_keyvault'], limits);
  }
}
