import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { LogsModule } from '../logs/logs.module.js';
import { LogStreamServer } from './log-stream.server.js';
import { LogsController } from './logs.controller.js';
import { LogsService } from './logs.service.js';

/** The log transport of the API: paged logs over HTTP and the live WebSocket stream. */
@Module({
  imports: [LifecycleModule, LogsModule, AuthModule],
  controllers: [LogsController],
  providers: [LogsService, LogStreamServer],
})
export class LogStreamModule {}
