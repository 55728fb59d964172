import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { UserEntity } from './user.entity.js';

@Injectable()
export class UsersRepository {
  private readonly users: Repository<UserEntity>;

  constructor(dataSource: DataSource) {
    this.users = dataSource.getRepository(UserEntity);
  }

  create(email: string, passwordHash: string): Promise<UserEntity> {
    return this.users.save(this.users.create({ email, passwordHash }));
  }

  async findByEmail(email: string): Promise<UserEntity | undefined> {
    return (await this.users.findOneBy({ email })) ?? undefined;
  }

  async updatePasswordHash(id: string, passwordHash: string): Promise<void> {
    await this.users.update({ id }, { passwordHash });
  }

  /**
   * A new password chosen by its user: access tokens issued before `at` are refused from now on
   * (`credentials_changed_at` against a token's `iat`, both to the millisecond, from the clock of
   * the process that issues the next token; the trigger announces it).
   */
  async changePassword(id: string, passwordHash: string, at: Date): Promise<void> {
    await this.users.query(
      `UPDATE users SET password_hash = $2, credentials_changed_at = to_timestamp($3),
              updated_at = now()
        WHERE id = $1`,
      [id, passwordHash, at.getTime() / 1000],
    );
  }

  /** One page of every user, by e-mail, and how many there are. */
  async page(offset: number, limit: number): Promise<{ users: UserEntity[]; total: number }> {
    const [users, total] = await this.users.findAndCount({
      order: { email: 'ASC' },
      skip: offset,
      take: limit,
    });
    return { users, total };
  }

  async findById(id: string): Promise<UserEntity | undefined> {
    return (await this.users.findOneBy({ id })) ?? undefined;
  }

  /**
   * Disables or enables the user, or sets whether it administers the installation, unless that
   * would leave no enabled installation administrator: someone must always be able to manage the
   * installation over HTTP. One transaction holding every administrator's row, so two changes
   * at once cannot together remove the last one.
   */
  change(
    id: string,
    change: { disabled?: boolean; systemAdmin?: boolean },
  ): Promise<UserEntity | 'missing' | 'last-admin'> {
    return this.users.manager.transaction(async (manager) => {
      const admins = await manager.query<Array<{ id: string }>>(
        'SELECT id FROM users WHERE system_admin AND NOT disabled ORDER BY id FOR UPDATE',
      );
      const user = await manager.findOneBy(UserEntity, { id });
      if (user === null) return 'missing';
      const after = {
        disabled: change.disabled ?? user.disabled,
        systemAdmin: change.systemAdmin ?? user.systemAdmin,
      };
      const wasAdmin = admins.some((admin) => admin.id === id);
      const staysAdmin = after.systemAdmin && !after.disabled;
      if (wasAdmin && !staysAdmin && admins.length === 1) return 'last-admin';
      await manager.update(UserEntity, { id }, after);
      return { ...user, ...after };
    });
  }

  /** Sets whether the user administers the installation; false when no such user. */
  async setSystemAdmin(id: string, systemAdmin: boolean): Promise<boolean> {
    const result = await this.users.update({ id }, { systemAdmin });
    return (result.affected ?? 0) > 0;
  }

  count(): Promise<number> {
    return this.users.count();
  }
}
