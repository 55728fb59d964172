import { Module } from '@nestjs/common';
import { ProjectEntity } from './project.entity.js';
import { ProjectsController } from './projects.controller.js';
import { ProjectsRepository } from './projects.repository.js';
import { ProjectsService } from './projects.service.js';

/** The entities this feature maps; src/app.entities.ts registers them with the DataSource. */
export const PROJECTS_ENTITIES = [ProjectEntity];

@Module({
  controllers: [ProjectsController],
  providers: [ProjectsRepository, ProjectsService],
  exports: [ProjectsService, ProjectsRepository],
})
export class ProjectsModule {}
