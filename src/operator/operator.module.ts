import { Module } from '@nestjs/common';

/**
 * The operator's part of the process (KILN_ROLE=operator or all). Empty for now: the reconcile
 * loop, and with it the Kubernetes side of the runner, lands in the next issue. It mounts no HTTP
 * route; the operator role serves only the health probes.
 */
@Module({})
export class OperatorModule {}
