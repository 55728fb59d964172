import type { INestApplication } from '@nestjs/common';
import {
  DocumentBuilder,
  getSchemaPath,
  type OpenAPIObject,
  type OperationObject,
  type ResponseObject,
  SwaggerModule,
} from '@nestjs/swagger';
import { LogEntryResponseDto } from '../log-stream/dto/logs.dto.js';
import { LOG_STREAM_PROTOCOL } from '../log-stream/log-stream.server.js';
import { ACCESS_TOKEN_SCHEME, ErrorBodyDto, UPLOAD_TOKEN_SCHEME } from './openapi.js';
import { MAX_INT4 } from './validators.js';

export const OPENAPI_JSON_PATH = 'api/v1/openapi.json';
export const OPENAPI_UI_PATH = 'api/v1/docs';

/** Path of the log WebSocket, which no Nest controller serves (see withLogStream). */
export const LOG_STREAM_PATH = '/api/v1/builds/{id}/logs/stream';

/** The document's tags, each with its description: an operation uses only these. */
const TAGS: ReadonlyArray<readonly [name: string, description: string]> = [
  ['auth', 'Sign-in: an e-mail and password exchanged for a bearer access token.'],
  ['projects', 'The projects of the tenant in X-Tenant-ID, which builds belong to.'],
  [
    'builds',
    'Builds of container images: create, start, cancel, retry, delete, read their status, ' +
      'and the SBOM and scan results their steps stored.',
  ],
  ['logs', 'Log lines of a build: pages over HTTP and a live WebSocket stream.'],
];

/** The OpenAPI 3 document, generated from the controllers and DTOs (spec section 9: 1.0.0). */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setTitle('kiln build service')
    .setDescription(
      'Creates, starts, monitors, cancels and retries container-image builds and serves their logs. ' +
        'Every route but login needs `Authorization: Bearer <token>` and `X-Tenant-ID`. Every error has the Error body. ' +
        '`X-RateLimit-Reset` is the Unix time, in whole seconds, at which the rate-limit window resets; a 429 also carries `Retry-After` in seconds.',
    )
    .setVersion('1.0.0')
    .setLicense('Apache-2.0', 'https://www.apache.org/licenses/LICENSE-2.0')
    // Relative: the document is served by the deployment it describes, under whatever host and
    // scheme the client reached it by; every path carries the /api/v1 prefix itself.
    .addServer('/', 'The kiln deployment serving this document')
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: 'Access token from POST /api/v1/auth/login',
      },
      ACCESS_TOKEN_SCHEME,
    )
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: 'Upload token kiln minted for one build and one kind of result (SBOM or scan)',
      },
      UPLOAD_TOKEN_SCHEME,
    )
    // The default, as in the application (AuthGuard denies a route not marked @Public): an
    // operation without its own security still needs an access token.
    .addSecurityRequirements(ACCESS_TOKEN_SCHEME);
  for (const [name, description] of TAGS) builder.addTag(name, description);
  return withLogStream(SwaggerModule.createDocument(app, builder.build()));
}

/** Serves the document as JSON and a browsable UI; neither needs authentication. */
export function serveOpenApi(app: INestApplication): void {
  SwaggerModule.setup(OPENAPI_UI_PATH, app, () => buildOpenApiDocument(app), {
    jsonDocumentUrl: OPENAPI_JSON_PATH,
    yamlDocumentUrl: 'api/v1/openapi.yaml',
    customSiteTitle: 'kiln API',
  });
}

/**
 * Adds the log WebSocket (spec 4.10), which Nest cannot describe: LogStreamServer answers the
 * HTTP upgrade on Nest's server itself. Written here by hand from log-stream.server.ts and
 * log-stream.session.ts, so a change to either must change this too.
 */
function withLogStream(document: OpenAPIObject): OpenAPIObject {
  document.paths[LOG_STREAM_PATH] = { get: logStreamOperation() };
  return document;
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
