import { createHash } from 'node:crypto';
import { SEALED_PREFIX, SecretSealer } from './secret-sealer.js';

describe(SecretSealer.name, () => {
  const sealer = new SecretSealer('a key of at least thirty-two bytes, for tests');

  it('seals a value into text that holds none of it, and unseals it back', () => {
    const value = 'npm_AbCdEf0123456789secret';

    const sealed = sealer.seal(value);

    expect(sealed.startsWith(SEALED_PREFIX)).toBe(true);
    expect(sealed).not.toContain(value);
    expect(sealed).not.toContain(Buffer.from(value).toString('base64'));
    expect(sealer.unseal(sealed)).toBe(value);
  });

  it('seals the same value differently each time (a fresh IV)', () => {
    expect(sealer.seal('same value here')).not.toBe(sealer.seal('same value here'));
  });

  it('refuses a value sealed with another key', () => {
    const other = new SecretSealer('another key of at least thirty-two bytes!!');

    expect(() => other.unseal(sealer.seal('a secret value'))).toThrow(/another KILN_SECRETS_KEY/);
  });

  it('refuses a changed ciphertext rather than returning garbage', () => {
    const sealed = sealer.seal('a secret value');
    const [iv, ciphertext, tag] = sealed.slice(SEALED_PREFIX.length).split('.');
    const flipped = Buffer.from(ciphertext!, 'base64url');
    flipped[0] = flipped[0]! ^ 1;

    expect(() =>
      sealer.unseal(`${SEALED_PREFIX}${iv}.${flipped.toString('base64url')}.${tag}`),
    ).toThrow(/cannot be unsealed/);
    expect(() => sealer.unseal(`${SEALED_PREFIX}garbage`)).toThrow(/malformed/);
  });

  it('passes a value that was never sealed through, and never seals twice', () => {
    const sealed = sealer.seal('x'.repeat(20));

    expect(sealer.unseal('plain value')).toBe('plain value');
    expect(sealer.seal(sealed)).toBe(sealed);
    expect(sealer.unsealAll(sealer.sealAll({ a: 'first value', b: 'second value' }))).toEqual({
      a: 'first value',
      b: 'second value',
    });
  });
});

describe('SecretSealer.fingerprint', () => {
  const sealer = new SecretSealer('a key of at least thirty-two bytes, for tests');

  it('gives one value, sealed any number of times or not at all, one fingerprint', () => {
    const value = 'npm_AbCdEf0123456789secret';

    expect(
      new Set([sealer.seal(value), sealer.seal(value), value].map((v) => sealer.fingerprint(v)))
        .size,
    ).toBe(1);
    expect(sealer.fingerprint(value)).not.toBe(sealer.fingerprint(`${value}!`));
  });

  it('is keyed: it is no plain hash of the value, and another key gives another fingerprint', () => {
    const value = 'password';
    const other = new SecretSealer('another key of at least thirty-two bytes!!');

    expect(sealer.fingerprint(value)).not.toBe(createHash('sha256').update(value).digest('hex'));
    expect(sealer.fingerprint(value)).not.toBe(other.fingerprint(value));
    expect(sealer.fingerprint(value)).not.toContain(value);
  });
});
