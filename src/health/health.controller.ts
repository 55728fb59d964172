import { Controller, Get } from '@nestjs/common';
import { ApiExcludeController } from '../common/openapi-decorators.js';
import { Public } from '../auth/require-permission.decorator.js';
import { type HealthReport, HealthService } from './health.service.js';

/**
 * Probes for Kubernetes and load balancers; outside /api/v1 and without authentication. Not in
 * the OpenAPI document, which describes the API under /api/v1 for its
 * clients; the chart wires the probes.
 */
@ApiExcludeController()
@Controller()
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @Public()
  @Get('healthz')
  live(): HealthReport {
    return this.health.live();
  }

  @Public()
  @Get('readyz')
  ready(): Promise<HealthReport> {
    return this.health.ready();
  }
}
