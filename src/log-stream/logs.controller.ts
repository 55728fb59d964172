import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '../common/openapi-decorators.js';
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
      'Up to `limit` log lines of a build from line `offset` on (`build:read`); offset is the seq of the first line, and total_lines the number of lines stored so far. Live lines: the WebSocket GET /api/v1/builds/{id}/logs/stream, which takes the same offset.',
  })
  @ApiErrors(
    200,
    { type: BuildLogsDto, description: 'One page of log lines' },
    [400, 401, 403, 404, 429],
  )
  page(
    @CurrentTenant() tenant: TenantContext,
    @Param('id', UuidParamPipe) id: string,
    @Query() query: LogsQueryDto,
  ): Promise<BuildLogsDto> {
    return this.logs.page(tenant, id, query.offset, query.limit);
  }
}
