import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { InvalidRequestError } from './errors.js';
/** A body as read: its bytes, or none and how many arrived when it was over the limit. */
export interface ReceivedBody {
  readonly bytes: Buffer;
  readonly receivedBytes: number;
}

/**
 * Reads an upload's body (the JSON body parser leaves upload routes alone, see json-body.ts), at
 * most `limit` bytes. A body declared larger (Content-Length) is not read at all, and one found
 * larger as it streams is read no further: both come back with `receivedBytes` over the limit and
 * no bytes, for BuildArtifacts.receive to refuse with 413.
 */
export function readUploadBody(request: IncomingMessage, limit: number): Promise<ReceivedBody> {
  const declared = Number(request.headers['content-length'] ?? 0);
  if (declared > limit) return Promise.resolve({ bytes: Buffer.alloc(0), receivedBytes: declared });
  return new Promise<ReceivedBody>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (): void => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      request.off('aborted', onError);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) {
        settle();
        request.pause();
        resolve({ bytes: Buffer.alloc(0), receivedBytes: received });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      settle();
      resolve({ bytes: Buffer.concat(chunks), receivedBytes: received });
    };
    const onError = (): void => {
      settle();
      // The client went away: no one is left to read the answer, which is no 500 either.
      reject(new InvalidRequestError('The upload ended before its body was complete'));
    };
    request.on('data', onData);
    request.once('end', onEnd);
    request.once('error', onError);
    request.once('aborted', onError);
  });
}

/**
 * After an upload was refused: the rest of its body is never read. What the request holds is
 * dropped, which also marks its body as consumed (Node would otherwise read and discard all the
 * rest after the answer, to reuse the connection), and the answer closes the connection.
 */
export function leaveBodyUnread(request: IncomingMessage, response: ServerResponse): void {
  if (request.complete || response.headersSent) return;
  request.pause();
  while (request.read() !== null);
  response.setHeader('Connection', 'close');
  closeWithoutReset(request.socket);
}

/** How long a connection closed over an unread body stays half-open (Go's net/http waits 500 ms). */
const LINGER_MS = 500;

/**
 * Closing a socket whose peer is still sending resets it, and a client that is writing then sees
 * the reset before it reads the answer. So the end of the answer is followed by a FIN, and the
 * socket is dropped only LINGER_MS later, still without reading: the client reads the answer
 * while its writes stall. Node's HTTP server calls destroySoon after a `Connection: close` answer.
 */
function closeWithoutReset(socket: Socket): void {
  socket.destroySoon = () => {
    socket.end();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
}
