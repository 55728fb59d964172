import type { EnvReader } from './reader.js';

/**
 * Calls to vendors when a build starts (secret managers, registries' pre-flight, S3): the time
 * per attempt and the attempts in all.
 */
export function readExternalCalls(read: EnvReader) {
  return {
    externalCalls: {
      timeoutMs: read.integer('KILN_EXTERNAL_TIMEOUT_MS', 5000, 100, 120_000),
      attempts: read.integer('KILN_EXTERNAL_ATTEMPTS', 3, 1, 10),
    },
  };
}
