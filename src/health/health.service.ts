import { Injectable } from '@nestjs/common';
import { UnavailableError } from '../common/errors.js';
import { DatabaseHealth } from '../database/database-health.js';

export interface HealthReport {
  status: 'ok';
  checks?: Record<string, 'ok'>;
}

@Injectable()
export class HealthService {
  constructor(private readonly database: DatabaseHealth) {}

  live(): HealthReport {
    return { status: 'ok' };
  }

  async ready(): Promise<HealthReport> {
    if (!(await this.database.isReachable())) {
      throw new UnavailableError('The database is not reachable');
    }
    return { status: 'ok', checks: { database: 'ok' } };
  }
}
