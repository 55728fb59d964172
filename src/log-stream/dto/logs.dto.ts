import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { IsOptional } from 'class-validator';
import { MAX_INT4, QueryInteger } from '../../common/validators.js';
import { LOG_LEVELS, type LogEntryLevel } from '../../logs/log-entry.js';

export class LogsQueryDto {
  @ApiPropertyOptional({
    minimum: 0,
    maximum: MAX_INT4,
    default: 0,
    description: 'First line (seq) to return',
  })
  @IsOptional()
  @QueryInteger(0, MAX_INT4)
  offset: number = 0;

  @ApiPropertyOptional({ minimum: 1, maximum: 1000, default: 100 })
  @IsOptional()
  @QueryInteger(1, 1000)
  limit: number = 100;
}

/** One log line of a page. */
export class LogEntryResponseDto {
  @ApiProperty({ format: 'date-time' }) timestamp!: string;
  @ApiProperty({ enum: LOG_LEVELS }) level!: LogEntryLevel;
  @ApiProperty() message!: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' }, nullable: true })
  metadata!: Record<string, string> | null;
}

/** A page of a build's log: GET /builds/{id}/logs. */
export class BuildLogsDto {
  @ApiProperty({ format: 'uuid' }) build_id!: string;
  @ApiProperty({ type: [LogEntryResponseDto] }) logs!: LogEntryResponseDto[];
  @ApiProperty({ minimum: 0 }) total_lines!: number;
  @ApiProperty({ minimum: 0 }) offset!: number;
  @ApiProperty({ minimum: 1 }) limit!: number;
}
