import { Injectable } from '@nestjs/common';
import type { TenantContext } from '../auth/tenant-context.js';
import { BuildLifecycle } from '../lifecycle/build-lifecycle.js';
import { BuildLogsRepository } from '../logs/build-logs.repository.js';
import type { BuildLogsDto } from './dto/logs.dto.js';
import { toLogEntry } from '../logs/log-entry.js';

@Injectable()
export class LogsService {
  constructor(
    private readonly lifecycle: BuildLifecycle,
    private readonly logs: BuildLogsRepository,
  ) {}

  /** One page of a build's log; works while the build runs (returns what is stored so far). */
  async page(
    tenant: TenantContext,
    buildId: string,
    offset: number,
    limit: number,
  ): Promise<BuildLogsDto> {
    // Side by side, not one after the other: the page is only answered once the build is known
    // to be the tenant's (else 404), and a page of another tenant's build is never returned.
    const [, { lines, total }] = await Promise.all([
      this.lifecycle.get(tenant.tenantId, buildId),
      this.logs.page(buildId, offset, limit),
    ]);
    return {
      build_id: buildId,
      logs: lines.map(toLogEntry),
      total_lines: total,
      offset,
      limit,
    };
  }
}
