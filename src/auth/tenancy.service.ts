import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import type { Logger } from 'pino';
import { InvalidRequestError, NotFoundError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig, MIN_PASSWORD_LENGTH } from '../config/config.js';
import { AccessChanges } from './access-changes.js';
import { BootstrapRepository } from './bootstrap.repository.js';
import type { MembershipEntity } from './membership.entity.js';
import { type MemberTenant, MembershipsRepository } from './memberships.repository.js';
import { MAX_PASSWORD_LENGTH, PasswordHasher } from './password-hasher.js';
import { isRole } from './permissions.js';
import type { TenantEntity } from './tenant.entity.js';
import { TenantsRepository } from './tenants.repository.js';
import type { UserEntity } from './user.entity.js';
import { UsersRepository } from './users.repository.js';
import { EMAIL_PATTERN, isUuid } from '../config/formats.js';

/**
 * Tenants, users and memberships: what the admin CLI and the first-start bootstrap do, and the
 * signed-in user's own tenants (GET /api/v1/auth/tenants).
 */
@Injectable()
export class TenancyService implements OnApplicationBootstrap {
  constructor(
    private readonly tenants: TenantsRepository,
    private readonly users: UsersRepository,
    private readonly memberships: MembershipsRepository,
    private readonly bootstrap: BootstrapRepository,
    private readonly hasher: PasswordHasher,
    private readonly changes: AccessChanges,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  async createTenant(name: string): Promise<TenantEntity> {
    const trimmed = name.trim();
    if (trimmed.length < 1 || trimmed.length > 100) {
      throw new InvalidRequestError('Tenant name must be 1 to 100 characters', {
        name: 'length 1-100',
      });
    }
    return this.tenants.create(trimmed);
  }

  async createUser(email: string, password: string): Promise<UserEntity> {
    const normalised = email.trim().toLowerCase();
    if (!EMAIL_PATTERN.test(normalised) || normalised.length > 320) {
      throw new InvalidRequestError('A valid e-mail address is required', {
        email: 'must be an e-mail address',
      });
    }
    if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH) {
      throw new InvalidRequestError(
        `Password must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`,
        { password: `length ${MIN_PASSWORD_LENGTH}-${MAX_PASSWORD_LENGTH}` },
      );
    }
    return this.users.create(normalised, await this.hasher.hash(password));
  }

  async addMember(tenantRef: string, email: string, role: string): Promise<MembershipEntity> {
    if (!isRole(role)) {
      throw new InvalidRequestError('Role must be admin, developer or viewer', {
        role: 'admin|developer|viewer',
      });
    }
    const tenant = await this.resolveTenant(tenantRef);
    const user = await this.userByEmail(email);
    const membership = await this.memberships.upsert(tenant.id, user.id, role);
    this.changes.changed(user.id);
    return membership;
  }

  /** Takes the user out of the tenant: its next request there is 403 on this replica at once. */
  async removeMember(tenantRef: string, email: string): Promise<void> {
    const tenant = await this.resolveTenant(tenantRef);
    const user = await this.userByEmail(email);
    if (!(await this.memberships.remove(tenant.id, user.id)))
      throw new NotFoundError(`${user.email} is not a member of tenant ${tenant.name}`);
    this.changes.changed(user.id);
  }

  /** The tenants the user is a member of, with its role in each, ordered by name. */
  tenantsOf(userId: string): Promise<MemberTenant[]> {
    return this.memberships.tenantsOf(userId);
  }

  private async userByEmail(email: string): Promise<UserEntity> {
    const user = await this.users.findByEmail(email.trim().toLowerCase());
    if (user === undefined) throw new NotFoundError(`No user with e-mail ${email}`);
    return user;
  }

  /** A tenant by id or by name. */
  async resolveTenant(ref: string): Promise<TenantEntity> {
    const tenant = isUuid(ref)
      ? await this.tenants.findById(ref.toLowerCase())
      : await this.tenants.findByName(ref);
    if (tenant === undefined) throw new NotFoundError(`No tenant ${ref}`);
    return tenant;
  }

  /** First start with an empty database and KILN_BOOTSTRAP_ADMIN_* set: create the admin. */
  async onApplicationBootstrap(): Promise<void> {
    const admin = this.config.bootstrapAdmin;
    if (admin === undefined || (await this.users.count()) > 0) return;
    const created = await this.bootstrap.bootstrapAdmin(
      admin.email,
      await this.hasher.hash(admin.password),
    );
    if (created === undefined) return;
    this.logger.info(
      {
        tenant_id: created.tenantId,
        user_id: created.userId,
        project_id: created.projectId,
        email: admin.email,
      },
      'bootstrap: created the default tenant, the admin user and the default project',
    );
  }
}
