import { ApiProperty } from '../../common/openapi-decorators.js';
import { IsString, MaxLength, MinLength } from 'class-validator';
import { MIN_PASSWORD_LENGTH } from '../../config/config.js';
import { MAX_PASSWORD_LENGTH } from '../password-hasher.js';
import { TENANT_PERMISSIONS, type TenantPermission } from '../permissions.js';

/** POST /auth/password. */
export class ChangePasswordDto {
  @ApiProperty({ minLength: 1, maxLength: MAX_PASSWORD_LENGTH, format: 'password' })
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_PASSWORD_LENGTH)
  current_password!: string;

  @ApiProperty({
    minLength: MIN_PASSWORD_LENGTH,
    maxLength: MAX_PASSWORD_LENGTH,
    format: 'password',
  })
  @IsString()
  @MaxLength(MAX_PASSWORD_LENGTH)
  new_password!: string;
}

/** The API token a request was made with, as GET /auth/me shows it. */
export class CallerTokenDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  name!: string;

  @ApiProperty({ format: 'uuid' })
  tenant_id!: string;

  @ApiProperty({ enum: TENANT_PERMISSIONS, isArray: true })
  permissions!: TenantPermission[];

  @ApiProperty({ format: 'date-time' })
  expires_at!: string;
}

/** GET /auth/me. */
export class CallerDto {
  @ApiProperty({ format: 'uuid' })
  user_id!: string;

  @ApiProperty()
  email!: string;

  @ApiProperty({ description: 'Whether the user administers the installation (system:admin)' })
  system_admin!: boolean;

  @ApiProperty({
    type: CallerTokenDto,
    nullable: true,
    description: 'The API token of this request; null when it was made with an access token',
  })
  token!: CallerTokenDto | null;
}
