import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsUUID } from 'class-validator';
import { MAX_PAGE, MAX_PAGE_SIZE, QueryInteger } from '../../common/validators.js';
import { BUILD_STATUSES, type BuildStatus } from '../../lifecycle/build-state.js';
import { BUILD_SORT_KEYS, type BuildSortKey } from '../../lifecycle/builds.repository.js';

export { MAX_PAGE, MAX_PAGE_SIZE };

export class ListBuildsQueryDto {
  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PAGE, default: 1 })
  @IsOptional()
  @QueryInteger(1, MAX_PAGE)
  page: number = 1;

  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 20 })
  @IsOptional()
  @QueryInteger(1, MAX_PAGE_SIZE)
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
