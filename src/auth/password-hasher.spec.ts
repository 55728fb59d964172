import argon2 from 'argon2';
import { ARGON2_PARAMETERS, PasswordHasher } from './password-hasher.js';

describe(PasswordHasher.name, () => {
  const hasher = new PasswordHasher();

  it('hashes with argon2id at the OWASP parameters and verifies', async () => {
    const hash = await hasher.hash('a good password');

    expect(hash).toMatch(/^\$argon2id\$v=19\$/);
    expect(hash).toContain(`m=${ARGON2_PARAMETERS.memoryCost}`);
    expect(hash).toContain(`t=${ARGON2_PARAMETERS.timeCost}`);
    await expect(hasher.verify(hash, 'a good password')).resolves.toBe(true);
    await expect(hasher.verify(hash, 'a bad password')).resolves.toBe(false);
  });

  it('answers false for an unknown user after checking a dummy hash', async () => {
    await expect(hasher.verify(undefined, 'anything')).resolves.toBe(false);
  });

  it('answers false for a stored hash it cannot parse', async () => {
    await expect(hasher.verify('plaintext', 'plaintext')).resolves.toBe(false);
  });

  it('asks for a rehash of a hash made with weaker parameters', async () => {
    const weak = await argon2.hash('pw', { type: argon2.argon2id, memoryCost: 4096, timeCost: 1 });

    expect(hasher.needsRehash(weak)).toBe(true);
    expect(hasher.needsRehash(await hasher.hash('pw'))).toBe(false);
  });
});
