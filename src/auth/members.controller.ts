import { Body, Controller, Delete, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { MemberDto, MemberListDto, SetMemberDto } from './dto/admin.dto.js';
import type { TenantMember } from './memberships.repository.js';
import { RequirePermission } from './require-permission.decorator.js';
import { TenancyService } from './tenancy.service.js';
import { CurrentTenant, type TenantContext } from './tenant-context.js';

const toMember = (member: TenantMember): MemberDto => ({
  user_id: member.userId,
  email: member.email,
  role: member.role,
  disabled: member.disabled,
  member_since: member.since.toISOString(),
});

/** Who belongs to the tenant in X-Tenant-ID, and with which role (`member:manage`). */
@ApiTags('admin')
@ApiTenantScoped()
@Controller('members')
export class MembersController {
  constructor(private readonly tenancy: TenancyService) {}

  @Get()
  @RequirePermission('member:manage')
  @ApiOperation({
    summary: "List the tenant's members",
    description: 'Every member of the tenant with its role, by e-mail (`member:manage`).',
  })
  @ApiErrors(200, { type: MemberListDto, description: 'The members' }, [400, 401, 403, 429])
  async list(@CurrentTenant() tenant: TenantContext): Promise<MemberListDto> {
    return { members: (await this.tenancy.membersOf(tenant.tenantId)).map(toMember) };
  }

  @Post()
  @HttpCode(200)
  @RequirePermission('member:manage')
  @ApiOperation({
    summary: 'Add a member, or change its role',
    description:
      'Makes the existing user with this e-mail a member of the tenant with the role, or gives a member a new role (`member:manage`). Its next request is authorized with the new role on every replica. 409 when it would leave the tenant without an admin.',
  })
  @ApiErrors(200, { type: MemberDto, description: 'The member' }, [400, 401, 403, 404, 409, 429], {
    404: 'No user has this e-mail',
    409: "The tenant's last admin cannot lose the role",
  })
  async set(
    @CurrentTenant() tenant: TenantContext,
    @Body() body: SetMemberDto,
  ): Promise<MemberDto> {
    return toMember(await this.tenancy.setMember(tenant.tenantId, body.email, body.role));
  }

  @Delete(':userId')
  @HttpCode(204)
  @RequirePermission('member:manage')
  @ApiOperation({
    summary: 'Remove a member',
    description:
      "Takes the user out of the tenant (`member:manage`); its next request there is 403 on every replica. 409 for the tenant's last admin.",
  })
  @ApiNoContentResponse({ description: 'Removed' })
  @ApiErrors(undefined, undefined, [400, 401, 403, 404, 409, 429], {
    404: 'The user is not a member of this tenant',
    409: "The tenant's last admin cannot be removed",
  })
  async remove(
    @CurrentTenant() tenant: TenantContext,
    @Param('userId', UuidParamPipe) userId: string,
  ): Promise<void> {
    await this.tenancy.removeMemberById(tenant.tenantId, userId);
  }
}
