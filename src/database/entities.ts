import { MembershipEntity } from '../auth/membership.entity.js';
import { TenantEntity } from '../auth/tenant.entity.js';
import { UserEntity } from '../auth/user.entity.js';
import { BuildEntity } from '../lifecycle/build.entity.js';
import { ProjectEntity } from '../projects/project.entity.js';

/** Every TypeORM entity kiln maps. Feature modules add theirs here. */
export const ENTITIES: ReadonlyArray<new () => object> = [
  TenantEntity,
  UserEntity,
  MembershipEntity,
  ProjectEntity,
  BuildEntity,
];
