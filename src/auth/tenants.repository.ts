import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { TenantEntity } from './tenant.entity.js';

@Injectable()
export class TenantsRepository {
  private readonly tenants: Repository<TenantEntity>;

  constructor(private readonly dataSource: DataSource) {
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

  /** Creates a tenant and its first admin in one transaction. */
  createWithAdmin(name: string, adminUserId: string): Promise<TenantEntity> {
    return this.dataSource.transaction(async (manager) => {
      const tenant = await manager.save(manager.create(TenantEntity, { name }));
      await manager.query(
        `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'admin')`,
        [tenant.id, adminUserId],
      );
      return tenant;
    });
  }

  /** One page of every tenant, ordered by name, and how many there are. */
  async page(offset: number, limit: number): Promise<{ tenants: TenantEntity[]; total: number }> {
    const [tenants, total] = await this.tenants.findAndCount({
      order: { name: 'ASC', id: 'ASC' },
      skip: offset,
      take: limit,
    });
    return { tenants, total };
  }

  /** Renames the tenant; undefined when it does not exist (a taken name is a unique violation). */
  async rename(id: string, name: string): Promise<TenantEntity | undefined> {
    const result = await this.tenants.update({ id }, { name });
    if ((result.affected ?? 0) === 0) return undefined;
    return this.findById(id);
  }

  /**
   * Deletes the tenant with its members, projects and settings, only while it has no build: a
   * build's record, log and runner resources go through the build's own delete (batched purges,
   * the runner's cleanup), never a cascade. Answers what happened.
   */
  delete(id: string): Promise<'deleted' | 'missing' | 'has-builds'> {
    return this.dataSource.transaction(async (manager) => {
      const rows = await manager.query<unknown[]>(
        'SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE',
        [id],
      );
      if (rows.length === 0) return 'missing';
      const builds = await manager.query<unknown[]>(
        'SELECT 1 FROM builds WHERE tenant_id = $1 LIMIT 1',
        [id],
      );
      if (builds.length > 0) return 'has-builds';
      await manager.query('DELETE FROM tenants WHERE id = $1', [id]);
      return 'deleted';
    });
  }
}
