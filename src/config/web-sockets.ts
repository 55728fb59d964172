import type { EnvReader } from './reader.js';

const ORIGIN = /^https?:\/\/[^/\s]+$/;

/** The log WebSocket: who may open it, how many per user, how it is kept alive and fed. */
export function readWebSockets(read: EnvReader) {
  const settings = {
    wsMaxConnectionsPerUser: read.integer('KILN_WS_MAX_CONNECTIONS_PER_USER', 20, 1, 10_000),
    wsHeartbeatMs: read.integer('KILN_WS_HEARTBEAT_SECONDS', 30, 1, 3600) * 1000,
    wsStallMs: read.integer('KILN_WS_STALL_SECONDS', 10, 1, 3600) * 1000,
    wsPollMs: read.integer('KILN_WS_POLL_SECONDS', 5, 1, 3600) * 1000,
  };
  const wsAllowedOrigins = read.list('KILN_WS_ALLOWED_ORIGINS');
  for (const origin of wsAllowedOrigins) {
    if (!ORIGIN.test(origin)) {
      read.bad(
        'KILN_WS_ALLOWED_ORIGINS',
        'comma-separated origins such as https://builds.example.com',
        origin,
      );
    }
  }
  return { ...settings, wsAllowedOrigins };
}
