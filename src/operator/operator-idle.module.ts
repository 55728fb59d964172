import { Inject, Injectable, Module, type OnApplicationBootstrap } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';

/**
 * The operator of a process that runs it (KILN_ROLE=operator or all) where no kubeconfig or
 * service account was found: a laptop's `make run`. There is no cluster to reconcile, so it
 * imports nothing of the operator or of @kubernetes/client-node, and says once that the loop is
 * not running (docs/adr/0051-api-role-memory.md).
 */
@Injectable()
export class IdleOperator implements OnApplicationBootstrap {
  constructor(@Inject(LOGGER) private readonly logger: Logger) {}

  onApplicationBootstrap(): void {
    this.logger.warn(
      'operator: no kubeconfig or service account found; the reconcile loop is not running',
    );
  }
}

@Module({ providers: [IdleOperator] })
export class IdleOperatorModule {}
