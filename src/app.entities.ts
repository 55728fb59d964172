import { INTEGRATIONS_ENTITIES } from './integrations/integrations.module.js';
import { LIFECYCLE_ENTITIES } from './lifecycle/lifecycle.module.js';
import { PROJECTS_ENTITIES } from './projects/projects.module.js';
import { TENANCY_ENTITIES } from './auth/tenancy.module.js';
import type { EntityClass } from './database/data-source.js';

/**
 * Every TypeORM entity kiln maps, gathered from the features that own them; the one list every
 * DataSource of the application (server, CLI, tests, benchmarks) is created with. No relation
 * crosses these lists, so a medium test may map only its own feature's entities.
 */
export const KILN_ENTITIES: ReadonlyArray<EntityClass> = [
  ...TENANCY_ENTITIES,
  ...PROJECTS_ENTITIES,
  ...LIFECYCLE_ENTITIES,
  ...INTEGRATIONS_ENTITIES,
];
