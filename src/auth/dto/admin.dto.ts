import { ApiProperty, ApiPropertyOptional } from '../../common/openapi-decorators.js';
import { IsBoolean, IsEmail, IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { type Role, ROLES } from '../permissions.js';

/** PATCH /tenants/{id}. */
export class TenantNameDto {
  @ApiProperty({ minLength: 1, maxLength: 100, description: 'Unique across the installation' })
  @IsString()
  @MaxLength(200)
  name!: string;
}

/** POST /tenants. */
export class CreateTenantDto extends TenantNameDto {
  @ApiPropertyOptional({
    description:
      "The e-mail of an existing user who becomes the tenant's first admin; by default the caller",
  })
  @IsOptional()
  @IsString()
  @IsEmail()
  @MaxLength(320)
  admin_email?: string;
}

export class TenantDto {
  @ApiProperty({ format: 'uuid', description: 'The value to send as X-Tenant-ID' })
  id!: string;

  @ApiProperty()
  name!: string;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

/** Where a page of a list stands: every item's count, and the page and size asked for. */
export class PageDto {
  @ApiProperty({ description: 'How many there are in all' })
  total!: number;

  @ApiProperty()
  page!: number;

  @ApiProperty()
  limit!: number;
}

export class TenantListDto extends PageDto {
  @ApiProperty({ type: [TenantDto], description: 'Ordered by name' })
  tenants!: TenantDto[];
}

/** POST /members: a user of the installation, by e-mail, and its role in the tenant. */
export class SetMemberDto {
  @ApiProperty({ description: 'The e-mail of an existing user' })
  @IsString()
  @IsEmail()
  @MaxLength(320)
  email!: string;

  @ApiProperty({ enum: ROLES })
  @IsIn(ROLES)
  role!: Role;
}

export class MemberDto {
  @ApiProperty({ format: 'uuid' })
  user_id!: string;

  @ApiProperty()
  email!: string;

  @ApiProperty({ enum: ROLES })
  role!: Role;

  @ApiProperty({ description: 'A disabled user cannot sign in or use its tokens' })
  disabled!: boolean;

  @ApiProperty({ format: 'date-time', description: 'When it became a member' })
  member_since!: string;
}

export class MemberListDto {
  @ApiProperty({ type: [MemberDto], description: 'Ordered by e-mail' })
  members!: MemberDto[];
}

/** POST /users. */
export class CreateUserDto {
  @ApiProperty({ description: 'Stored lower-cased; unique' })
  @IsString()
  @IsEmail()
  @MaxLength(320)
  email!: string;

  @ApiProperty({ minLength: 12, maxLength: 1024, description: 'Never shown again, never logged' })
  @IsString()
  @MaxLength(4096)
  password!: string;
}

/** PATCH /users/{id}: what is sent changes. */
export class UpdateUserDto {
  @ApiPropertyOptional({ description: 'A disabled user cannot sign in; its tokens stop working' })
  @IsOptional()
  @IsBoolean()
  disabled?: boolean;

  @ApiPropertyOptional({ description: 'An installation administrator (system:admin)' })
  @IsOptional()
  @IsBoolean()
  system_admin?: boolean;
}

export class UserDto {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  email!: string;

  @ApiProperty()
  disabled!: boolean;

  @ApiProperty({ description: 'An installation administrator (system:admin)' })
  system_admin!: boolean;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class UserListDto extends PageDto {
  @ApiProperty({ type: [UserDto], description: 'Ordered by e-mail' })
  users!: UserDto[];
}
