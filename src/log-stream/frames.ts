/**
 * WebSocket text frames (RFC 6455 section 5.2) for the log stream, built once and written to every
 * subscriber as they are: a server's frames are unmasked, so the bytes are the same for all.
 */

/** Consecutive frames in one buffer; frame i spans `offsets[i]` to `offsets[i + 1]`. */
export interface Frames {
  readonly buffer: Buffer;
  readonly offsets: readonly number[];
}

const FIN_TEXT = 0x81;

/** One final, unmasked text frame per payload, in order, in one buffer. */
export function textFrames(payloads: readonly string[]): Frames {
  const sizes = payloads.map((payload) => Buffer.byteLength(payload, 'utf8'));
  const offsets = [0];
  let total = 0;
  for (const size of sizes) {
    total += headerSize(size) + size;
    offsets.push(total);
  }
  const buffer = Buffer.allocUnsafe(total);
  payloads.forEach((payload, i) => {
    let at = offsets[i]!;
    const size = sizes[i]!;
    buffer[at++] = FIN_TEXT;
    if (size < 126) {
      buffer[at++] = size;
    } else if (size < 0x10000) {
      buffer[at++] = 126;
      at = buffer.writeUInt16BE(size, at);
    } else {
      buffer[at++] = 127;
      at = buffer.writeBigUInt64BE(BigInt(size), at);
    }
    buffer.write(payload, at, size, 'utf8');
  });
  return { buffer, offsets };
}

/** Bytes of frame header for a payload of `size` bytes (server to client: no masking key). */
function headerSize(size: number): number {
  if (size < 126) return 2;
  return size < 0x10000 ? 4 : 10;
}
