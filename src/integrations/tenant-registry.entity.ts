import { Column, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { RegistryType } from '../manifest/types.js';

/** A tenant's settings for one registry type: its address and credential references. */
@Entity('tenant_registries')
export class TenantRegistryEntity {
  @PrimaryColumn('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @PrimaryColumn('text')
  type!: RegistryType;

  @Column('jsonb')
  settings!: Record<string, unknown>;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
