import {
  Column,
  CreateDateColumn,
  Entity,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

@Entity('users')
export class UserEntity {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  /** Stored lower-cased; unique. */
  @Column('text')
  email!: string;

  /** PHC string (argon2id). */
  @Column('text', { name: 'password_hash' })
  passwordHash!: string;

  @Column('boolean', { default: false })
  disabled!: boolean;

  /** An installation administrator (`system:admin`): never a tenant role. */
  @Column('boolean', { name: 'system_admin', default: false })
  systemAdmin!: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;
}
