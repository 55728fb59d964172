import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { RequirePermission } from '../auth/require-permission.decorator.js';
import { CurrentTenant, type TenantContext } from '../auth/tenant-context.js';
import { ApiErrors, ApiTenantScoped } from '../common/openapi.js';
import { UuidParamPipe } from '../common/uuid-param.pipe.js';
import { BuildLogsDto, LogsQueryDto } from './dto/logs.dto.js';
import { LogsService } from './logs.service.js';

@ApiTags('logs')
@ApiTenantScoped()
@Controller('builds')
export class LogsController {
  constructor(private readonly logs: LogsService) {}

  @Get(':id/logs')
  @RequirePermission('build:read')
  @ApiOperation({
    summary: "A page of a build's log lines",
    description:
      'offset is the seq of the first line. Live lines: WebSocket GET /api/v1/builds/{id}/logs/stream (Authorization and X-Tenant-ID on the upgrade; `?offset=N` replays from line N, then streams; each message is a LogEntry plus build_id and seq; the server closes with 1000 and the final status once the build has ended and every line was sent).',
  })
  @ApiErrors(200, { type: BuildLogsDto }, [400, 401, 403, 404, 429])
  page(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Query() query: LogsQueryDto,
  ): Promise<BuildLogsDto> {
    return this.logs.page(tenant, id, query.offset, query.limit);
  }
}
