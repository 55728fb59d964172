import fc from 'fast-check';
import { LineSplitter, MAX_LINE_BYTES, type SplitLine } from './line-splitter.js';

function splitAll(
  chunks: readonly (Buffer | Uint8Array | string)[],
  maxLineBytes?: number,
): SplitLine[] {
  const splitter = new LineSplitter(maxLineBytes === undefined ? undefined : { maxLineBytes });
  return [...chunks.flatMap((chunk) => splitter.push(chunk)), ...splitter.end()];
}

function whole(...texts: string[]): SplitLine[] {
  return texts.map((text) => ({ text, continued: false }));
}

/** Cuts `bytes` at the given offsets (any order, duplicates allowed). */
function cutAt(bytes: Buffer, offsets: readonly number[]): Buffer[] {
  const cuts = [...new Set(offsets.map((o) => o % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    chunks.push(bytes.subarray(from, cut));
    from = cut;
  }
  return chunks;
}

/** Joins pieces back into logical lines. */
function logicalLines(lines: readonly SplitLine[]): string[] {
  const joined: string[] = [];
  let current = '';
  for (const line of lines) {
    current += line.text;
    if (!line.continued) {
      joined.push(current);
      current = '';
    }
  }
  return joined;
}

/** Reverses the \\xhh escape of invalid bytes. */
function unescapeBytes(text: string): Buffer {
  const parts = text.split(/(\\x[0-9a-f]{2})/);
  return Buffer.concat(
    parts.map((part, i) =>
      i % 2 === 1 ? Buffer.of(parseInt(part.slice(2), 16)) : Buffer.from(part, 'utf8'),
    ),
  );
}

const SAMPLE = Buffer.from(
  'héllo wörld\r\n€100 💸 spent\n\nprogress 10%\rprogress 100%\r\nlast ☃',
  'utf8',
);
const SAMPLE_LINES = whole(
  'héllo wörld',
  '€100 💸 spent',
  '',
  'progress 10%\rprogress 100%',
  'last ☃',
);

/** Text pieces that exercise multi-byte characters, line ends and invalid bytes. */
const fragment = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }).map((s) => Buffer.from(s, 'utf8')),
  fc.constantFrom('\n', '\r', '\r\n', '€', '💸', 'é').map((s) => Buffer.from(s, 'utf8')),
  fc.uint8Array({ minLength: 1, maxLength: 4 }).map((a) => Buffer.from(a)),
);
const byteStream = fc.array(fragment, { maxLength: 30 }).map((parts) => Buffer.concat(parts));

describe(LineSplitter.name, () => {
  it('ends lines at \\n and drops the \\r of \\r\\n', () => {
    expect(splitAll(['one\r\ntwo\nthree\r\n'])).toEqual(whole('one', 'two', 'three'));
  });

  it('keeps a lone \\r as text', () => {
    expect(splitAll(['10%\r50%\r100%\n'])).toEqual(whole('10%\r50%\r100%'));
  });

  it('keeps a \\r that ends the stream', () => {
    expect(splitAll(['done\r'])).toEqual(whole('done\r'));
  });

  it('drops the \\r of a \\r\\n cut between two chunks', () => {
    expect(splitAll(['one\r', '\ntwo\n'])).toEqual(whole('one', 'two'));
  });

  it('preserves empty lines', () => {
    expect(splitAll(['\n\na\n\r\n\n'])).toEqual(whole('', '', 'a', '', ''));
  });

  it('returns only the lines a chunk completes and holds the rest', () => {
    const splitter = new LineSplitter();

    expect(splitter.push('first\nsec')).toEqual(whole('first'));
    expect(splitter.push('ond')).toEqual([]);
    expect(splitter.push('\n')).toEqual(whole('second'));
  });

  it('flushes a final unterminated line on end()', () => {
    const splitter = new LineSplitter();
    splitter.push('no newline at the end');

    expect(splitter.end()).toEqual(whole('no newline at the end'));
  });

  it('flushes nothing on end() after a terminated line', () => {
    const splitter = new LineSplitter();
    splitter.push('done\n');

    expect(splitter.end()).toEqual([]);
  });

  it('accepts Buffer, Uint8Array and string chunks alike', () => {
    const bytes = Buffer.from('a€b\n', 'utf8');
    const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);

    expect(splitAll([view])).toEqual(splitAll([bytes]));
    expect(splitAll(['a€b\n'])).toEqual(whole('a€b'));
  });

  it('gives the same lines for a sample cut into two chunks at every offset', () => {
    for (let offset = 0; offset <= SAMPLE.length; offset++) {
      expect(splitAll(cutAt(SAMPLE, [offset]))).toEqual(SAMPLE_LINES);
    }
  });

  it('gives the same lines for a sample delivered one byte at a time', () => {
    const bytewise = [...SAMPLE].map((byte) => Uint8Array.of(byte));

    expect(splitAll(bytewise)).toEqual(SAMPLE_LINES);
  });

  it('gives the same lines however a byte stream is cut into chunks', () => {
    fc.assert(
      fc.property(
        byteStream,
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.option(fc.integer({ min: 4, max: 24 }), { nil: undefined }),
        (bytes, offsets, maxLineBytes) => {
          expect(splitAll(cutAt(bytes, offsets), maxLineBytes)).toEqual(
            splitAll([bytes], maxLineBytes),
          );
        },
      ),
    );
  });

  it('reproduces well-formed text exactly once the pieces are joined', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string({ unit: 'binary', maxLength: 20 }),
            fc.constantFrom('\n', '\r', '\r\n'),
          ),
        ),
        fc.integer({ min: 4, max: 24 }),
        (parts, maxLineBytes) => {
          const text = parts.join('').replace(/\0/g, '');
          const expected = text
            .split('\n')
            .map((line, i, all) =>
              i < all.length - 1 && line.endsWith('\r') ? line.slice(0, -1) : line,
            );
          if (expected.at(-1) === '') expected.pop();

          const lines = splitAll([text], maxLineBytes);

          expect(logicalLines(lines)).toEqual(expected);
          for (const line of lines) {
            expect(Buffer.byteLength(line.text, 'utf8')).toBeLessThanOrEqual(maxLineBytes);
          }
        },
      ),
    );
  });

  it('splits a 10 MiB line into pieces of at most 64 KiB, all but the last marked continued', () => {
    const total = 10 * 1024 * 1024;
    const splitter = new LineSplitter();
    const chunk = Buffer.alloc(1024 * 1024, 'x');
    const pieces: SplitLine[] = [];
    for (let sent = 0; sent < total; sent += chunk.length) pieces.push(...splitter.push(chunk));
    pieces.push(...splitter.end());

    expect(pieces).toHaveLength(Math.ceil(total / MAX_LINE_BYTES));
    expect(pieces.slice(0, -1).every((p) => p.continued)).toBe(true);
    expect(pieces.at(-1)?.continued).toBe(false);
    expect(pieces.every((p) => Buffer.byteLength(p.text) <= MAX_LINE_BYTES)).toBe(true);
    expect(pieces.reduce((sum, p) => sum + p.text.length, 0)).toBe(total);
  });

  it('hands over each full piece as soon as the line goes on past it', () => {
    const splitter = new LineSplitter();

    expect(splitter.push(Buffer.alloc(MAX_LINE_BYTES, 'x'))).toEqual([]);
    const [piece, ...rest] = splitter.push('y');

    expect(rest).toEqual([]);
    expect(piece).toEqual({ text: 'x'.repeat(MAX_LINE_BYTES), continued: true });
    expect(splitter.end()).toEqual(whole('y'));
  });

  it('keeps a line of exactly maxLineBytes in one piece', () => {
    expect(splitAll(['abcdefgh\n'], 8)).toEqual(whole('abcdefgh'));
  });

  it('does not let the \\r of \\r\\n push a full line into a second piece', () => {
    expect(splitAll(['abcdefgh\r', '\n'], 8)).toEqual(whole('abcdefgh'));
  });

  it('never cuts a multi-byte character when splitting a long line', () => {
    const lines = splitAll(['€€€€€\n'], 7);

    expect(lines).toEqual([
      { text: '€€', continued: true },
      { text: '€€', continued: true },
      { text: '€', continued: false },
    ]);
  });

  it('decodes a multi-byte character delivered one byte per chunk', () => {
    const bytes = [...Buffer.from('💸\n', 'utf8')].map((b) => Uint8Array.of(b));

    expect(splitAll(bytes)).toEqual(whole('💸'));
  });

  it.each([
    ['a byte that cannot start a sequence', [0x61, 0xff, 0x62], 'a\\xffb'],
    ['a lone continuation byte', [0x80, 0x61], '\\x80a'],
    ['an overlong encoding', [0xc0, 0xaf], '\\xc0\\xaf'],
    ['an encoded UTF-16 surrogate', [0xed, 0xa0, 0x80], '\\xed\\xa0\\x80'],
    ['a code point past U+10FFFF', [0xf4, 0x90, 0x80, 0x80], '\\xf4\\x90\\x80\\x80'],
    ['a sequence interrupted by ASCII', [0xe2, 0x82, 0x41], '\\xe2\\x82A'],
    ['NUL (Postgres text cannot store it)', [0x61, 0x00, 0x62], 'a\\x00b'],
  ])('escapes %s as \\xhh instead of replacing it', (_name, bytes, text) => {
    expect(splitAll([Buffer.from([...bytes, 0x0a])])).toEqual(whole(text));
  });

  it('escapes a sequence still incomplete when the stream ends', () => {
    expect(splitAll([Buffer.from('ok ', 'utf8'), Buffer.from([0xf0, 0x9f, 0x92])])).toEqual(
      whole('ok \\xf0\\x9f\\x92'),
    );
  });

  it('counts an escaped byte as four bytes against the cap', () => {
    expect(splitAll([Buffer.from([0xff, 0xfe, 0xfd])], 8)).toEqual([
      { text: '\\xff\\xfe', continued: true },
      { text: '\\xfd', continued: false },
    ]);
  });

  it('never throws on arbitrary bytes and keeps every piece within the cap', () => {
    fc.assert(
      fc.property(byteStream, fc.integer({ min: 4, max: 24 }), (bytes, maxLineBytes) => {
        for (const line of splitAll([bytes], maxLineBytes)) {
          expect(Buffer.byteLength(line.text, 'utf8')).toBeLessThanOrEqual(maxLineBytes);
          expect(line.text).not.toMatch(/[\n\0]/);
        }
      }),
    );
  });

  it('loses no byte: unescaping the joined pieces gives back the input', () => {
    const singleLine = byteStream.map((bytes) =>
      // Backslashes would make literal "\xhh" text ambiguous; line ends are tested elsewhere.
      Buffer.from(bytes.map((b) => (b === 0x5c || b === 0x0a || b === 0x0d ? 0x80 : b))),
    );
    fc.assert(
      fc.property(
        singleLine,
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.integer({ min: 4, max: 24 }),
        (bytes, offsets, maxLineBytes) => {
          const lines = splitAll(cutAt(bytes, offsets), maxLineBytes);

          expect(unescapeBytes(logicalLines(lines).join(''))).toEqual(bytes);
        },
      ),
    );
  });

  it('refuses a byte cap too small to hold any character', () => {
    expect(() => new LineSplitter({ maxLineBytes: 3 })).toThrow(RangeError);
  });
});
