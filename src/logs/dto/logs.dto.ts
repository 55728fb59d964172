import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { LOG_LEVELS, type LogEntryLevel } from '../log-entry.js';

export class LogsQueryDto {
  @ApiPropertyOptional({ minimum: 0, default: 0, description: 'First line (seq) to return' })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  offset: number = 0;

  @ApiPropertyOptional({ minimum: 1, maximum: 1000, default: 100 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(1000)
  limit: number = 100;
}

/** Spec 2.5. */
export class LogEntryResponseDto {
  @ApiProperty({ format: 'date-time' }) timestamp!: string;
  @ApiProperty({ enum: LOG_LEVELS }) level!: LogEntryLevel;
  @ApiProperty() message!: string;
  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'string' }, nullable: true })
  metadata!: Record<string, string> | null;
}

/** Spec 2.4. */
export class BuildLogsDto {
  @ApiProperty({ format: 'uuid' }) build_id!: string;
  @ApiProperty({ type: [LogEntryResponseDto] }) logs!: LogEntryResponseDto[];
  @ApiProperty({ minimum: 0 }) total_lines!: number;
  @ApiProperty({ minimum: 0 }) offset!: number;
  @ApiProperty({ minimum: 1 }) limit!: number;
}
