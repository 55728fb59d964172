import { Injectable } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { ConflictError, InvalidRequestError, NotFoundError } from '../common/errors.js';
import {
  carriesCredentials,
  credentialsInUrlProblem,
  withoutCredentials,
} from '../common/url-credentials.js';
import { isSecretReference, parseSecretReference } from '../manifest/secret-reference.js';
import type { GitCredentials, ProjectEntity } from './project.entity.js';
import { ProjectsRepository } from './projects.repository.js';

/** https://, ssh:// and git:// URLs, and scp-like `user@host:path`. No file:// or local paths. */
/** `host[:port][/path]`: where images of builds that name no repository go. */
const REGISTRY = /^[A-Za-z0-9.-]+(:\d{1,5})?(\/[a-z0-9._-]+)*$/;
const GIT_URL = /^(?:(?:https|ssh|git):\/\/[^\s/]+\/\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+)$/;

/** Where a project's clone credentials go instead of its URL. */
export const GIT_CREDENTIALS_WAY =
  'the project’s git credentials (kiln project git-credentials <project> --username … --password <secret reference>, or PUT /api/v1/projects/{id}/git-credentials)';

export class ProjectResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid' }) tenant_id!: string;
  @ApiProperty() name!: string;
  @ApiPropertyOptional({ type: String, nullable: true }) git_repository_url!: string | null;
  @ApiPropertyOptional({ type: String, nullable: true }) default_registry!: string | null;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
}

export class ProjectListResponse {
  @ApiProperty({ type: [ProjectResponse] }) projects!: ProjectResponse[];
}

export function toProjectResponse(project: ProjectEntity): ProjectResponse {
  return {
    id: project.id,
    tenant_id: project.tenantId,
    name: project.name,
    git_repository_url:
      project.gitRepositoryUrl === null ? null : withoutCredentials(project.gitRepositoryUrl),
    default_registry: project.defaultRegistry,
    created_at: project.createdAt.toISOString(),
    updated_at: project.updatedAt.toISOString(),
  };
}

/** What PATCH /projects/{id} changes: absent keeps, null removes (repository, registry). */
export interface ProjectChange {
  readonly name?: string;
  readonly gitRepositoryUrl?: string | null;
  readonly defaultRegistry?: string | null;
}

/** The given fields checked (the name trimmed), or the 400 naming every bad one. */
function checkedFields(fields: {
  name?: string;
  gitRepositoryUrl?: string;
  defaultRegistry?: string;
}): { name?: string } {
  const { name, gitRepositoryUrl, defaultRegistry } = fields;
  const trimmed = name?.trim();
  const details: Record<string, string> = {};
  if (trimmed !== undefined && (trimmed.length < 1 || trimmed.length > 100))
    details['name'] = 'length 1-100';
  if (gitRepositoryUrl !== undefined && !GIT_URL.test(gitRepositoryUrl)) {
    details['git_repository_url'] = 'an https://, ssh://, git:// or user@host:path URL';
  } else if (gitRepositoryUrl !== undefined && carriesCredentials(gitRepositoryUrl)) {
    details['git_repository_url'] = credentialsInUrlProblem(GIT_CREDENTIALS_WAY);
  }
  if (defaultRegistry !== undefined && !REGISTRY.test(defaultRegistry)) {
    details['default_registry'] = 'host[:port][/path], e.g. registry.example.com/team';
  }
  if (Object.keys(details).length > 0) throw new InvalidRequestError('Invalid project', details);
  return trimmed === undefined ? {} : { name: trimmed };
}

@Injectable()
export class ProjectsService {
  constructor(private readonly projects: ProjectsRepository) {}

  async create(
    tenantId: string,
    name: string,
    gitRepositoryUrl?: string,
    defaultRegistry?: string,
  ): Promise<ProjectEntity> {
    const fields = checkedFields({ name, gitRepositoryUrl, defaultRegistry });
    const trimmed = fields.name!;
    await this.nameIsFree(tenantId, trimmed);
    return this.projects.create(
      tenantId,
      trimmed,
      gitRepositoryUrl ?? null,
      defaultRegistry ?? null,
    );
  }

  /** One project of the tenant (404 for a missing one or another tenant's). */
  async get(tenantId: string, id: string): Promise<ProjectEntity> {
    const project = await this.projects.findInTenant(tenantId, id);
    if (project === undefined) throw new NotFoundError(`No project ${id}`);
    return project;
  }

  /**
   * Changes what is given: the name, the repository or the default registry (null removes
   * either). Builds already created keep the spec they were created with.
   */
  async update(tenantId: string, id: string, change: ProjectChange): Promise<ProjectEntity> {
    const fields = checkedFields({
      name: change.name,
      gitRepositoryUrl: change.gitRepositoryUrl ?? undefined,
      defaultRegistry: change.defaultRegistry ?? undefined,
    });
    if (fields.name !== undefined) await this.nameIsFree(tenantId, fields.name, id);
    const updated = await this.projects.update(tenantId, id, {
      ...(fields.name === undefined ? {} : { name: fields.name }),
      ...(change.gitRepositoryUrl === undefined
        ? {}
        : { gitRepositoryUrl: change.gitRepositoryUrl }),
      ...(change.defaultRegistry === undefined ? {} : { defaultRegistry: change.defaultRegistry }),
    });
    if (updated === undefined) throw new NotFoundError(`No project ${id}`);
    return updated;
  }

  /** Deletes a project that has no build (409 otherwise: its builds are deleted first). */
  async remove(tenantId: string, id: string): Promise<void> {
    const outcome = await this.projects.delete(tenantId, id);
    if (outcome === 'missing') throw new NotFoundError(`No project ${id}`);
    if (outcome === 'has-builds')
      throw new ConflictError(
        'The project still has builds: delete them first (DELETE /api/v1/builds/{id}), so that their logs and what the runner keeps for them go too',
      );
  }

  /**
   * The credentials builds of this project clone with; null removes them. The password must be a
   * secret reference (kiln stores no credential); the username may be plain.
   */
  async setGitCredentials(
    tenantId: string,
    projectId: string,
    credentials: { username: string; password: string } | null,
  ): Promise<void> {
    if (credentials !== null) {
      const details: Record<string, string> = {};
      const username = credentials.username.trim();
      if (username === '' || username.length > 255) details['username'] = 'length 1-255';
      else if (isSecretReference(username) && 'problem' in parseSecretReference(username)) {
        details['username'] = 'is written as a secret reference but does not parse';
      }
      const parsed = parseSecretReference(credentials.password);
      if ('problem' in parsed) {
        details['password'] =
          `must be a secret reference (vault:…, aws:… or azure:…): ${parsed.problem}`;
      }
      if (Object.keys(details).length > 0) {
        throw InvalidRequestError.listing('Invalid git credentials', details);
      }
    }
    if (!(await this.projects.setGitCredentials(tenantId, projectId, credentials))) {
      throw new NotFoundError(`No project ${projectId}`);
    }
  }

  /** The project's git credentials (references only); 404 when it has none. */
  async gitCredentials(tenantId: string, projectId: string): Promise<GitCredentials> {
    const { gitCredentials } = await this.get(tenantId, projectId);
    if (gitCredentials === null)
      throw new NotFoundError('The project has no git credentials: builds clone without');
    return { username: gitCredentials.username, password: gitCredentials.password };
  }

  /**
   * Throws 409 when a project of the tenant other than `ownId` has `name` (the unique constraint
   * still decides between two requests at once).
   */
  private async nameIsFree(tenantId: string, name: string, ownId?: string): Promise<void> {
    const other = await this.projects.findByName(tenantId, name);
    if (other !== undefined && other.id !== ownId)
      throw new ConflictError(`A project named ${name} already exists in the tenant`, {
        name: 'taken',
      });
  }

  list(tenantId: string): Promise<ProjectEntity[]> {
    return this.projects.listByTenant(tenantId);
  }
}
