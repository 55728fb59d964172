import { ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { IsIn, IsOptional, IsUUID } from 'class-validator';
import { PageQueryDto } from '../../common/page-query.dto.js';
import { BUILD_STATUSES, type BuildStatus } from '../../lifecycle/build-state.js';
import { BUILD_SORT_KEYS, type BuildSortKey } from '../../lifecycle/builds.repository.js';

export class ListBuildsQueryDto extends PageQueryDto {
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
