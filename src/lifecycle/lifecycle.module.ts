import { Module } from '@nestjs/common';
import { BuildLifecycle } from './build-lifecycle.js';
import { BuildEntity } from './build.entity.js';
import { BuildsRepository } from './builds.repository.js';

/** The entities this feature maps; src/app.entities.ts registers them with the DataSource. */
export const LIFECYCLE_ENTITIES = [BuildEntity];

@Module({ providers: [BuildsRepository, BuildLifecycle], exports: [BuildLifecycle] })
export class LifecycleModule {}
