import { Controller, Get } from '@nestjs/common';
import { type HealthReport, HealthService } from './health.service.js';

/** Probes for Kubernetes and load balancers; outside /api/v1 and without authentication. */
@Controller()
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @Get('healthz')
  live(): HealthReport {
    return this.health.live();
  }

  @Get('readyz')
  ready(): Promise<HealthReport> {
    return this.health.ready();
  }
}
