import { Column, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { SecretManagerType } from '../manifest/types.js';

/** A tenant's settings for one secret manager: where it is and how kiln logs in; no secret. */
@Entity('tenant_secret_managers')
export class TenantSecretManagerEntity {
  @PrimaryColumn('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @PrimaryColumn('text')
  type!: SecretManagerType;

  @Column('jsonb')
  settings!: Record<string, unknown>;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
