export const MAX_LINE_BYTES = 64 * 1024;

/** `continued`: this piece was cut at the byte cap and the line goes on in the next piece. */
export interface SplitLine {
  text: string;
  continued: boolean;
}

const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;
/** `\xhh` is four ASCII bytes. */
const ESCAPE_BYTES = 4;
/** The largest unit (an escaped byte or a 4-byte sequence) must fit in a piece. */
const MIN_MAX_LINE_BYTES = 4;
const EMPTY = Buffer.alloc(0);

/**
 * Turns a byte stream (chunks cut anywhere, even inside a UTF-8 sequence or inside "\r\n") into
 * complete lines.
 *
 * Promises: lines end at "\n"; a "\r" right before it is dropped, a lone "\r" is kept. No piece is
 * longer than `maxLineBytes` UTF-8 bytes and none cuts a character; a longer line comes out as
 * pieces, all but the last with `continued: true`, each emitted as soon as the next one starts, so
 * at most one piece is held in memory. Output never depends on where the chunks were cut.
 *
 * Bytes that are not part of a well-formed UTF-8 sequence (WHATWG rules: no overlongs, surrogates
 * or code points past U+10FFFF; a sequence still open at `end()`) are never replaced or dropped:
 * each comes out as the four characters `\x` + two lowercase hex digits, e.g. 0xFF -> "\xff", so
 * it stays visible and the bytes can be recovered. NUL (0x00) is escaped the same way because
 * Postgres text columns cannot hold it. A literal "\xff" already in the output reads the same;
 * kiln accepts that ambiguity rather than escaping every backslash in ordinary logs.
 */
export class LineSplitter {
  private readonly maxLineBytes: number;
  /** The current piece: decoded text parts and their UTF-8 size. */
  private parts: string[] = [];
  private pieceBytes = 0;
  /** A "\r" seen last: dropped if "\n" follows, text otherwise. */
  private pendingCR = false;
  /** The start of a UTF-8 sequence cut by the chunk boundary (at most 3 bytes). */
  private carry: Buffer = EMPTY;

  constructor(options?: { maxLineBytes?: number }) {
    const max = options?.maxLineBytes ?? MAX_LINE_BYTES;
    if (!Number.isInteger(max) || max < MIN_MAX_LINE_BYTES) {
      throw new RangeError(
        `maxLineBytes must be an integer of at least ${MIN_MAX_LINE_BYTES}, got ${max}`,
      );
    }
    this.maxLineBytes = max;
  }

  /** Returns the lines (and full pieces of long lines) completed by this chunk. */
  push(chunk: Buffer | Uint8Array | string): SplitLine[] {
    let bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (this.carry.length > 0) {
      bytes = Buffer.concat([this.carry, bytes]);
      this.carry = EMPTY;
    }
    const out: SplitLine[] = [];
    this.consume(bytes, false, out);
    return out;
  }

  /** Flushes a final unterminated line, if non-empty. */
  end(): SplitLine[] {
    const out: SplitLine[] = [];
    const carry = this.carry;
    this.carry = EMPTY;
    this.consume(carry, true, out);
    if (this.pendingCR) {
      this.pendingCR = false;
      this.add('\r', 1, out);
    }
    if (this.pieceBytes > 0) out.push({ text: this.takePiece(), continued: false });
    return out;
  }

  private consume(bytes: Buffer, final: boolean, out: SplitLine[]): void {
    const max = this.maxLineBytes;
    let runStart = 0;
    // A run of well-formed bytes is decoded in one toString call when something interrupts it.
    const flushRun = (end: number): void => {
      if (end > runStart) {
        this.parts.push(bytes.toString('utf8', runStart, end));
        this.pieceBytes += end - runStart;
      }
      runStart = end;
    };

    let i = 0;
    while (i < bytes.length) {
      const b = bytes[i] ?? 0;
      if (b === LF) {
        flushRun(i);
        this.pendingCR = false;
        out.push({ text: this.takePiece(), continued: false });
        runStart = ++i;
        continue;
      }
      if (this.pendingCR) {
        // Always at the start of a run: the "\r" ended the previous one.
        this.pendingCR = false;
        this.add('\r', 1, out);
      }
      if (b === CR) {
        flushRun(i);
        this.pendingCR = true;
        runStart = ++i;
        continue;
      }
      const length = b === NUL ? 0 : b < 0x80 ? 1 : sequenceLength(bytes, i, final);
      if (length < 0) {
        flushRun(i);
        this.carry = Buffer.from(bytes.subarray(i));
        return;
      }
      const unitBytes = length === 0 ? ESCAPE_BYTES : length;
      if (this.pieceBytes + (i - runStart) + unitBytes > max) {
        flushRun(i);
        out.push({ text: this.takePiece(), continued: true });
      }
      if (length === 0) {
        flushRun(i);
        this.parts.push(`\\x${b.toString(16).padStart(2, '0')}`);
        this.pieceBytes += ESCAPE_BYTES;
        runStart = ++i;
      } else {
        i += length;
      }
    }
    flushRun(i);
  }

  private add(text: string, bytes: number, out: SplitLine[]): void {
    if (this.pieceBytes + bytes > this.maxLineBytes) {
      out.push({ text: this.takePiece(), continued: true });
    }
    this.parts.push(text);
    this.pieceBytes += bytes;
  }

  private takePiece(): string {
    const text = this.parts.join('');
    this.parts = [];
    this.pieceBytes = 0;
    return text;
  }
}

/**
 * Length of the well-formed UTF-8 sequence starting with the non-ASCII byte at `i`: 2..4, 0 if
 * the byte cannot start one, -1 if it may still be completed by the next chunk.
 */
function sequenceLength(bytes: Buffer, i: number, final: boolean): number {
  const lead = bytes[i] ?? 0;
  let trailing: number;
  let low = 0x80;
  let high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    trailing = 1;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    trailing = 2;
    if (lead === 0xe0) low = 0xa0; // overlong
    if (lead === 0xed) high = 0x9f; // UTF-16 surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    trailing = 3;
    if (lead === 0xf0) low = 0x90; // overlong
    if (lead === 0xf4) high = 0x8f; // past U+10FFFF
  } else {
    return 0;
  }
  for (let k = 1; k <= trailing; k++) {
    const next = bytes[i + k];
    if (next === undefined) return final ? 0 : -1;
    if (next < low || next > high) return 0;
    low = 0x80;
    high = 0xbf;
  }
  return trailing + 1;
}
