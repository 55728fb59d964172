/** The spec's permission names (section 5). Every API route declares exactly one. */
export const PERMISSIONS = [
  'build:create',
  'build:list',
  'build:read',
  'build:delete',
  'build:cancel',
] as const;
export type Permission = (typeof PERMISSIONS)[number];

export const ROLES = ['admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** The one place roles become permissions. */
const ROLE_PERMISSIONS: Readonly<Record<Role, readonly Permission[]>> = {
  admin: PERMISSIONS,
  developer: ['build:create', 'build:list', 'build:read', 'build:cancel'],
  viewer: ['build:list', 'build:read'],
};

export function permissionsOf(role: Role): readonly Permission[] {
  return ROLE_PERMISSIONS[role];
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value);
}
