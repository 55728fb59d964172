import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsUUID, Max, Min } from 'class-validator';
import { BUILD_STATUSES, type BuildStatus } from '../../lifecycle/build-state.js';
import { BUILD_SORT_KEYS, type BuildSortKey } from '../../lifecycle/builds.repository.js';

export class ListBuildsQueryDto {
  @ApiPropertyOptional({ minimum: 1, default: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  page: number = 1;

  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(100)
  limit: number = 20;

  @ApiPropertyOptional({ enum: BUILD_STATUSES })
  @IsOptional()
  @IsIn(BUILD_STATUSES)
  status?: BuildStatus;

  @ApiPropertyOptional({ format: 'uuid' })
  @IsOptional()
  @IsUUID('all')
  project_id?: string;

  @ApiPropertyOptional({ enum: BUILD_SORT_KEYS, default: 'created_at' })
  @IsOptional()
  @IsIn(BUILD_SORT_KEYS)
  sort_by: BuildSortKey = 'created_at';

  @ApiPropertyOptional({ enum: ['asc', 'desc'], default: 'desc' })
  @IsOptional()
  @IsIn(['asc', 'desc'])
  sort_order: 'asc' | 'desc' = 'desc';
}
