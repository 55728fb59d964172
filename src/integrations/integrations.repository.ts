import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import type { RegistryType, SecretManagerType } from '../manifest/types.js';
import { TenantRegistryEntity } from './tenant-registry.entity.js';
import { TenantSecretManagerEntity } from './tenant-secret-manager.entity.js';

/** Tenants' secret-manager and registry settings (tables of migration 1764720000000). */
@Injectable()
export class IntegrationsRepository {
  private readonly managers: Repository<TenantSecretManagerEntity>;
  private readonly registries: Repository<TenantRegistryEntity>;

  constructor(dataSource: DataSource) {
    this.managers = dataSource.getRepository(TenantSecretManagerEntity);
    this.registries = dataSource.getRepository(TenantRegistryEntity);
  }

  async putSecretManager(
    tenantId: string,
    type: SecretManagerType,
    settings: object,
  ): Promise<TenantSecretManagerEntity> {
    await this.managers.upsert({ tenantId, type, settings: { ...settings } }, ['tenantId', 'type']);
    return this.managers.findOneByOrFail({ tenantId, type });
  }

  async secretManager(
    tenantId: string,
    type: SecretManagerType,
  ): Promise<TenantSecretManagerEntity | undefined> {
    return (await this.managers.findOneBy({ tenantId, type })) ?? undefined;
  }

  secretManagers(tenantId: string): Promise<TenantSecretManagerEntity[]> {
    return this.managers.find({ where: { tenantId }, order: { type: 'ASC' } });
  }

  async removeSecretManager(tenantId: string, type: SecretManagerType): Promise<boolean> {
    return ((await this.managers.delete({ tenantId, type })).affected ?? 0) > 0;
  }

  async putRegistry(
    tenantId: string,
    type: RegistryType,
    settings: object,
  ): Promise<TenantRegistryEntity> {
    await this.registries.upsert({ tenantId, type, settings: { ...settings } }, [
      'tenantId',
      'type',
    ]);
    return this.registries.findOneByOrFail({ tenantId, type });
  }

  async registry(tenantId: string, type: RegistryType): Promise<TenantRegistryEntity | undefined> {
    return (await this.registries.findOneBy({ tenantId, type })) ?? undefined;
  }

  registriesOf(tenantId: string): Promise<TenantRegistryEntity[]> {
    return this.registries.find({ where: { tenantId }, order: { type: 'ASC' } });
  }

  async removeRegistry(tenantId: string, type: RegistryType): Promise<boolean> {
    return ((await this.registries.delete({ tenantId, type })).affected ?? 0) > 0;
  }
}
