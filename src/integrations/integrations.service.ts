import { Injectable } from '@nestjs/common';
import {
  REGISTRY_TYPES,
  type RegistryType,
  SECRET_MANAGER_TYPES,
  type SecretManagerType,
} from '../manifest/types.js';
import { InvalidRequestError, NotFoundError } from '../common/errors.js';
import type { RegistrySettingsByType } from '../registries/settings.js';
import type { SecretManagerSettingsByType } from '../secret-managers/settings.js';
import { IntegrationsRepository } from './integrations.repository.js';
import { readRegistrySettings, readSecretManagerSettings } from './settings-validation.js';

export interface IntegrationRecord<T extends string, S> {
  readonly type: T;
  readonly settings: S;
  readonly updatedAt: Date;
}

export type SecretManagerRecord = {
  [T in SecretManagerType]: IntegrationRecord<T, SecretManagerSettingsByType[T]>;
}[SecretManagerType];
export type RegistryRecord = {
  [T in RegistryType]: IntegrationRecord<T, RegistrySettingsByType[T]>;
}[RegistryType];

/**
 * A tenant's secret managers and registries (docs/adr/0021-secret-references.md): set by an
 * admin through the CLI, read by the runners when a build starts. Settings are validated before
 * they are stored; they hold references and file paths, never a credential.
 */
@Injectable()
export class IntegrationsService {
  constructor(private readonly repository: IntegrationsRepository) {}

  async setSecretManager(
    tenantId: string,
    type: string,
    settings: unknown,
  ): Promise<SecretManagerRecord> {
    const known = oneOf(type, SECRET_MANAGER_TYPES, 'secret manager');
    const read = readSecretManagerSettings(known, settings);
    if ('details' in read) {
      throw InvalidRequestError.listing(`Invalid ${known} settings`, read.details);
    }
    const row = await this.repository.putSecretManager(tenantId, known, read.settings);
    return recordOf<SecretManagerRecord>(row);
  }

  async secretManagers(tenantId: string): Promise<SecretManagerRecord[]> {
    return (await this.repository.secretManagers(tenantId)).map((row) =>
      recordOf<SecretManagerRecord>(row),
    );
  }

  /** The tenant's settings for `type`; undefined when it has none. */
  async secretManager<T extends SecretManagerType>(
    tenantId: string,
    type: T,
  ): Promise<SecretManagerSettingsByType[T] | undefined> {
    const row = await this.repository.secretManager(tenantId, type);
    return row?.settings as SecretManagerSettingsByType[T] | undefined;
  }

  async removeSecretManager(tenantId: string, type: string): Promise<void> {
    const known = oneOf(type, SECRET_MANAGER_TYPES, 'secret manager');
    if (!(await this.repository.removeSecretManager(tenantId, known))) {
      throw new NotFoundError(`The tenant has no ${known} settings`);
    }
  }

  async setRegistry(tenantId: string, type: string, settings: unknown): Promise<RegistryRecord> {
    const known = oneOf(type, REGISTRY_TYPES, 'registry type');
    const read = readRegistrySettings(known, settings);
    if ('details' in read) {
      throw InvalidRequestError.listing(`Invalid ${known} settings`, read.details);
    }
    const row = await this.repository.putRegistry(tenantId, known, read.settings);
    return recordOf<RegistryRecord>(row);
  }

  async registries(tenantId: string): Promise<RegistryRecord[]> {
    return (await this.repository.registriesOf(tenantId)).map((row) =>
      recordOf<RegistryRecord>(row),
    );
  }

  async registry<T extends RegistryType>(
    tenantId: string,
    type: T,
  ): Promise<RegistrySettingsByType[T] | undefined> {
    const row = await this.repository.registry(tenantId, type);
    return row?.settings as RegistrySettingsByType[T] | undefined;
  }

  async removeRegistry(tenantId: string, type: string): Promise<void> {
    const known = oneOf(type, REGISTRY_TYPES, 'registry type');
    if (!(await this.repository.removeRegistry(tenantId, known))) {
      throw new NotFoundError(`The tenant has no ${known} settings`);
    }
  }
}

/** A row as its record: the settings were validated for its type before they were stored. */
function recordOf<R>(row: { type: string; settings: object; updatedAt: Date }): R {
  return { type: row.type, settings: row.settings, updatedAt: row.updatedAt } as unknown as R;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], what: string): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new InvalidRequestError(`Unknown ${what} ${value}: one of ${allowed.join(', ')}`, {
      type: `must be one of ${allowed.join(', ')}`,
    });
  }
  return value as T;
}
