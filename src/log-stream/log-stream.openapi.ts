import {
  getSchemaPath,
  type OperationObject,
  type PathItemObject,
  type ResponseObject,
} from '../common/openapi-decorators.js';
import { ACCESS_TOKEN_SCHEME, ErrorBodyDto } from '../common/openapi.js';
import { MAX_INT4 } from '../common/validators.js';
import { LogEntryResponseDto } from './dto/logs.dto.js';
import { LOG_STREAM_PROTOCOL } from './log-stream.server.js';

/** Path of the log WebSocket, which no Nest controller serves. */
export const LOG_STREAM_PATH = '/api/v1/builds/{id}/logs/stream';

/**
 * The log WebSocket for the OpenAPI document, which Nest cannot describe:
 * LogStreamServer answers the HTTP upgrade on Nest's server itself. Written by hand from
 * log-stream.server.ts and log-stream.session.ts, beside them, so a change to either changes this.
 */
export function logStreamPaths(): Record<string, PathItemObject> {
  return { [LOG_STREAM_PATH]: { get: logStreamOperation() } };
}

function logStreamOperation(): OperationObject {
  const logEntry = getSchemaPath(LogEntryResponseDto);
  return {
    operationId: 'LogStreamServer_stream',
    summary: "Stream a build's log lines live (WebSocket)",
    description: [
      'A WebSocket (RFC 6455). Every check happens during the HTTP upgrade: a refused upgrade is a plain HTTP response with the Error body, never a 101. Needs `build:read`.',
      `Credentials: \`Authorization: Bearer <access token>\` and \`X-Tenant-ID\`; or, for browsers, which cannot set headers on a WebSocket, the \`Sec-WebSocket-Protocol\` entries \`bearer.<access token>\` and \`tenant.<tenant uuid>\` beside \`${LOG_STREAM_PROTOCOL}\`.`,
      `After the 101 the server sends text messages, each one JSON object: a [LogEntry](${logEntry}) (\`timestamp\`, \`level\`, \`message\`, \`metadata\`) plus \`build_id\` (uuid) and \`seq\` (the line's number, from 0: the \`offset\` of GET /api/v1/builds/{id}/logs). Lines come in seq order from \`offset\` on, stored lines first and then live ones, with no gap and no duplicate.`,
      'The client sends nothing; a message over 64 KiB closes the stream with 1009. The server pings every KILN_WS_HEARTBEAT_SECONDS and drops a client that misses two pongs.',
      'Close codes: 1000 once the build has ended and every line was sent, with the final status (or `deleted`) as the reason; 1001 the server is shutting down; 1008 the access token expired; 1011 internal error; 1013 the client read too slowly. After 1001, 1011, 1013 or a dropped connection, reconnect with `offset` set to the last seq received plus one.',
    ].join('\n\n'),
    tags: ['logs'],
    security: [{ [ACCESS_TOKEN_SCHEME]: [] }],
    parameters: [
      {
        name: 'id',
        in: 'path',
        required: true,
        description: 'Build id',
        schema: { type: 'string', format: 'uuid' },
      },
      {
        name: 'offset',
        in: 'query',
        required: false,
        description:
          'Seq of the first line to send: lines from it on are replayed, then live lines follow.',
        schema: { type: 'integer', minimum: 0, maximum: MAX_INT4, default: 0 },
      },
      {
        name: 'X-Tenant-ID',
        in: 'header',
        required: false,
        description:
          'Tenant UUID (not the nil UUID). Required unless a `tenant.<uuid>` subprotocol entry carries it.',
        schema: { type: 'string', format: 'uuid' },
      },
      {
        name: 'Sec-WebSocket-Protocol',
        in: 'header',
        required: false,
        description: `Subprotocols offered. kiln speaks \`${LOG_STREAM_PROTOCOL}\` and echoes only that one; \`bearer.<access token>\` and \`tenant.<tenant uuid>\` entries stand in for the Authorization and X-Tenant-ID headers.`,
        schema: { type: 'string' },
        example: `${LOG_STREAM_PROTOCOL}, bearer.<access token>, tenant.<tenant uuid>`,
      },
      {
        name: 'Upgrade',
        in: 'header',
        required: true,
        description: 'The HTTP upgrade to a WebSocket, as every WebSocket client sends it.',
        schema: { type: 'string', enum: ['websocket'] },
      },
      {
        name: 'Sec-WebSocket-Version',
        in: 'header',
        required: true,
        description: 'The WebSocket protocol version kiln speaks.',
        schema: { type: 'string', enum: ['13'] },
      },
    ],
    responses: {
      '101': {
        description: `Switching Protocols: the connection is a WebSocket streaming the build's log lines, one JSON message per line (a [LogEntry](${logEntry}) plus \`build_id\` and \`seq\`).`,
        headers: {
          Upgrade: { description: 'Always `websocket`', schema: { type: 'string' } },
          'Sec-WebSocket-Accept': {
            description: 'The handshake answer to Sec-WebSocket-Key (RFC 6455 section 4.2.2)',
            schema: { type: 'string' },
          },
          'Sec-WebSocket-Protocol': {
            description: `\`${LOG_STREAM_PROTOCOL}\` when the client offered it; absent otherwise`,
            schema: { type: 'string', enum: [LOG_STREAM_PROTOCOL] },
          },
        },
      },
      '400': refusal(
        'Invalid request: X-Tenant-ID missing or not a tenant UUID, id not a UUID, offset not an integer from 0 to 2147483647, or a handshake the WebSocket library refused (answered with `Sec-WebSocket-Version: 13`)',
      ),
      '401': refusal(
        'No access token (neither Authorization nor a `bearer.` entry), or an invalid or expired one',
      ),
      '403': refusal(
        "Not a member of the tenant, the role lacks `build:read`, or an Origin that is neither kiln's own nor in KILN_WS_ALLOWED_ORIGINS",
      ),
      '404': refusal('No such build in this tenant'),
      '429': {
        ...refusal('The user already has KILN_WS_MAX_CONNECTIONS_PER_USER log streams open'),
        headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
      },
      '500': refusal('Internal error; trace_id identifies it in the server log'),
      '503': refusal('kiln is shutting down or the database is unavailable; connect again shortly'),
    },
  };
}

/** A refused upgrade: a plain HTTP response with the Error body; the connection then closes. */
function refusal(description: string): ResponseObject {
  return {
    description,
    content: { 'application/json': { schema: { $ref: getSchemaPath(ErrorBodyDto) } } },
  };
}
