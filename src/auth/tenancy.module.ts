import { Module } from '@nestjs/common';
import { AccessChanges } from './access-changes.js';
import { BootstrapRepository } from './bootstrap.repository.js';
import { MembershipEntity } from './membership.entity.js';
import { MembershipsRepository } from './memberships.repository.js';
import { PasswordHasher } from './password-hasher.js';
import { TenancyService } from './tenancy.service.js';
import { TenantEntity } from './tenant.entity.js';
import { TenantsRepository } from './tenants.repository.js';
import { UserEntity } from './user.entity.js';
import { UsersRepository } from './users.repository.js';

/** The entities this feature maps; src/app.entities.ts registers them with the DataSource. */
export const TENANCY_ENTITIES = [TenantEntity, UserEntity, MembershipEntity];

/** Tenants, users and memberships, without HTTP: shared by the API and the admin CLI. */
@Module({
  providers: [
    TenantsRepository,
    UsersRepository,
    MembershipsRepository,
    BootstrapRepository,
    PasswordHasher,
    TenancyService,
    AccessChanges,
  ],
  exports: [
    TenantsRepository,
    UsersRepository,
    MembershipsRepository,
    PasswordHasher,
    TenancyService,
    AccessChanges,
  ],
})
export class TenancyModule {}
