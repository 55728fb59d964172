import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { TenantPermission } from './permissions.js';

/** An API token as stored: never the token itself, only its SHA-256 (`hash`, hex). */
export interface StoredApiToken {
  readonly id: string;
  readonly userId: string;
  readonly tenantId: string;
  readonly name: string;
  readonly permissions: readonly TenantPermission[];
  readonly createdAt: Date;
  readonly expiresAt: Date;
  readonly lastUsedAt: Date | null;
}

interface Row {
  id: string;
  user_id: string;
  tenant_id: string;
  name: string;
  permissions: TenantPermission[];
  created_at: Date;
  expires_at: Date;
  last_used_at: Date | null;
}

const COLUMNS = 'id, user_id, tenant_id, name, permissions, created_at, expires_at, last_used_at';

function toStored(row: Row): StoredApiToken {
  return {
    id: row.id,
    userId: row.user_id,
    tenantId: row.tenant_id,
    name: row.name,
    permissions: row.permissions,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    lastUsedAt: row.last_used_at,
  };
}

/** The `api_tokens` table (migration 1765584000000). */
@Injectable()
export class ApiTokensRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insert(token: {
    userId: string;
    tenantId: string;
    name: string;
    hash: string;
    permissions: readonly TenantPermission[];
    expiresAt: Date;
  }): Promise<StoredApiToken> {
    const rows = await this.dataSource.query<Row[]>(
      `INSERT INTO api_tokens (user_id, tenant_id, name, token_hash, permissions, expires_at)
       VALUES ($1, $2, $3, decode($4, 'hex'), $5, $6)
       RETURNING ${COLUMNS}`,
      [
        token.userId,
        token.tenantId,
        token.name,
        token.hash,
        [...token.permissions],
        token.expiresAt,
      ],
    );
    return toStored(rows[0]!);
  }

  /** The token whose SHA-256 is `hash` (hex), expired or not. */
  async findByHash(hash: string): Promise<StoredApiToken | undefined> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT ${COLUMNS} FROM api_tokens WHERE token_hash = decode($1, 'hex')`,
      [hash],
    );
    return rows[0] && toStored(rows[0]);
  }

  /** The user's tokens in the tenant, newest first, expired ones included. */
  async ownedBy(tenantId: string, userId: string): Promise<StoredApiToken[]> {
    const rows = await this.dataSource.query<Row[]>(
      `SELECT ${COLUMNS} FROM api_tokens WHERE tenant_id = $1 AND user_id = $2
        ORDER BY created_at DESC, id`,
      [tenantId, userId],
    );
    return rows.map(toStored);
  }

  /** Deletes the user's token in the tenant; false when it has none with this id. */
  async remove(tenantId: string, userId: string, id: string): Promise<boolean> {
    // TypeORM answers a DELETE as [rows, affected].
    const [, affected] = await this.dataSource.query<[unknown[], number]>(
      'DELETE FROM api_tokens WHERE id = $1 AND tenant_id = $2 AND user_id = $3',
      [id, tenantId, userId],
    );
    return affected > 0;
  }

  /**
   * Records a use: at most one write per token per `everySeconds`, so a busy CI token does not
   * write on every request. Not a change of access: no notification.
   */
  async touch(id: string, everySeconds: number): Promise<void> {
    await this.dataSource.query(
      `UPDATE api_tokens SET last_used_at = now()
        WHERE id = $1
          AND (last_used_at IS NULL OR last_used_at < now() - make_interval(secs => $2))`,
      [id, everySeconds],
    );
  }
}
