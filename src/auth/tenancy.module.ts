import { Module } from '@nestjs/common';
import { BootstrapRepository } from './bootstrap.repository.js';
import { MembershipsRepository } from './memberships.repository.js';
import { PasswordHasher } from './password-hasher.js';
import { TenancyService } from './tenancy.service.js';
import { TenantsRepository } from './tenants.repository.js';
import { UsersRepository } from './users.repository.js';

/** Tenants, users and memberships, without HTTP: shared by the API and the admin CLI. */
@Module({
  providers: [
    TenantsRepository,
    UsersRepository,
    MembershipsRepository,
    BootstrapRepository,
    PasswordHasher,
    TenancyService,
  ],
  exports: [
    TenantsRepository,
    UsersRepository,
    MembershipsRepository,
    PasswordHasher,
    TenancyService,
  ],
})
export class TenancyModule {}
