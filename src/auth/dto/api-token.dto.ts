import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import {
  ArrayMaxSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';
import { TENANT_PERMISSIONS, type TenantPermission } from '../permissions.js';

/** POST /tokens. */
export class CreateApiTokenDto {
  @ApiProperty({
    minLength: 1,
    maxLength: 100,
    description: 'What the token is for (shown in the list), e.g. the CI pipeline that uses it',
  })
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  name!: string;

  @ApiPropertyOptional({
    enum: TENANT_PERMISSIONS,
    isArray: true,
    description:
      "What the token may do in the tenant: a subset of the caller's role's permissions, without `token:manage`. By default all of them but `token:manage`.",
  })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(TENANT_PERMISSIONS.length)
  @ArrayUnique()
  @IsIn(TENANT_PERMISSIONS, { each: true })
  permissions?: TenantPermission[];

  @ApiPropertyOptional({
    minimum: 1,
    description:
      'Days until the token expires: at most KILN_API_TOKEN_MAX_DAYS; by default 30, or that maximum when it is lower',
  })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(36_500)
  expires_in_days?: number;
}

export class ApiTokenDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  name!: string;

  @ApiProperty({ format: 'uuid', description: 'The one tenant the token acts in' })
  tenant_id!: string;

  @ApiProperty({
    enum: TENANT_PERMISSIONS,
    isArray: true,
    description:
      "What the token may do: each request also needs the permission in its user's current role",
  })
  permissions!: TenantPermission[];

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ format: 'date-time', description: 'From then on the token is refused (401)' })
  expires_at!: string;

  @ApiProperty({
    format: 'date-time',
    nullable: true,
    type: String,
    description: 'When the token was last used, to the minute; null if never',
  })
  last_used_at!: string | null;
}

/** The answer to POST /tokens: the only time the token itself is shown. */
export class CreatedApiTokenDto extends ApiTokenDto {
  @ApiProperty({
    description:
      'The token, `kiln_` and 43 characters: send it as `Authorization: Bearer`. Shown this once; kiln keeps only its SHA-256.',
  })
  token!: string;
}

export class ApiTokenListDto {
  @ApiProperty({
    type: [ApiTokenDto],
    description: "The caller's tokens in this tenant, newest first, expired ones included",
  })
  tokens!: ApiTokenDto[];
}
