import { SetMetadata } from '@nestjs/common';
import type { Permission } from './permissions.js';

export const PERMISSION_KEY = 'kiln:permission';
export const PUBLIC_KEY = 'kiln:public';

/** The one permission a route needs. Routes without it (and not @Public) are refused. */
export const RequirePermission = (permission: Permission) =>
  SetMetadata(PERMISSION_KEY, permission);

/** A route open without a token or tenant (login, health). Keep this list short. */
export const Public = () => SetMetadata(PUBLIC_KEY, true);
