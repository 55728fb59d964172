import { ApiProperty, ApiPropertyOptional } from '../common/openapi-decorators.js';
import { IsInt, IsOptional, IsUUID, Max, Min, ValidateIf } from 'class-validator';
import { QueryInteger } from '../common/validators.js';
import { RETENTION_RULES, type RetentionRule } from './retention.repository.js';

export const MAX_DAYS = 36_500;
export const MAX_KEEP_LAST = 1_000_000;
export const MAX_PREVIEW = 1000;

/** A policy's two rules as they apply; 0 is off. */
export class RetentionPolicyDto {
  @ApiProperty({
    minimum: 0,
    maximum: MAX_DAYS,
    description: 'Finished builds are deleted this many days after they finished; 0: never',
  })
  days!: number;

  @ApiProperty({
    minimum: 0,
    maximum: MAX_KEEP_LAST,
    description: 'Finished builds of a project past its newest keep_last are deleted; 0: no limit',
  })
  keep_last!: number;
}

/** A tenant's retention policy: its own values and what applies (docs/operations.md#retention). */
export class RetentionSettingsDto {
  @ApiProperty({ format: 'uuid' })
  tenant_id!: string;

  @ApiProperty({
    type: Number,
    nullable: true,
    minimum: 0,
    maximum: MAX_DAYS,
    description:
      "The tenant's own days; null: the installation's KILN_RETENTION_DAYS; 0: off for the tenant",
  })
  days!: number | null;

  @ApiProperty({
    type: Number,
    nullable: true,
    minimum: 0,
    maximum: MAX_KEEP_LAST,
    description:
      "The tenant's own keep-last; null: the installation's KILN_RETENTION_KEEP_LAST; 0: off for the tenant",
  })
  keep_last!: number | null;

  @ApiProperty({ type: RetentionPolicyDto, description: 'What applies to the tenant' })
  effective!: RetentionPolicyDto;
}

/** PATCH /tenants/{id}/retention: what is sent changes; null inherits the installation's again. */
export class RetentionChangeDto {
  @ApiPropertyOptional({ type: Number, nullable: true, minimum: 0, maximum: MAX_DAYS })
  @ValidateIf((_, value) => value !== null && value !== undefined)
  @IsInt()
  @Min(0)
  @Max(MAX_DAYS)
  days?: number | null;

  @ApiPropertyOptional({ type: Number, nullable: true, minimum: 0, maximum: MAX_KEEP_LAST })
  @ValidateIf((_, value) => value !== null && value !== undefined)
  @IsInt()
  @Min(0)
  @Max(MAX_KEEP_LAST)
  keep_last?: number | null;
}

/** `?limit` of a preview. */
export class PreviewQueryDto {
  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PREVIEW, default: 100 })
  @IsOptional()
  @QueryInteger(1, MAX_PREVIEW)
  limit: number = 100;
}

/** `?tenant_id&limit` of the installation's preview. */
export class InstallationPreviewQueryDto extends PreviewQueryDto {
  @ApiPropertyOptional({ format: 'uuid', description: 'Only this tenant; all tenants without' })
  @IsOptional()
  @IsUUID('all')
  tenant_id?: string;
}

export class DoomedBuildDto {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid' }) tenant_id!: string;
  @ApiProperty({ format: 'uuid' }) project_id!: string;
  @ApiProperty() build_number!: number;
  @ApiProperty({ type: String, nullable: true, format: 'date-time' }) completed_at!: string | null;
  @ApiProperty({
    enum: RETENTION_RULES,
    description: 'age: finished longer ago than the days; count: past the newest keep_last',
  })
  rule!: RetentionRule;
}

export class RetentionCountsDto {
  @ApiProperty({ minimum: 0 }) age!: number;
  @ApiProperty({ minimum: 0 }) count!: number;
}

/** What a retention pass would delete now. */
export class RetentionPreviewDto {
  @ApiProperty({
    type: String,
    nullable: true,
    format: 'uuid',
    description: 'The tenant previewed; null: every tenant',
  })
  tenant_id!: string | null;

  @ApiProperty({ minimum: 0, description: 'Builds a pass would delete now' })
  total!: number;

  @ApiProperty({
    type: RetentionCountsDto,
    description: 'By rule; a build both rules take counts under age',
  })
  by_rule!: RetentionCountsDto;

  @ApiProperty({
    type: [DoomedBuildDto],
    description: 'The first `limit` of them, oldest first: the order a pass deletes them in',
  })
  builds!: DoomedBuildDto[];
}
