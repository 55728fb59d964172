import {
  Column,
  CreateDateColumn,
  Entity,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

export interface GitCredentials {
  readonly username: string;
  readonly password: string;
}

@Entity('projects')
export class ProjectEntity {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  @Column('text')
  name!: string;

  @Column('text', { name: 'git_repository_url', nullable: true })
  gitRepositoryUrl!: string | null;

  /** `host[:port][/path]` that builds naming no repository push to (as `<registry>/<project>`). */
  @Column('text', { name: 'default_registry', nullable: true })
  defaultRegistry!: string | null;

  /**
   * Credentials for cloning the repository: a username (plain or a secret reference) and a
   * reference to the password or token, resolved when a build starts (docs/adr/0021).
   */
  @Column('jsonb', { name: 'git_credentials', nullable: true })
  gitCredentials!: GitCredentials | null;

  @Column('integer', { name: 'next_build_number', default: 1 })
  nextBuildNumber!: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
