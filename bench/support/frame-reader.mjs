// A minimal RFC 6455 client for the live bench: the HTTP upgrade, then frames read straight off
// the TCP socket, handing each text payload over as a byte range (no string, no copy). The ws
// library's client decodes every message into its own Buffer and event: in one process it tops
// out below the messages/s that 100 subscribers at 10,000 lines/s receive (the bench prints both),
// so with it the bench would time its own clients rather than kiln.
import { randomBytes } from 'node:crypto';
import net from 'node:net';

const CRLF2 = Buffer.from('\r\n\r\n');

/**
 * Opens one stream. `onText(buffer, start, end, receivedNs)` gets each text message's payload
 * range and when the bytes that completed it arrived (hrtime ns as a Number, read once per read);
 * resolves once the server answered 101, rejects on any other answer. `closed` resolves with the
 * close code the server sent (1006 when the connection ended without one).
 */
export function openFrameStream(url, headers, onText) {
  const target = new URL(url);
  const socket = net.connect(Number(target.port), target.hostname);
  socket.setNoDelay(true);
  let closeCode = 1006;
  let receivedNs = 0;
  let settleClosed;
  const closed = new Promise((done) => (settleClosed = done));
  socket.on('close', () => settleClosed(closeCode));
  socket.on('error', () => undefined);

  const opened = new Promise((done, fail) => {
    socket.once('connect', () => {
      const lines = [
        `GET ${target.pathname}${target.search} HTTP/1.1`,
        `Host: ${target.host}`,
        'Upgrade: websocket',
        'Connection: Upgrade',
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
        'Sec-WebSocket-Version: 13',
        ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      ];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
    let pending = Buffer.alloc(0);
    let upgraded = false;
    socket.on('data', (chunk) => {
      receivedNs = Number(process.hrtime.bigint());
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      if (!upgraded) {
        const end = pending.indexOf(CRLF2);
        if (end < 0) return;
        const status = pending.subarray(0, pending.indexOf('\r\n')).toString('latin1');
        if (!/^HTTP\/1\.1 101 /.test(status)) {
          socket.destroy();
          fail(new Error(`stream upgrade refused: ${status}`));
          return;
        }
        upgraded = true;
        pending = pending.subarray(end + CRLF2.length);
        done();
      }
      pending = readFrames(pending);
    });
    socket.once('error', fail);
  });

  /** Handles every whole frame in `bytes`; returns the bytes of an unfinished one. */
  function readFrames(bytes) {
    let at = 0;
    for (;;) {
      if (bytes.length - at < 2) break;
      const opcode = bytes[at] & 0x0f;
      let size = bytes[at + 1] & 0x7f;
      let header = 2;
      if (size === 126) {
        if (bytes.length - at < 4) break;
        size = bytes.readUInt16BE(at + 2);
        header = 4;
      } else if (size === 127) {
        if (bytes.length - at < 10) break;
        size = Number(bytes.readBigUInt64BE(at + 2));
        header = 10;
      }
      if (bytes.length - at < header + size) break;
      const start = at + header;
      const end = start + size;
      if (opcode === 0x1) onText(bytes, start, end, receivedNs);
      else if (opcode === 0x8) {
        closeCode = size >= 2 ? bytes.readUInt16BE(start) : 1005;
        // Echo the close (masked with a zero key, as a client must mask) and hang up.
        socket.end(Buffer.from([0x88, 0x82, 0, 0, 0, 0, closeCode >> 8, closeCode & 0xff]));
      } else if (opcode === 0x9) {
        const pong = Buffer.alloc(6 + size);
        pong[0] = 0x8a;
        pong[1] = 0x80 | size; // a ping's payload is at most 125 bytes
        bytes.copy(pong, 6, start, end);
        socket.write(pong);
      }
      at = end;
    }
    return at === bytes.length ? Buffer.alloc(0) : bytes.subarray(at);
  }

  return { opened, closed, terminate: () => socket.destroy() };
}
