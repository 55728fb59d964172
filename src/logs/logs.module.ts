import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LogHub } from './log-hub.js';
import { LogSink } from './log-sink.js';
import { LogStreamServer } from './log-stream.server.js';
import { LogsController } from './logs.controller.js';
import { LogsService } from './logs.service.js';

@Module({
  imports: [LifecycleModule, AuthModule],
  controllers: [LogsController],
  providers: [BuildLogsRepository, LogSink, LogHub, LogsService, LogStreamServer],
  exports: [LogSink],
})
export class LogsModule {}
