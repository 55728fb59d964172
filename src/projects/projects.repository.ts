import { Injectable } from '@nestjs/common';
import { DataSource, type Repository } from 'typeorm';
import { type GitCredentials, ProjectEntity } from './project.entity.js';

@Injectable()
export class ProjectsRepository {
  private readonly projects: Repository<ProjectEntity>;

  constructor(dataSource: DataSource) {
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

  async findInTenant(tenantId: string, id: string): Promise<ProjectEntity | undefined> {
    return (await this.projects.findOneBy({ tenantId, id })) ?? undefined;
  }
}
