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
    // Lines are read after the build, so total_lines never trails the page.
    const build = await this.lifecycle.get(tenant.tenantId, buildId);
    const lines = await this.logs.linesFrom(buildId, offset, limit);
    return {
      build_id: buildId,
      logs: lines.map(toLogEntry),
      total_lines: Math.max(
        build.logLines,
        lines.length === 0 ? 0 : lines[lines.length - 1]!.seq + 1,
      ),
      offset,
      limit,
    };
  }
}
