import type { EventEmitter } from 'node:events';
import * as ws from 'ws';
import { textFrames } from './frames.js';

/** The ws library's frame parser: exported by the package, though its type declarations omit it. */
const { Receiver } = ws as unknown as {
  Receiver: new (options: { isServer: boolean }) => EventEmitter & { write(bytes: Buffer): void };
};

/** Decodes frames with the ws library's own client-side parser, as a subscriber's socket would. */
function decode(bytes: Buffer): string[] {
  const messages: string[] = [];
  const receiver = new Receiver({ isServer: false });
  receiver.on('message', (data: Buffer, isBinary: boolean) => {
    expect(isBinary).toBe(false);
    messages.push(data.toString('utf8'));
  });
  receiver.on('error', (error: Error) => {
    throw error;
  });
  receiver.write(bytes);
  return messages;
}

describe(textFrames.name, () => {
  // Each length-field form of RFC 6455 5.2 at its edges, and text that is not ASCII.
  const payloads = [
    '',
    'x'.repeat(125),
    'x'.repeat(126),
    'é'.repeat(0xffff / 2),
    'y'.repeat(0xffff),
    'z'.repeat(0x10000),
    '{"message":"ünïcödé ✓ 🚀"}',
  ];

  it('makes frames a WebSocket client reads back as the same text messages, in order', () => {
    expect(decode(textFrames(payloads).buffer)).toEqual(payloads);
  });

  it('says where each frame starts, so a subscriber can be sent the frames from any line on', () => {
    const { buffer, offsets } = textFrames(payloads);
    expect(offsets).toHaveLength(payloads.length + 1);
    expect(offsets.at(-1)).toBe(buffer.length);
    for (let from = 0; from < payloads.length; from++)
      expect(decode(buffer.subarray(offsets[from]))).toEqual(payloads.slice(from));
  });
});
