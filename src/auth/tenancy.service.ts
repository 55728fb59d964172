import { Inject, Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import type { Logger } from 'pino';
import { ConflictError, InvalidRequestError, NotFoundError } from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { AccessChanges } from './access-changes.js';
import { BootstrapRepository } from './bootstrap.repository.js';
import type { MembershipEntity } from './membership.entity.js';
import {
  type MembershipChange,
  type MemberTenant,
  MembershipsRepository,
  type TenantMember,
} from './memberships.repository.js';
import { checkNewPassword, PasswordHasher } from './password-hasher.js';
import { isRole, type Role } from './permissions.js';
import type { TenantEntity } from './tenant.entity.js';
import { TenantsRepository } from './tenants.repository.js';
import type { UserEntity } from './user.entity.js';
import { UsersRepository } from './users.repository.js';
import { EMAIL_PATTERN, isUuid } from '../config/formats.js';

/** A tenant's name, trimmed: 1 to 100 characters (400 otherwise). */
function tenantName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length < 1 || trimmed.length > 100) {
    throw new InvalidRequestError('Tenant name must be 1 to 100 characters', {
      name: 'length 1-100',
    });
  }
  return trimmed;
}

/** A role name, or the 400 to answer. */
function roleOf(role: string): Role {
  if (!isRole(role)) {
    throw new InvalidRequestError('Role must be admin, developer or viewer', {
      role: 'admin|developer|viewer',
    });
  }
  return role;
}

/**
 * Tenants, users and memberships: what the admin API (docs/adr/0043-admin-api.md), the admin CLI
 * and the first-start bootstrap do, and the signed-in user's own tenants.
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
    return this.tenants.create(await this.freeTenantName(name));
  }

  /**
   * A new tenant with its first admin: the user with `adminEmail`, else the user who creates it
   * (an installation administrator, who can then add others and leave).
   */
  async createTenantFor(
    name: string,
    creatorId: string,
    adminEmail: string | undefined,
  ): Promise<TenantEntity> {
    const adminId = adminEmail === undefined ? creatorId : (await this.userByEmail(adminEmail)).id;
    const tenant = await this.tenants.createWithAdmin(await this.freeTenantName(name), adminId);
    this.changes.changed(adminId);
    return tenant;
  }

  /** One page of every tenant (installation administrators), ordered by name. */
  listTenants(page: number, limit: number): Promise<{ tenants: TenantEntity[]; total: number }> {
    return this.tenants.page((page - 1) * limit, limit);
  }

  async renameTenant(id: string, name: string): Promise<TenantEntity> {
    const renamed = await this.tenants.rename(id, await this.freeTenantName(name, id));
    if (renamed === undefined) throw new NotFoundError(`No tenant ${id}`);
    return renamed;
  }

  /** Deletes a tenant that has no build left (409 otherwise: its builds are deleted first). */
  async deleteTenant(id: string): Promise<void> {
    const outcome = await this.tenants.delete(id);
    if (outcome === 'missing') throw new NotFoundError(`No tenant ${id}`);
    if (outcome === 'has-builds')
      throw new ConflictError(
        'The tenant still has builds: delete them first (DELETE /api/v1/builds/{id}), so that their logs and what the runner keeps for them go too',
      );
  }

  /** The tenant's members, ordered by e-mail. */
  membersOf(tenantId: string): Promise<TenantMember[]> {
    return this.memberships.membersOf(tenantId);
  }

  /**
   * Adds the user with `email` to the tenant with `role`, or changes its role. Refused (409) when
   * it would leave the tenant without an admin.
   */
  async setMember(tenantId: string, email: string, role: string): Promise<TenantMember> {
    const checked = roleOf(role);
    const user = await this.userByEmail(email);
    this.applied(await this.memberships.change(tenantId, user.id, checked), user.id);
    const member = (await this.memberships.membersOf(tenantId)).find((m) => m.userId === user.id);
    if (member === undefined) throw new NotFoundError(`${user.email} is not a member`);
    return member;
  }

  /** Takes a user out of the tenant, unless it is the tenant's last admin (409). */
  async removeMemberById(tenantId: string, userId: string): Promise<void> {
    this.applied(await this.memberships.change(tenantId, userId, null), userId);
  }

  async createUser(email: string, password: string): Promise<UserEntity> {
    const normalised = email.trim().toLowerCase();
    if (!EMAIL_PATTERN.test(normalised) || normalised.length > 320) {
      throw new InvalidRequestError('A valid e-mail address is required', {
        email: 'must be an e-mail address',
      });
    }
    checkNewPassword(password);
    if ((await this.users.findByEmail(normalised)) !== undefined)
      throw new ConflictError(`A user with e-mail ${normalised} already exists`, {
        email: 'taken',
      });
    return this.users.create(normalised, await this.hasher.hash(password));
  }

  /** One page of every user (installation administrators), by e-mail. */
  listUsers(page: number, limit: number): Promise<{ users: UserEntity[]; total: number }> {
    return this.users.page((page - 1) * limit, limit);
  }

  /**
   * Disables or enables a user, or makes it an installation administrator or not. A disabled
   * user's next request is 401 on every replica. Refused (409) when no enabled installation
   * administrator would be left.
   */
  async changeUser(
    id: string,
    change: { disabled?: boolean; systemAdmin?: boolean },
  ): Promise<UserEntity> {
    const outcome = await this.users.change(id, change);
    if (outcome === 'missing') throw new NotFoundError(`No user ${id}`);
    if (outcome === 'last-admin')
      throw new ConflictError(
        'This is the last enabled installation administrator: make another user one first, so that someone can still manage the installation',
      );
    this.changes.changed(id);
    return outcome;
  }

  async addMember(tenantRef: string, email: string, role: string): Promise<MembershipEntity> {
    roleOf(role);
    const tenant = await this.resolveTenant(tenantRef);
    const user = await this.userByEmail(email);
    const membership = await this.memberships.upsert(tenant.id, user.id, roleOf(role));
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

  /**
   * Makes the user an installation administrator (`system:admin`), or takes it back: the
   * database-direct emergency access of the admin CLI (`kiln-admin user system-admin`).
   */
  async setSystemAdmin(email: string, systemAdmin: boolean): Promise<UserEntity> {
    const user = await this.userByEmail(email);
    await this.users.setSystemAdmin(user.id, systemAdmin);
    this.changes.changed(user.id);
    return { ...user, systemAdmin };
  }

  /**
   * `name` checked and trimmed, unless another tenant than `ownId` has it (409; the unique
   * constraint still decides between two requests at once).
   */
  private async freeTenantName(name: string, ownId?: string): Promise<string> {
    const trimmed = tenantName(name);
    const other = await this.tenants.findByName(trimmed);
    if (other !== undefined && other.id !== ownId)
      throw new ConflictError(`A tenant named ${trimmed} already exists`, { name: 'taken' });
    return trimmed;
  }

  /** Announces a change of membership, or throws what refused it. */
  private applied(change: MembershipChange, userId: string): void {
    switch (change.kind) {
      case 'no-tenant':
        throw new NotFoundError('No such tenant');
      case 'not-a-member':
        throw new NotFoundError('The user is not a member of this tenant');
      case 'last-admin':
        throw new ConflictError(
          "This is the tenant's last admin: make another member admin first, so that someone can still manage the tenant",
        );
      case 'unchanged':
        return;
      default:
        this.changes.changed(userId);
    }
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
