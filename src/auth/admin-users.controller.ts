import { Body, Controller, Get, Param, Patch, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiTags } from '../common/openapi-decorators.js';
import { ACCESS_TOKEN_SCHEME, ApiErrors } from '../common/openapi.js';
import { PageQueryDto } from '../common/page-query.dto.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { CreateUserDto, UpdateUserDto, UserDto, UserListDto } from './dto/admin.dto.js';
import { RequirePermission } from './require-permission.decorator.js';
import { TenancyService } from './tenancy.service.js';
import type { UserEntity } from './user.entity.js';

const toUser = (user: UserEntity): UserDto => ({
  id: user.id,
  email: user.email,
  disabled: user.disabled,
  system_admin: user.systemAdmin,
  created_at: user.createdAt.toISOString(),
});

/**
 * The installation's users, for installation administrators (`system:admin`,
 * docs/adr/0043-admin-api.md). A tenant's admins add users to their tenant by e-mail
 * (POST /api/v1/members); only an installation administrator creates or disables one.
 */
@ApiTags('admin')
@ApiBearerAuth(ACCESS_TOKEN_SCHEME)
@Controller('users')
export class AdminUsersController {
  constructor(private readonly tenancy: TenancyService) {}

  @Post()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'Create a user',
    description:
      'A user who signs in with this e-mail and password (`system:admin`); it belongs to no tenant until a tenant admin adds it. The password is never answered or logged.',
  })
  @ApiErrors(201, { type: UserDto, description: 'The user' }, [400, 401, 403, 409, 429], {
    409: 'A user has this e-mail',
  })
  async create(@Body() body: CreateUserDto): Promise<UserDto> {
    return toUser(await this.tenancy.createUser(body.email, body.password));
  }

  @Get()
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'List every user',
    description: 'One page of every user of the installation, by e-mail (`system:admin`).',
  })
  @ApiErrors(200, { type: UserListDto, description: 'One page of users' }, [400, 401, 403, 429])
  async list(@Query() query: PageQueryDto): Promise<UserListDto> {
    const { users, total } = await this.tenancy.listUsers(query.page, query.limit);
    return { users: users.map(toUser), total, page: query.page, limit: query.limit };
  }

  @Patch(':id')
  @RequirePermission('system:admin')
  @ApiOperation({
    summary: 'Disable or enable a user, or make it an installation administrator',
    description:
      "Changes what the body names (`system:admin`). A disabled user's next request is 401 on every replica. 409 when no enabled installation administrator would be left.",
  })
  @ApiErrors(200, { type: UserDto, description: 'The user' }, [400, 401, 403, 404, 409, 429], {
    409: 'The last enabled installation administrator',
  })
  async update(
    @Param('id', UuidParamPipe) id: string,
    @Body() body: UpdateUserDto,
  ): Promise<UserDto> {
    return toUser(
      await this.tenancy.changeUser(id, {
        disabled: body.disabled,
        systemAdmin: body.system_admin,
      }),
    );
  }
}
