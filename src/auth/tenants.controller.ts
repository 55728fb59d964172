import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors } from '../common/openapi.js';
import { MemberTenantListDto } from './dto/member-tenant.dto.js';
import { permissionsOf } from './permissions.js';
import { RequirePermission } from './require-permission.decorator.js';
import { TenancyService } from './tenancy.service.js';
import { type AuthenticatedUser, CurrentUser } from './tenant-context.js';

/** The signed-in user's own tenants, before it has chosen one to send as X-Tenant-ID. */
@ApiTags('auth')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('auth/tenants')
export class TenantsController {
  constructor(private readonly tenancy: TenancyService) {}

  @Get()
  @RequirePermission('tenant:list')
  @ApiOperation({
    summary: "List the caller's tenants and its role in each",
    description:
      "The tenants the user of the access token is a member of, ordered by name, with its role and that role's permissions in each: what a client offers before it sends X-Tenant-ID (`tenant:list`, which every enabled user holds). Needs no X-Tenant-ID; one that is sent is ignored. A user of no tenant gets an empty list. With an API token: its one tenant, with what both the role and the token allow.",
  })
  @ApiErrors(
    200,
    { type: MemberTenantListDto, description: "The caller's tenants" },
    [400, 401, 429],
    {
      400: 'A query string holding text kiln cannot store (NUL, unpaired surrogates)',
      401: 'Missing or invalid access token, or its user was deleted or disabled',
    },
  )
  async list(@CurrentUser() user: AuthenticatedUser): Promise<MemberTenantListDto> {
    const scope = user.apiToken;
    const tenants = await this.tenancy.tenantsOf(user.userId);
    return {
      tenants: tenants
        .filter((tenant) => scope === undefined || tenant.id === scope.tenantId)
        .map((tenant) => ({
          ...tenant,
          permissions: permissionsOf(tenant.role).filter(
            (p) => scope === undefined || scope.permissions.includes(p),
          ),
        })),
    };
  }
}
