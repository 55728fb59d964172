import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { MembershipEntity } from './membership.entity.js';
import type { Role } from './permissions.js';

/**
 * Whether a user may act at all (undefined: deleted or disabled), its role in one tenant, and
 * whether it administers the installation.
 */
export type UserAccess =
  | {
      readonly role: Role | null;
      readonly systemAdmin: boolean;
      /** When the password last changed (Unix seconds, to the ms): older access tokens are refused. */
      readonly credentialsChangedAt: number | null;
    }
  | undefined;

/** A member of a tenant, as its admins see it. */
export interface TenantMember {
  readonly userId: string;
  readonly email: string;
  readonly role: Role;
  readonly disabled: boolean;
  readonly since: Date;
}

/** What a change of membership did, or why it was refused. */
export type MembershipChange =
  | { readonly kind: 'added' | 'changed' | 'unchanged' | 'removed'; readonly role: Role | null }
  | { readonly kind: 'not-a-member' | 'last-admin' | 'no-tenant' };

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

  /** The tenant's members with their e-mail, ordered by e-mail. */
  async membersOf(tenantId: string): Promise<TenantMember[]> {
    const rows = await this.dataSource.query<
      Array<{ user_id: string; email: string; role: Role; disabled: boolean; created_at: Date }>
    >(
      `SELECT m.user_id, u.email, m.role, u.disabled, m.created_at FROM memberships m
         JOIN users u ON u.id = m.user_id
        WHERE m.tenant_id = $1
        ORDER BY u.email`,
      [tenantId],
    );
    return rows.map((row) => ({
      userId: row.user_id,
      email: row.email,
      role: row.role,
      disabled: row.disabled,
      since: row.created_at,
    }));
  }

  /**
   * Gives the user `role` in the tenant (adding it as a member), or takes it out (`role` null),
   * unless that would leave the tenant without an admin: a tenant always keeps one who can manage
   * it. One transaction holding the tenant's row, so two admins who demote each other at once
   * cannot both succeed.
   */
  change(tenantId: string, userId: string, role: Role | null): Promise<MembershipChange> {
    return this.dataSource.transaction(async (manager) => {
      const tenants = await manager.query<unknown[]>(
        'SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE',
        [tenantId],
      );
      if (tenants.length === 0) return { kind: 'no-tenant' };
      const rows = await manager.query<Array<{ user_id: string; role: Role }>>(
        `SELECT user_id, role FROM memberships WHERE tenant_id = $1 AND role = 'admin'
         UNION ALL
         SELECT user_id, role FROM memberships WHERE tenant_id = $1 AND user_id = $2`,
        [tenantId, userId],
      );
      const current = rows.find((row) => row.user_id === userId)?.role;
      const admins = new Set(rows.filter((r) => r.role === 'admin').map((r) => r.user_id));
      if (current === undefined && role === null) return { kind: 'not-a-member' };
      if (current === role) return { kind: 'unchanged', role };
      if (current === 'admin' && admins.size === 1) return { kind: 'last-admin' };
      if (role === null) {
        await manager.query('DELETE FROM memberships WHERE tenant_id = $1 AND user_id = $2', [
          tenantId,
          userId,
        ]);
        return { kind: 'removed', role: null };
      }
      await manager.query(
        `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (tenant_id, user_id) DO UPDATE SET role = EXCLUDED.role, updated_at = now()`,
        [tenantId, userId, role],
      );
      return { kind: current === undefined ? 'added' : 'changed', role };
    });
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
   * (null for a non-member or when no tenant is given) and whether it administers the
   * installation: one query for every check.
   */
  async accessOf(userId: string, tenantId: string | null): Promise<UserAccess> {
    const rows = await this.dataSource.query<
      Array<{ role: Role | null; system_admin: boolean; changed: number | null }>
    >(
      `SELECT m.role, u.system_admin, extract(epoch FROM u.credentials_changed_at)::float8 AS changed
         FROM users u
         LEFT JOIN memberships m ON m.user_id = u.id AND m.tenant_id = $2
        WHERE u.id = $1 AND NOT u.disabled`,
      [userId, tenantId],
    );
    const row = rows[0];
    return (
      row && {
        role: row.role,
        systemAdmin: row.system_admin,
        credentialsChangedAt: row.changed,
      }
    );
  }
}
