import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

export interface BootstrapResult {
  readonly tenantId: string;
  readonly userId: string;
  readonly projectId: string;
}

@Injectable()
export class BootstrapRepository {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * In one transaction, and only while no user exists: a `default` tenant, the admin user as its
   * admin and as an installation administrator (`system:admin`), and a `default` project. Replicas starting together serialise on an advisory lock.
   */
  bootstrapAdmin(email: string, passwordHash: string): Promise<BootstrapResult | undefined> {
    return this.dataSource.transaction(async (manager) => {
      await manager.query(`SELECT pg_advisory_xact_lock(hashtext('kiln_bootstrap'))`);
      const users = await manager.query<Array<{ count: number }>>(
        'SELECT count(*)::int AS count FROM users',
      );
      if ((users[0]?.count ?? 0) > 0) return undefined;
      const [tenant] = await manager.query<Array<{ id: string }>>(
        `INSERT INTO tenants (name) VALUES ('default')
         ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id`,
      );
      const [user] = await manager.query<Array<{ id: string }>>(
        `INSERT INTO users (email, password_hash, system_admin) VALUES ($1, $2, true)
         RETURNING id`,
        [email, passwordHash],
      );
      await manager.query(
        `INSERT INTO memberships (tenant_id, user_id, role) VALUES ($1, $2, 'admin')`,
        [tenant!.id, user!.id],
      );
      const [project] = await manager.query<Array<{ id: string }>>(
        `INSERT INTO projects (tenant_id, name) VALUES ($1, 'default')
         ON CONFLICT (tenant_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id`,
        [tenant!.id],
      );
      return { tenantId: tenant!.id, userId: user!.id, projectId: project!.id };
    });
  }
}
