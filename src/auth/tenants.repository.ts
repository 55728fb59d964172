import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { TenantEntity } from './tenant.entity.js';

@Injectable()
export class TenantsRepository {
  private readonly tenants: Repository<TenantEntity>;

  constructor(dataSource: DataSource) {
    this.tenants = dataSource.getRepository(TenantEntity);
  }

  create(name: string): Promise<TenantEntity> {
    return this.tenants.save(this.tenants.create({ name }));
  }

  async findById(id: string): Promise<TenantEntity | undefined> {
    return (await this.tenants.findOneBy({ id })) ?? undefined;
  }

  async findByName(name: string): Promise<TenantEntity | undefined> {
    return (await this.tenants.findOneBy({ name })) ?? undefined;
  }
}
