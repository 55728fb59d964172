import { ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { IsOptional, IsString, MaxLength } from 'class-validator';

export class CancelBuildDto {
  @ApiPropertyOptional({ maxLength: 1000 })
  @IsOptional()
  @IsString()
  @MaxLength(1000)
  reason?: string;
}
