import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { BuildRunner, type RunnableBuild } from './build-runner.js';

/**
 * Bound while this version of kiln has no runner for KILN_RUNNER: a started build fails at once
 * with InternalError and a message saying why, instead of staying in_progress forever.
 */
@Injectable()
export class UnavailableRunner extends BuildRunner {
  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
  }

  async start(build: RunnableBuild): Promise<void> {
    const message = `No build runner is available for KILN_RUNNER=${this.config.runner} in this version of kiln`;
    this.logger.error({ build_id: build.id, runner: this.config.runner }, message);
    await this.lifecycle.fail(build.id, 'InternalError', message);
  }

  cancel(): Promise<void> {
    return Promise.resolve(); // nothing runs, so nothing to stop
  }

  remove(): Promise<void> {
    return Promise.resolve(); // nothing is kept outside the database
  }
}
