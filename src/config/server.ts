import type { EnvReader } from './reader.js';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** The HTTP server and the process: where it listens, what it logs, how it stops. */
export function readServer(read: EnvReader) {
  return {
    host: read.value('KILN_HOST') ?? '0.0.0.0',
    port: read.integer('PORT', 8080, 1, 65535),
    logLevel: read.oneOf('KILN_LOG_LEVEL', LOG_LEVELS, 'info'),
    maxBodyBytes: read.integer('KILN_MAX_BODY_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    trustProxyHops: read.integer('KILN_TRUST_PROXY_HOPS', 0, 0, 10),
    shutdownTimeoutMs: read.integer('KILN_SHUTDOWN_TIMEOUT_SECONDS', 25, 1, 3600) * 1000,
  };
}
