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

  /**
   * Whether the user exists and is enabled (undefined when not), and if so its role in the tenant
   * (null for a non-member or when no tenant is given): one query for both checks.
   */
  async accessOf(
    userId: string,
    tenantId: string | null,
  ): Promise<{ readonly role: Role | null } | undefined> {
    const rows = await this.dataSource.query<Array<{ role: Role | null }>>(
      `SELECT m.role FROM users u
         LEFT JOIN memberships m ON m.user_id = u.id AND m.tenant_id = $2
        WHERE u.id = $1 AND NOT u.disabled`,
      [userId, tenantId],
    );
    const row = rows[0];
    return row && { role: row.role };
  }
}
