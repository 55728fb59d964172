import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import {
  IsDefined,
  IsObject,
  IsOptional,
  IsString,
  IsUUID,
  Length,
  Matches,
} from 'class-validator';
import { IsStringRecord, Satisfies } from '../../common/validators.js';
import { branchNameProblem } from '../git-ref.js';

/** The reference form of POST /builds: a project and a branch. */
export class ReferenceCreateBuildDto {
  @ApiProperty({ format: 'uuid' })
  @IsDefined({ message: 'project_id is required' })
  @IsUUID('all', { message: 'project_id must be a UUID' })
  project_id!: string;

  @ApiProperty({
    minLength: 1,
    maxLength: 255,
    example: 'main',
    description: 'A valid git branch name',
  })
  @IsDefined({ message: 'git_branch is required' })
  @IsString()
  @Satisfies((value) => (typeof value === 'string' ? branchNameProblem(value) : 'must be a string'))
  git_branch!: string;

  @ApiPropertyOptional({
    type: String,
    nullable: true,
    minLength: 7,
    maxLength: 40,
    pattern: '^[0-9a-fA-F]{7,40}$',
  })
  @IsOptional()
  @IsString()
  @Length(7, 40)
  @Matches(/^[0-9a-f]{7,40}$/i, { message: 'git_commit must be 7 to 40 hexadecimal characters' })
  git_commit?: string | null;

  @ApiPropertyOptional({ nullable: true, type: 'object', additionalProperties: { type: 'string' } })
  @IsOptional()
  @IsStringRecord()
  build_args?: Record<string, string> | null;
}

/** The wizard form of POST /builds. The manifest is validated by build-methods/manifest.ts. */
export class WizardCreateBuildDto {
  @ApiProperty({ format: 'uuid', description: 'Must equal X-Tenant-ID' })
  @IsDefined({ message: 'tenant_id is required' })
  @IsUUID('all', { message: 'tenant_id must be a UUID' })
  tenant_id!: string;

  @ApiProperty({ format: 'uuid' })
  @IsDefined({ message: 'project_id is required' })
  @IsUUID('all', { message: 'project_id must be a UUID' })
  project_id!: string;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'Build manifest (the wizard form: docs/api.md)',
  })
  @IsDefined({ message: 'manifest is required' })
  @IsObject()
  manifest!: Record<string, unknown>;
}

export type CreateBuildRequest =
  | { form: 'reference'; body: ReferenceCreateBuildDto }
  | { form: 'wizard'; body: WizardCreateBuildDto };
