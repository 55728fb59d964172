import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { IsIn, IsISO8601, IsOptional, IsString, IsUUID, Matches, MaxLength } from 'class-validator';
import { ACTOR_TYPES, AUDIT_RESULTS, type AuditResult } from '../../audit/audit-event.js';
import { PageQueryDto } from '../../common/page-query.dto.js';

/** GET /audit: a page of events, newest first, narrowed by the filters given. */
export class ListAuditQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ format: 'uuid', description: "The acting user's id" })
  @IsOptional()
  @IsUUID('all')
  actor?: string;

  @ApiPropertyOptional({ description: 'An action name, e.g. `build.cancel` (docs/operations.md)' })
  @IsOptional()
  @IsString()
  @Matches(/^[a-z_.]{1,64}$/, { message: 'action must be an action name such as build.cancel' })
  action?: string;

  @ApiPropertyOptional({ description: "The target's id (a build, project, user, … id or a type)" })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  target_id?: string;

  @ApiPropertyOptional({ enum: AUDIT_RESULTS })
  @IsOptional()
  @IsIn(AUDIT_RESULTS)
  result?: AuditResult;

  @ApiPropertyOptional({ format: 'date-time', description: 'Events at or after this time' })
  @IsOptional()
  @IsISO8601({ strict: true })
  since?: string;

  @ApiPropertyOptional({ format: 'date-time', description: 'Events before this time' })
  @IsOptional()
  @IsISO8601({ strict: true })
  until?: string;
}

/** GET /audit/installation: the same, across tenants, optionally one tenant's. */
export class ListInstallationAuditQueryDto extends ListAuditQueryDto {
  @ApiPropertyOptional({
    description: "One tenant's events (a tenant id), or `none` for events of no tenant",
  })
  @IsOptional()
  @Matches(/^(none|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$/, {
    message: 'tenant_id must be a tenant UUID or none',
  })
  tenant_id?: string;
}

export class AuditActorDto {
  @ApiProperty({ enum: ACTOR_TYPES })
  type!: string;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  user_id!: string | null;

  @ApiProperty({
    type: String,
    nullable: true,
    description: "The user's e-mail at the time, or the e-mail a failed login tried",
  })
  email!: string | null;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  api_token_id!: string | null;
}

export class AuditTargetDto {
  @ApiProperty({ description: 'build, project, user, tenant, api_token, secret_manager, registry' })
  type!: string;

  @ApiProperty({ type: String, nullable: true })
  id!: string | null;
}

export class AuditEventDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'date-time' })
  occurred_at!: string;

  @ApiProperty({ type: AuditActorDto })
  actor!: AuditActorDto;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  tenant_id!: string | null;

  @ApiProperty({ description: 'A stable name per route or admin command, e.g. build.cancel' })
  action!: string;

  @ApiProperty({ type: AuditTargetDto, nullable: true })
  target!: AuditTargetDto | null;

  @ApiProperty({ enum: AUDIT_RESULTS })
  result!: string;

  @ApiProperty({ type: Number, nullable: true, description: 'The HTTP status answered' })
  status!: number | null;

  @ApiProperty({ type: String, nullable: true, description: 'The X-Request-Id of the call' })
  request_id!: string | null;

  @ApiProperty({ type: String, nullable: true })
  source_address!: string | null;

  @ApiProperty({ type: String, nullable: true, description: 'Cut to 256 characters' })
  user_agent!: string | null;
}

export class AuditEventListDto {
  @ApiProperty({ type: [AuditEventDto], description: 'Newest first' })
  events!: AuditEventDto[];

  @ApiProperty({ description: 'How many events the filters select in all' })
  total!: number;

  @ApiProperty()
  page!: number;

  @ApiProperty()
  limit!: number;
}
