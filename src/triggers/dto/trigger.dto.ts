import {
  ArrayMaxSize,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { Type } from 'class-transformer';
import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import {
  DELIVERY_OUTCOMES,
  TRIGGER_CONCURRENCY,
  TRIGGER_EVENTS,
  TRIGGER_PROVIDERS,
} from '../triggers.repository.js';

const MAX_PATTERNS = 50;

/** Where the build's result is posted: the git host's API, the repository, a token reference. */
export class StatusTargetDto {
  @ApiProperty({
    example: 'https://api.github.com',
    description:
      "The git host's API: https://api.github.com, https://gitlab.example.com/api/v4, https://gitea.example.com/api/v1",
  })
  @IsString()
  @MaxLength(2048)
  api_url!: string;

  @ApiProperty({
    example: 'acme/shop',
    description: "owner/repo (GitHub, Gitea, Forgejo); the project's path or numeric id (GitLab)",
  })
  @IsString()
  @MaxLength(255)
  repository!: string;

  @ApiProperty({
    example: 'vault:kv/data/ci/github#token',
    description:
      "A secret reference to the API token, resolved through the tenant's secret manager; never the token itself",
  })
  @IsString()
  @MaxLength(1024)
  token!: string;

  @ApiPropertyOptional({ default: 'kiln', description: 'The status name (context) on the commit' })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  context?: string;
}

/** What a trigger builds: the reference form's build args, or a wizard manifest. */
export class TriggerBuildDto {
  @ApiProperty({ enum: ['reference', 'manifest'] })
  @IsIn(['reference', 'manifest'], { message: 'form must be reference or manifest' })
  form!: 'reference' | 'manifest';

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'string' },
    nullable: true,
    description: 'The reference form: build args of the Dockerfile build',
  })
  @IsOptional()
  @IsObject()
  build_args?: Record<string, string> | null;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'The manifest form: a build manifest as POST /builds takes it (its wizard form)',
  })
  @IsOptional()
  @IsObject()
  manifest?: Record<string, unknown>;
}

/** POST /projects/{id}/triggers. What is left out takes its default. */
export class CreateTriggerDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'Unique in the project' })
  @IsString()
  @MaxLength(200)
  name!: string;

  @ApiProperty({ enum: TRIGGER_PROVIDERS, description: 'Who sends the webhooks' })
  @IsIn(TRIGGER_PROVIDERS, { message: `provider must be one of ${TRIGGER_PROVIDERS.join(', ')}` })
  provider!: (typeof TRIGGER_PROVIDERS)[number];

  @ApiPropertyOptional({ enum: TRIGGER_EVENTS, isArray: true, default: ['push'] })
  @IsOptional()
  @IsArray()
  @IsIn(TRIGGER_EVENTS, {
    each: true,
    message: `events must be among ${TRIGGER_EVENTS.join(', ')}`,
  })
  events?: string[];

  @ApiPropertyOptional({
    type: [String],
    default: ['**'],
    description:
      'Glob patterns of branch names (push, and the target branch of a pull request): main, release/*, **',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  branches?: string[];

  @ApiPropertyOptional({
    type: [String],
    default: ['**'],
    description: 'Glob patterns of tag names',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  tags?: string[];

  @ApiPropertyOptional({
    type: [String],
    default: [],
    description:
      'Glob patterns of changed files: a push builds when one of its changed files matches one (empty: any push)',
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(1024, { each: true })
  paths?: string[];

  @ApiPropertyOptional({ type: TriggerBuildDto, description: 'Default: the reference form' })
  @IsOptional()
  @ValidateNested()
  @Type(() => TriggerBuildDto)
  build?: TriggerBuildDto;

  @ApiPropertyOptional({ default: true, description: 'Start the build at once' })
  @IsOptional()
  @IsBoolean()
  start?: boolean;

  @ApiPropertyOptional({
    enum: TRIGGER_CONCURRENCY,
    default: 'parallel',
    description:
      'parallel: every push builds at once; serial: one build per branch at a time, the next waits; latest-only: a newer push cancels the running build of the same branch',
  })
  @IsOptional()
  @IsIn(TRIGGER_CONCURRENCY, {
    message: `concurrency must be one of ${TRIGGER_CONCURRENCY.join(', ')}`,
  })
  concurrency?: (typeof TRIGGER_CONCURRENCY)[number];

  @ApiPropertyOptional({
    type: Number,
    nullable: true,
    minimum: 60,
    maximum: 86_400,
    description: "Poll the project's repository this often (seconds); null: webhooks only",
  })
  @IsOptional()
  @IsInt()
  @Min(60)
  @Max(86_400)
  poll_interval_seconds?: number | null;

  @ApiPropertyOptional({ type: StatusTargetDto, nullable: true })
  @IsOptional()
  @ValidateNested()
  @Type(() => StatusTargetDto)
  status?: StatusTargetDto | null;

  @ApiPropertyOptional({ default: true })
  @IsOptional()
  @IsBoolean()
  enabled?: boolean;
}

/** PATCH /triggers/{id}: what is sent changes. */
export class UpdateTriggerDto {
  @ApiPropertyOptional() @IsOptional() @IsString() @MaxLength(200) name?: string;

  @ApiPropertyOptional({ enum: TRIGGER_PROVIDERS })
  @IsOptional()
  @IsIn(TRIGGER_PROVIDERS, { message: `provider must be one of ${TRIGGER_PROVIDERS.join(', ')}` })
  provider?: (typeof TRIGGER_PROVIDERS)[number];

  @ApiPropertyOptional({ enum: TRIGGER_EVENTS, isArray: true })
  @IsOptional()
  @IsArray()
  @IsIn(TRIGGER_EVENTS, {
    each: true,
    message: `events must be among ${TRIGGER_EVENTS.join(', ')}`,
  })
  events?: string[];

  @ApiPropertyOptional({ type: [String] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  branches?: string[];

  @ApiPropertyOptional({ type: [String] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(255, { each: true })
  tags?: string[];

  @ApiPropertyOptional({ type: [String] })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(MAX_PATTERNS)
  @IsString({ each: true })
  @MaxLength(1024, { each: true })
  paths?: string[];

  @ApiPropertyOptional({ type: TriggerBuildDto })
  @IsOptional()
  @ValidateNested()
  @Type(() => TriggerBuildDto)
  build?: TriggerBuildDto;

  @ApiPropertyOptional() @IsOptional() @IsBoolean() start?: boolean;

  @ApiPropertyOptional({ enum: TRIGGER_CONCURRENCY })
  @IsOptional()
  @IsIn(TRIGGER_CONCURRENCY, {
    message: `concurrency must be one of ${TRIGGER_CONCURRENCY.join(', ')}`,
  })
  concurrency?: (typeof TRIGGER_CONCURRENCY)[number];

  @ApiPropertyOptional({ type: Number, nullable: true, minimum: 60, maximum: 86_400 })
  @IsOptional()
  @IsInt()
  @Min(60)
  @Max(86_400)
  poll_interval_seconds?: number | null;

  @ApiPropertyOptional({ type: StatusTargetDto, nullable: true })
  @IsOptional()
  @ValidateNested()
  @Type(() => StatusTargetDto)
  status?: StatusTargetDto | null;

  @ApiPropertyOptional() @IsOptional() @IsBoolean() enabled?: boolean;
}

export class StatusTargetResponse {
  @ApiProperty() api_url!: string;
  @ApiProperty() repository!: string;
  @ApiProperty({ description: 'The secret reference (never a token)' }) token!: string;
  @ApiProperty() context!: string;
}

export class TriggerResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ format: 'uuid' }) project_id!: string;
  @ApiProperty() name!: string;
  @ApiProperty({ enum: TRIGGER_PROVIDERS }) provider!: string;
  @ApiProperty({ enum: TRIGGER_EVENTS, isArray: true }) events!: string[];
  @ApiProperty({ type: [String] }) branches!: string[];
  @ApiProperty({ type: [String] }) tags!: string[];
  @ApiProperty({ type: [String] }) paths!: string[];
  @ApiProperty({ type: TriggerBuildDto }) build!: TriggerBuildDto;
  @ApiProperty() start!: boolean;
  @ApiProperty({ enum: TRIGGER_CONCURRENCY }) concurrency!: string;
  @ApiProperty({ type: Number, nullable: true }) poll_interval_seconds!: number | null;
  @ApiProperty({
    type: String,
    nullable: true,
    description: 'Why the last poll of the repository failed; null when it worked',
  })
  poll_error!: string | null;
  @ApiProperty({ type: StatusTargetResponse, nullable: true }) status!: StatusTargetResponse | null;
  @ApiProperty() enabled!: boolean;
  @ApiProperty({ description: "The URL to paste into the git host's webhook settings" })
  webhook_url!: string;
  @ApiProperty({ format: 'date-time' }) created_at!: string;
  @ApiProperty({ format: 'date-time' }) updated_at!: string;
}

/** A created trigger, or one whose secret was rotated: the secret is shown this once. */
export class TriggerWithSecretResponse extends TriggerResponse {
  @ApiProperty({
    description:
      "The webhook secret: paste it into the git host's webhook settings. Shown once; kiln keeps it sealed",
  })
  secret!: string;
}

export class TriggerListResponse {
  @ApiProperty({ type: [TriggerResponse] }) triggers!: TriggerResponse[];
}

export class DeliveryResponse {
  @ApiProperty({ format: 'uuid' }) id!: string;
  @ApiProperty({ description: "The git host's delivery id, or poll:<ref>:<commit>" })
  delivery_id!: string;
  @ApiProperty({ description: 'push, tag, pull_request, ping, or the event the host named' })
  event!: string;
  @ApiProperty({ type: String, nullable: true }) ref!: string | null;
  @ApiProperty({ type: String, nullable: true }) commit!: string | null;
  @ApiProperty({ type: String, nullable: true }) pusher!: string | null;
  @ApiProperty({ enum: DELIVERY_OUTCOMES }) outcome!: string;
  @ApiProperty({ type: String, nullable: true, description: 'Why, in a sentence' })
  detail!: string | null;
  @ApiProperty({ type: String, nullable: true, format: 'uuid' }) build_id!: string | null;
  @ApiProperty({ format: 'date-time' }) received_at!: string;
}

export class DeliveryListResponse {
  @ApiProperty({ type: [DeliveryResponse], description: 'The newest 100, newest first' })
  deliveries!: DeliveryResponse[];
}

/** What a webhook delivery is answered with. */
export class DeliveryAcceptedResponse {
  @ApiProperty({ type: DeliveryResponse }) delivery!: DeliveryResponse;
}
