import { ApiPropertyOptional } from './openapi-decorators.js';
import { IsOptional } from 'class-validator';
import { MAX_PAGE, MAX_PAGE_SIZE, QueryInteger } from './validators.js';

/** `?page&limit` of a paged list (builds, tenants, users): 1-based pages of up to 100 items. */
export class PageQueryDto {
  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PAGE, default: 1 })
  @IsOptional()
  @QueryInteger(1, MAX_PAGE)
  page: number = 1;

  @ApiPropertyOptional({ minimum: 1, maximum: MAX_PAGE_SIZE, default: 20 })
  @IsOptional()
  @QueryInteger(1, MAX_PAGE_SIZE)
  limit: number = 20;
}
