import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LogHub } from './log-hub.js';
import { LogSink } from './log-sink.js';

/**
 * The log store: LogSink (the one way lines enter), the log repository and LogHub (new lines
 * announced across replicas). No HTTP and no auth: runners, the operator and the log transport
 * (src/log-stream/) all build on it.
 */
@Module({
  imports: [LifecycleModule],
  providers: [BuildLogsRepository, LogSink, LogHub],
  exports: [BuildLogsRepository, LogSink, LogHub],
})
export class LogsModule {}
