import { Module } from '@nestjs/common';
import { BuildLifecycle } from './build-lifecycle.js';
import { BuildsRepository } from './builds.repository.js';

@Module({ providers: [BuildsRepository, BuildLifecycle], exports: [BuildLifecycle] })
export class LifecycleModule {}
