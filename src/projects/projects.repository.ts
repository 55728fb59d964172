import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { type GitCredentials, ProjectEntity } from './project.entity.js';

@Injectable()
export class ProjectsRepository {
  private readonly projects: Repository<ProjectEntity>;

  constructor(private readonly dataSource: DataSource) {
    this.projects = dataSource.getRepository(ProjectEntity);
  }

  create(
    tenantId: string,
    name: string,
    gitRepositoryUrl: string | null,
    defaultRegistry: string | null,
  ): Promise<ProjectEntity> {
    return this.projects.save(
      this.projects.create({ tenantId, name, gitRepositoryUrl, defaultRegistry }),
    );
  }

  listByTenant(tenantId: string): Promise<ProjectEntity[]> {
    return this.projects.find({ where: { tenantId }, order: { name: 'ASC' } });
  }

  async setGitCredentials(
    tenantId: string,
    id: string,
    credentials: GitCredentials | null,
  ): Promise<boolean> {
    const result = await this.projects.update({ tenantId, id }, { gitCredentials: credentials });
    return (result.affected ?? 0) > 0;
  }

  async findByName(tenantId: string, name: string): Promise<ProjectEntity | undefined> {
    return (await this.projects.findOneBy({ tenantId, name })) ?? undefined;
  }

  /** Changes the given columns; undefined when the tenant has no such project. */
  async update(
    tenantId: string,
    id: string,
    change: Partial<Pick<ProjectEntity, 'name' | 'gitRepositoryUrl' | 'defaultRegistry'>>,
  ): Promise<ProjectEntity | undefined> {
    if (Object.keys(change).length > 0) {
      const result = await this.projects.update({ tenantId, id }, change);
      if ((result.affected ?? 0) === 0) return undefined;
    }
    return this.findInTenant(tenantId, id);
  }

  /**
   * Deletes the project only while it has no build (a build's log and runner resources go through
   * its own delete, never a cascade), in one transaction holding the project's row.
   */
  delete(tenantId: string, id: string): Promise<'deleted' | 'missing' | 'has-builds'> {
    return this.dataSource.transaction(async (manager) => {
      const rows = await manager.query<unknown[]>(
        'SELECT 1 FROM projects WHERE tenant_id = $1 AND id = $2 FOR UPDATE',
        [tenantId, id],
      );
      if (rows.length === 0) return 'missing';
      const builds = await manager.query<unknown[]>(
        'SELECT 1 FROM builds WHERE tenant_id = $1 AND project_id = $2 LIMIT 1',
        [tenantId, id],
      );
      if (builds.length > 0) return 'has-builds';
      await manager.query('DELETE FROM projects WHERE tenant_id = $1 AND id = $2', [tenantId, id]);
      return 'deleted';
    });
  }

  async findInTenant(tenantId: string, id: string): Promise<ProjectEntity | undefined> {
    return (await this.projects.findOneBy({ tenantId, id })) ?? undefined;
  }
}
