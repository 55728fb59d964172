import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { MembershipEntity } from './membership.entity.js';
import type { Role } from './permissions.js';

@Injectable()
export class MembershipsRepository {
  private readonly memberships: Repository<MembershipEntity>;

  constructor(private readonly dataSource: DataSource) {
    this.memberships = dataSource.getRepository(MembershipEntity);
  }

  /** Adds the user to the tenant, or changes the role of an existing member. */
  async upsert(tenantId: string, userId: string, role: Role): Promise<MembershipEntity> {
    await this.memberships.upsert({ tenantId, userId, role }, ['tenantId', 'userId']);
    return this.memberships.findOneByOrFail({ tenantId, userId });
  }

  /** The role of an enabled user in the tenant; undefined for non-members and disabled users. */
  async roleOf(tenantId: string, userId: string): Promise<Role | undefined> {
    const rows = await this.dataSource.query<Array<{ role: Role }>>(
      `SELECT m.role FROM memberships m JOIN users u ON u.id = m.user_id
        WHERE m.tenant_id = $1 AND m.user_id = $2 AND NOT u.disabled`,
      [tenantId, userId],
    );
    return rows[0]?.role;
  }
}
