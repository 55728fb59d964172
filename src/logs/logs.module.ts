import { Module } from '@nestjs/common';
import { LifecycleModule } from '../lifecycle/lifecycle.module.js';
import { BuildLogsRepository } from './build-logs.repository.js';
import { LogHub } from './log-hub.js';
import { LogPurger } from './log-purger.js';
import { LogSink } from './log-sink.js';

/**
 * The log store: LogSink (the one way lines enter), the log repository, LogHub (new lines
 * announced across replicas) and LogPurger (deleted builds' lines removed in the background).
 * No HTTP and no auth: runners, the operator and the log transport (src/log-stream/) all build
 * on it.
 */
@Module({
  imports: [LifecycleModule],
  providers: [BuildLogsRepository, LogSink, LogHub, LogPurger],
  exports: [BuildLogsRepository, LogSink, LogHub, LogPurger],
})
export class LogsModule {}
