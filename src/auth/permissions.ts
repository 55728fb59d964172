/**
 * Permissions checked in the tenant X-Tenant-ID names, through the caller's role there: the
 * spec's (section 5), then the admin API's (docs/adr/0043-admin-api.md): a tenant's members, its
 * projects, its settings (git credentials, secret manager, registries, admission), and the
 * caller's own API tokens there (docs/adr/0044-api-tokens.md), and its audit log
 * (docs/adr/0049-audit-log.md), and its projects' triggers (docs/adr/0053-triggers.md).
 */
export const TENANT_PERMISSIONS = [
  'build:create',
  'build:list',
  'build:read',
  'build:delete',
  'build:cancel',
  'member:manage',
  'project:manage',
  'settings:manage',
  'token:manage',
  'audit:read',
  'trigger:manage',
] as const;
export type TenantPermission = (typeof TENANT_PERMISSIONS)[number];

/**
 * Permissions over the caller's own account, checked without a tenant: every enabled user holds
 * them, whatever its memberships, so a user who has not chosen a tenant yet can list its own.
 * An API token holds `tenant:list` only: it never changes its user's account.
 */
export const USER_PERMISSIONS = ['tenant:list', 'account:manage'] as const;
export type UserPermission = (typeof USER_PERMISSIONS)[number];

/**
 * Permissions over the whole installation (tenants, users): held by installation administrators
 * (a flag on the user, the bootstrap admin's), never granted through a tenant role.
 */
export const SYSTEM_PERMISSIONS = ['system:admin'] as const;
export type SystemPermission = (typeof SYSTEM_PERMISSIONS)[number];

/** What a route declares: every API route declares exactly one. */
export type Permission = TenantPermission | UserPermission | SystemPermission;

export const ROLES = ['admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** The one place roles become permissions. */
const ROLE_PERMISSIONS: Readonly<Record<Role, readonly TenantPermission[]>> = {
  admin: TENANT_PERMISSIONS,
  // Builds and their own API tokens only: who belongs to the tenant, its projects and its
  // settings are the admin's.
  developer: ['build:create', 'build:list', 'build:read', 'build:cancel', 'token:manage'],
  viewer: ['build:list', 'build:read', 'token:manage'],
};

export function permissionsOf(role: Role): readonly TenantPermission[] {
  return ROLE_PERMISSIONS[role];
}

/** Whether a route's permission is checked without a tenant (see USER_PERMISSIONS). */
export function isUserPermission(permission: Permission): permission is UserPermission {
  return (USER_PERMISSIONS as readonly string[]).includes(permission);
}

/** Whether a route's permission is an installation administrator's (see SYSTEM_PERMISSIONS). */
export function isSystemPermission(permission: Permission): permission is SystemPermission {
  return (SYSTEM_PERMISSIONS as readonly string[]).includes(permission);
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
