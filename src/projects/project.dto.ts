import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { IsOptional, IsString, MaxLength } from 'class-validator';

/** POST /projects. The service checks the values (ProjectsService: the CLI's rules). */
export class CreateProjectDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'Unique in the tenant' })
  @IsString()
  @MaxLength(200)
  name!: string;

  @ApiPropertyOptional({
    description:
      'https://, ssh://, git:// or user@host:path; never with credentials (the project’s git credentials hold them, as secret references)',
  })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  git_repository_url?: string;

  @ApiPropertyOptional({
    description: 'host[:port][/path]: where builds that name no repository push their images',
  })
  @IsOptional()
  @IsString()
  @MaxLength(512)
  default_registry?: string;
}

/** PATCH /projects/{id}: what is sent changes; null removes the repository or the registry. */
export class UpdateProjectDto {
  @ApiPropertyOptional({ minLength: 1, maxLength: 100 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  name?: string;

  @ApiPropertyOptional({ type: String, nullable: true })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  git_repository_url?: string | null;

  @ApiPropertyOptional({ type: String, nullable: true })
  @IsOptional()
  @IsString()
  @MaxLength(512)
  default_registry?: string | null;
}

/** PUT /projects/{id}/git-credentials: what builds clone the repository with. */
export class GitCredentialsDto {
  @ApiProperty({
    minLength: 1,
    maxLength: 255,
    description: 'The user name, or a secret reference to it (vault:…, aws:…, azure:…)',
  })
  @IsString()
  @MaxLength(1024)
  username!: string;

  @ApiProperty({
    description:
      'A secret reference (vault:…, aws:… or azure:…), resolved when each build starts; never the password itself',
    example: 'vault:kv/data/ci/git#token',
  })
  @IsString()
  @MaxLength(1024)
  password!: string;
}
