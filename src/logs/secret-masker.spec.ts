import fc from 'fast-check';
import { MASK, MIN_SECRET_LENGTH, SecretMasker } from './secret-masker.js';

const SECRET = 's3cr3t>?>?value~'; // its base64 has '+', '/' and padding

function maskerWith(...secrets: string[]): SecretMasker {
  const masker = new SecretMasker();
  for (const secret of secrets) expect(masker.register(secret)).toEqual({ accepted: true });
  return masker;
}

function base64(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64');
}

/**
 * The base64 characters that encode only `secret`'s bits when it sits at byte offset
 * `offset` (0..2) of a larger blob, computed from the blob itself.
 */
function base64Core(secret: string, offset: number): string {
  const bytes = Buffer.from(secret, 'utf8');
  const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString('base64');
  return encoded.slice(Math.ceil((offset * 8) / 6), Math.floor(((offset + bytes.length) * 8) / 6));
}

describe(SecretMasker.name, () => {
  describe('register', () => {
    it('accepts a secret of at least MIN_SECRET_LENGTH characters and counts it', () => {
      const masker = new SecretMasker();

      expect(masker.register('a'.repeat(MIN_SECRET_LENGTH))).toEqual({ accepted: true });
      expect(masker.size).toBe(1);
    });

    it('refuses a secret shorter than MIN_SECRET_LENGTH characters with a reason and leaves it visible', () => {
      const masker = new SecretMasker();

      const result = masker.register('short12');

      expect(result).toEqual({
        accepted: false,
        reason: expect.stringContaining('shorter than 8'),
      });
      expect(masker.size).toBe(0);
      expect(masker.mask('password short12')).toBe('password short12');
    });

    it('counts characters, not UTF-16 units, when checking the minimum length', () => {
      const masker = new SecretMasker();

      expect(masker.register('🔑🔑🔑🔑').accepted).toBe(false);
      expect(masker.register('🔑🔑🔑🔑🔑🔑🔑🔑').accepted).toBe(true);
    });

    it.each([
      ['\\n', 'first-line\nsecond-line'],
      ['\\r\\n', 'first-line\r\nsecond-line'],
      ['\\r', 'first-line\rsecond-line'],
    ])('refuses a secret containing a line break (%s) with a reason', (_name, secret) => {
      const masker = new SecretMasker();

      expect(masker.register(secret)).toEqual({
        accepted: false,
        reason: expect.stringContaining('line break'),
      });
      expect(masker.size).toBe(0);
    });

    it('refuses a secret with a lone surrogate, whose encodings are undefined', () => {
      expect(new SecretMasker().register('abcdefgh\ud800').accepted).toBe(false);
    });

    it('is idempotent for the same secret', () => {
      const masker = maskerWith(SECRET, SECRET);

      expect(masker.size).toBe(1);
      expect(masker.mask(`x ${SECRET} y`)).toBe(`x ${MASK} y`);
    });

    it('masks a secret registered after earlier lines were masked', () => {
      const masker = maskerWith('first-secret');
      masker.mask('warm up the matcher');

      masker.register('second-secret');

      expect(masker.mask('first-secret second-secret')).toBe(`${MASK} ${MASK}`);
    });
  });

  describe('mask', () => {
    it('returns the line unchanged when no secret is registered', () => {
      expect(new SecretMasker().mask(`token=${SECRET}`)).toBe(`token=${SECRET}`);
    });

    it('masks every raw occurrence and keeps the surrounding text', () => {
      const masker = maskerWith(SECRET);

      expect(masker.mask(`token=${SECRET} and again ${SECRET}.`)).toBe(
        `token=${MASK} and again ${MASK}.`,
      );
    });

    it('leaves text that only resembles the secret alone', () => {
      const masker = maskerWith(SECRET);
      const almost = SECRET.slice(0, -1);

      expect(masker.mask(`token=${almost}`)).toBe(`token=${almost}`);
    });

    it('masks a secret of RegExp metacharacters and non-ASCII, which the first-units filter matches as text', () => {
      const secret = '.*+?^$|\\/()[]{}-é🔑';
      const masker = maskerWith(secret);

      expect(masker.mask(`a ${secret} b`)).toBe(`a ${MASK} b`);
      expect(masker.mask('a .*+?^$|\\ b')).toBe('a .*+?^$|\\ b');
      expect(masker.mask('anything at all')).toBe('anything at all');
    });

    it('masks a secret whose first units appear earlier in the line too', () => {
      const masker = maskerWith(SECRET);
      const start = SECRET.slice(0, 4);

      expect(masker.mask(`${start} ${start}${SECRET}`)).toBe(`${start} ${start}${MASK}`);
    });

    it('masks the standard base64 encoding of the secret, padding included', () => {
      const masker = maskerWith(SECRET);
      const encoded = base64(SECRET);
      expect(encoded).toMatch(/[+/]/);
      expect(encoded).toMatch(/=$/);

      expect(masker.mask(`auth: ${encoded} ok`)).toBe(`auth: ${MASK} ok`);
    });

    it('masks the base64url encoding of the secret', () => {
      const masker = maskerWith(SECRET);
      const encoded = Buffer.from(SECRET).toString('base64url');
      expect(encoded).toMatch(/[-_]/);

      expect(masker.mask(`jwt ${encoded} ok`)).toBe(`jwt ${MASK} ok`);
    });

    it.each([0, 1, 2, 3, 4, 5])(
      'masks the secret inside a larger base64 blob when %i bytes precede it',
      (prefixLength) => {
        const masker = maskerWith(SECRET);
        const blob = base64(`${'u'.repeat(prefixLength)}${SECRET}:trailing-bytes`);
        const core = base64Core(SECRET, prefixLength % 3);
        expect(blob).toContain(core);

        const masked = masker.mask(`Authorization: Basic ${blob}`);

        expect(masked).not.toContain(core);
        expect(masked).toContain(MASK);
        expect(masked.startsWith('Authorization: Basic ')).toBe(true);
      },
    );

    it('masks the secret inside a larger base64url blob', () => {
      const masker = maskerWith(SECRET);
      const blob = Buffer.from(`{"k":"${SECRET}"}`).toString('base64url');
      const core = base64Core(SECRET, '{"k":"'.length % 3)
        .replace(/\+/g, '-')
        .replace(/\//g, '_');
      expect(blob).toContain(core);

      expect(masker.mask(blob)).not.toContain(core);
    });

    it('masks the encodeURIComponent form of the secret', () => {
      const secret = 'p@ss word/with&odd=chars';
      const masker = maskerWith(secret);

      expect(masker.mask(`GET /cb?pw=${encodeURIComponent(secret)}&x=1`)).toBe(
        `GET /cb?pw=${MASK}&x=1`,
      );
    });

    it('masks the URL-encoded form that writes spaces as +', () => {
      const secret = 'p@ss word/with&odd=chars';
      const masker = maskerWith(secret);
      const form = encodeURIComponent(secret).replace(/%20/g, '+');

      expect(masker.mask(`body: pw=${form}&x=1`)).toBe(`body: pw=${MASK}&x=1`);
    });

    it('masks the application/x-www-form-urlencoded form of the secret', () => {
      const secret = "it's (very) secret!";
      const masker = maskerWith(secret);
      const form = new URLSearchParams({ pw: secret }).toString();

      expect(masker.mask(`body: ${form}`)).toBe(`body: pw=${MASK}`);
    });

    it('masks the JSON-escaped form of the secret', () => {
      const secret = 'quote"and\\backslash\ttab';
      const masker = maskerWith(secret);
      const escaped = JSON.stringify(secret).slice(1, -1);
      expect(escaped).not.toBe(secret);

      expect(masker.mask(`{"password":"${escaped}"}`)).toBe(`{"password":"${MASK}"}`);
    });

    it('masks the ASCII-only JSON form of a non-ASCII secret', () => {
      const secret = 'clé-secrète-🔑';
      const masker = maskerWith(secret);

      expect(masker.mask(`{"pw": "cl\\u00e9-secr\\u00e8te-\\ud83d\\udd11"}`)).toBe(
        `{"pw": "${MASK}"}`,
      );
    });

    it("masks the JSON form that writes '/' as '\\/' (PHP's json_encode)", () => {
      const secret = 'https://user:pw@host/path';
      const masker = maskerWith(secret);
      const escaped = phpJsonEscaped(secret);
      expect(escaped).toContain('\\/');

      expect(masker.mask(`{"url":"${escaped}"}`)).toBe(`{"url":"${MASK}"}`);
    });

    it("never lets a secret with '/' through in a JSON form that writes '/' as '\\/'", () => {
      const secretArb = fc
        .string({
          unit: fc.oneof(
            { weight: 5, arbitrary: fc.constantFrom(...printableAscii()) },
            { weight: 2, arbitrary: fc.constant('/') },
            { weight: 1, arbitrary: fc.constantFrom('é', '€', '🔑') },
          ),
          minLength: 8,
          maxLength: 40,
        })
        .filter((s) => s.includes('/') && [...s].length >= MIN_SECRET_LENGTH);
      const surrounding = fc
        .string({ unit: 'grapheme-ascii', maxLength: 30 })
        .map((s) => s.replace(/[\r\n]/g, ' '));

      fc.assert(
        fc.property(
          secretArb,
          surrounding,
          surrounding,
          fc.boolean(),
          (secret, before, after, asciiOnly) => {
            const masker = new SecretMasker();
            expect(masker.register(secret)).toEqual({ accepted: true });
            const form = phpJsonEscaped(secret, asciiOnly);

            const masked = masker.mask(`${before}"${form}"${after}`);

            expect(masked).not.toContain(form);
            expect(masked).toContain(MASK);
          },
        ),
        { numRuns: 300 },
      );
    });

    it('masks the whole of the longer secret when one secret is a prefix of another', () => {
      const masker = maskerWith('abcdefgh', 'abcdefgh-and-more');

      expect(masker.mask('x abcdefgh-and-more y abcdefgh z')).toBe(`x ${MASK} y ${MASK} z`);
    });

    it('masks the longer secret whichever order the prefix secrets were registered in', () => {
      const masker = maskerWith('abcdefgh-and-more', 'abcdefgh');

      expect(masker.mask('x abcdefgh-and-more y')).toBe(`x ${MASK} y`);
    });

    it('masks overlapping secrets as one span without leaking a part of either', () => {
      const masker = maskerWith('alpha-bravo', 'bravo-charlie');

      expect(masker.mask('<alpha-bravo-charlie>')).toBe(`<${MASK}>`);
    });

    it('masks a secret nested inside another registered secret', () => {
      const masker = maskerWith('outer-start-inner-secret-outer-end', 'inner-secret');

      expect(masker.mask('[outer-start-inner-secret-outer-end]')).toBe(`[${MASK}]`);
    });

    it('leaves no secret assembled across a mask', () => {
      // Masking "b-secret-1" in the middle would leave "a-secret***", itself registered.
      const masker = maskerWith('b-secret-1', `a-secret${MASK}`);

      expect(masker.mask('a-secretb-secret-1')).toBe(MASK);
    });

    it('is idempotent', () => {
      fc.assert(
        fc.property(
          fc.array(fc.string({ minLength: MIN_SECRET_LENGTH, maxLength: 20 }), {
            minLength: 1,
            maxLength: 4,
          }),
          fc.array(fc.oneof(fc.string(), fc.constantFrom('abcdefgh', MASK, '*')), {
            maxLength: 12,
          }),
          (secrets, fragments) => {
            const masker = new SecretMasker();
            secrets.forEach((s) => masker.register(s));
            const line = fragments.join('');

            const once = masker.mask(line);

            expect(masker.mask(once)).toBe(once);
          },
        ),
      );
    });

    it('never lets a secret through raw, URL-encoded or in base64 at any offset', () => {
      const textChar = fc.oneof(
        { weight: 4, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 30 }) },
        { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 10 }) },
      );
      const surrounding = textChar.map((s) => s.replace(/[\r\n]/g, ' '));
      const secretArb = fc
        .string({
          unit: fc.oneof(
            { weight: 5, arbitrary: fc.constantFrom(...printableAscii()) },
            { weight: 1, arbitrary: fc.constantFrom('é', 'ß', '€', '中', '🔑', 'ü') },
          ),
          minLength: 8,
          maxLength: 40,
        })
        .filter((s) => [...s].length >= MIN_SECRET_LENGTH);

      fc.assert(
        fc.property(
          secretArb,
          fc.array(surrounding, { minLength: 4, maxLength: 4 }),
          fc.string({ unit: 'grapheme-ascii', maxLength: 5 }),
          fc.string({ maxLength: 5 }),
          (secret, [before, between1, between2, after], blobPrefix, blobSuffix) => {
            const masker = new SecretMasker();
            expect(masker.register(secret)).toEqual({ accepted: true });
            const blob = base64(blobPrefix + secret + blobSuffix);
            const line = `${before}${secret}${between1}${blob}${between2}${encodeURIComponent(secret)}${after}`;

            const masked = masker.mask(line);

            expect(masked).not.toContain(secret);
            expect(masked).not.toContain(encodeURIComponent(secret));
            for (const offset of [0, 1, 2]) {
              const core = base64Core(secret, offset);
              if (core.length >= MIN_SECRET_LENGTH) expect(masked).not.toContain(core);
            }
          },
        ),
        { numRuns: 300 },
      );
    });

    // How fast: bench/logs.bench.mjs `mask` times this line beside a baseline (no test asserts a time).
    it('masks a 64 KiB line against 50 secrets, its long runs sharing prefixes with them', () => {
      const secrets = Array.from({ length: 50 }, (_, i) => `secret-${i}-${'x'.repeat(i)}-tail`);
      const masker = maskerWith(...secrets);
      // Long runs that share prefixes with the secrets are the worst case for a naive alternation.
      const line = `${'secret-1-xxxxxxxx'.repeat(3000)}${secrets[49]}`.padEnd(64 * 1024, 'a');

      const masked = masker.mask(line);

      expect(masked).not.toContain(secrets[49]);
      expect(masked.startsWith('secret-1-xxxxxxxx'.repeat(3000))).toBe(true);
    });
  });
});

/** A JSON string body as PHP's json_encode writes it: '/' as '\\/', non-ASCII as \\uXXXX unless told not to. */
function phpJsonEscaped(secret: string, asciiOnly = true): string {
  const json = JSON.stringify(secret).slice(1, -1).replace(/\//g, '\\/');
  return asciiOnly
    ? json.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
    : json;
}

function printableAscii(): string[] {
  return Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
}
