import { randomUUID } from 'node:crypto';
import type { Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { errorResponseOf, rawErrorResponse } from './error-body.js';
import { InvalidRequestError } from './errors.js';

/** Node's parser errors with a status of their own; every other parse error is a 400. */
const REFUSALS: Readonly<Record<string, { status: number; message: string }>> = {
  HPE_HEADER_OVERFLOW: { status: 431, message: 'Request header fields are too large' },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, message: 'Chunk extensions are too large' },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, message: 'The request was not received in time' },
};
const MALFORMED = { status: 400, message: 'Malformed HTTP request' };

/** How long a refused connection may keep sending before it is dropped. */
const LINGER_MS = 1000;

/**
 * Answers what Node's HTTP parser refuses before any route runs (a header over
 * --max-http-header-size, a malformed request line or header, a request too slow to arrive) with
 * the spec's Error body instead of Node's bare status line, then closes the connection. Nothing is
 * written where it would corrupt the exchange: on a reset or unwritable socket, or when a response
 * on the same connection has already begun.
 */
export function answerClientErrors(server: Server, logger: Logger): void {
  // Responses not yet finished, per connection (more than one when requests are pipelined).
  const inFlight = new WeakMap<Duplex, Set<ServerResponse>>();
  const refused = new WeakSet<Duplex>();

  server.on('request', (request, response: ServerResponse) => {
    const socket = request.socket;
    const responses = inFlight.get(socket) ?? new Set<ServerResponse>();
    inFlight.set(socket, responses.add(response));
    response.once('close', () => responses.delete(response));
  });

  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // The parser reports again on every chunk that still arrives: the first answer stands.
    if (refused.has(socket)) return;
    refused.add(socket);
    if (
      error.code === 'ECONNRESET' ||
      !socket.writable ||
      [...(inFlight.get(socket) ?? [])].some((response) => response.headersSent)
    ) {
      socket.destroy();
      return;
    }
    const { status, message } = REFUSALS[error.code ?? ''] ?? MALFORMED;
    const traceId = randomUUID();
    const { body } = errorResponseOf(new InvalidRequestError(message), traceId);
    logger.debug({ trace_id: traceId, status, reason: error.code }, 'refused a malformed request');
    socket.end(rawErrorResponse(status, body, traceId));
    // Closing with unread input would reset the connection and could discard the answer: let the
    // client read it and close, and drop the connection if it does not.
    const linger = setTimeout(() => socket.destroy(), LINGER_MS);
    linger.unref();
    socket.once('close', () => clearTimeout(linger));
  });
}
