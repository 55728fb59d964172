import type { EnvReader } from './reader.js';

/** The log store: how much of a build's log it keeps, and how deleted builds' lines are purged. */
export function readLogs(read: EnvReader) {
  return {
    logMaxBytesPerBuild: read.integer(
      'KILN_LOG_MAX_BYTES_PER_BUILD',
      100 * 1024 * 1024,
      1024,
      10 * 1024 ** 3,
    ),
    logPurgeBatchLines: read.integer('KILN_LOG_PURGE_BATCH_LINES', 5000, 1, 1_000_000),
    logPurgePauseMs: read.integer('KILN_LOG_PURGE_PAUSE_MS', 50, 0, 60_000),
    logPurgePollMs: read.integer('KILN_LOG_PURGE_POLL_SECONDS', 10, 1, 3600) * 1000,
  };
}
