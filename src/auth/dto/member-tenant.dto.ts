import { ApiProperty } from '../../common/openapi-decorators.js';
import { type Role, ROLES, TENANT_PERMISSIONS, type TenantPermission } from '../permissions.js';

/** A tenant the caller is a member of: what the console's tenant picker shows. */
export class MemberTenantDto {
  @ApiProperty({ format: 'uuid', description: 'The value to send as X-Tenant-ID' })
  id!: string;

  @ApiProperty({ description: 'The tenant name' })
  name!: string;

  @ApiProperty({ enum: ROLES, description: "The caller's role in this tenant" })
  role!: Role;

  @ApiProperty({
    enum: TENANT_PERMISSIONS,
    isArray: true,
    description:
      'What the role allows in this tenant: a client shows only the actions these permit (the API checks every call itself)',
  })
  permissions!: TenantPermission[];
}

export class MemberTenantListDto {
  @ApiProperty({ type: [MemberTenantDto], description: 'Ordered by name' })
  tenants!: MemberTenantDto[];
}
