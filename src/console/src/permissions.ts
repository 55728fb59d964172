import { session } from './api/session.js';

/**
 * Whether the signed-in user's role in the chosen tenant holds `permission`, as GET
 * /api/v1/auth/tenants answered. It only decides what the console shows: the API checks every
 * call itself.
 */
export function can(permission: string): boolean {
  return session()?.permissions?.includes(permission) ?? false;
}
