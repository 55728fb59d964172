/**
 * The spec's permission names (section 5): checked in the tenant X-Tenant-ID names, through the
 * caller's role there.
 */
export const TENANT_PERMISSIONS = [
  'build:create',
  'build:list',
  'build:read',
  'build:delete',
  'build:cancel',
] as const;
export type TenantPermission = (typeof TENANT_PERMISSIONS)[number];

/**
 * Permissions over the caller's own account, checked without a tenant: every enabled user holds
 * them, whatever its memberships, so a user who has not chosen a tenant yet can list its own.
 */
export const USER_PERMISSIONS = ['tenant:list'] as const;
export type UserPermission = (typeof USER_PERMISSIONS)[number];

/** What a route declares: every API route declares exactly one. */
export type Permission = TenantPermission | UserPermission;

export const ROLES = ['admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** The one place roles become permissions. */
const ROLE_PERMISSIONS: Readonly<Record<Role, readonly TenantPermission[]>> = {
  admin: TENANT_PERMISSIONS,
  developer: ['build:create', 'build:list', 'build:read', 'build:cancel'],
  viewer: ['build:list', 'build:read'],
};

export function permissionsOf(role: Role): readonly TenantPermission[] {
  return ROLE_PERMISSIONS[role];
}

/** Whether a route's permission is checked without a tenant (see USER_PERMISSIONS). */
export function isUserPermission(permission: Permission): permission is UserPermission {
  return (USER_PERMISSIONS as readonly string[]).includes(permission);
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
