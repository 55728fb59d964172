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

  /** Sets whether the user administers the installation; false when no such user. */
  async setSystemAdmin(id: string, systemAdmin: boolean): Promise<boolean> {
    const result = await this.users.update({ id }, { systemAdmin });
    return (result.affected ?? 0) > 0;
  }

  count(): Promise<number> {
    return this.users.count();
  }
}
