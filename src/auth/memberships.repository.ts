import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { MembershipEntity } from './membership.entity.js';
import type { Role } from './permissions.js';

/** Whether a user may act at all (undefined: deleted or disabled) and its role in one tenant. */
export type UserAccess = { readonly role: Role | null } | undefined;

/** A tenant the user is a member of, with its role there. */
export interface MemberTenant {
  readonly id: string;
  readonly name: string;
  readonly role: Role;
}

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

  /** Removes the user from the tenant; false when it was not a member. */
  async remove(tenantId: string, userId: string): Promise<boolean> {
    const result = await this.memberships.delete({ tenantId, userId });
    return (result.affected ?? 0) > 0;
  }

  /**
   * The tenants the user is a member of, with its role in each, ordered by name. Read from the
   * table on every call, never from AccessCache, so a membership added or removed by any process
   * shows at once.
   */
  tenantsOf(userId: string): Promise<MemberTenant[]> {
    return this.dataSource.query<MemberTenant[]>(
      `SELECT t.id, t.name, m.role FROM memberships m
         JOIN tenants t ON t.id = m.tenant_id
        WHERE m.user_id = $1
        ORDER BY t.name, t.id`,
      [userId],
    );
  }

  /**
   * Whether the user exists and is enabled (undefined when not), and if so its role in the tenant
   * (null for a non-member or when no tenant is given): one query for both checks.
   */
  async accessOf(userId: string, tenantId: string | null): Promise<UserAccess> {
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
