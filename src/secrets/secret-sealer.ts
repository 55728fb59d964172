import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

/** The text a sealed value is stored as: `kiln-sealed:v1:<iv>.<ciphertext>.<tag>` (base64url). */
export const SEALED_PREFIX = 'kiln-sealed:v1:';
const AAD = Buffer.from('kiln buildx secret');

/**
 * Seals the values of build secrets (buildx `secrets`) before they are stored, so Postgres, its
 * backups and anyone who reads the builds table never see them (docs/adr/0020-sealed-build-secrets.md).
 * AES-256-GCM with a key derived from KILN_SECRETS_KEY: authenticated, so a changed ciphertext
 * is refused rather than decrypted into garbage. The API seals at create; the runner that runs the
 * build (the operator, the local runner) unseals right before the values reach the build.
 */
export class SecretSealer {
  private readonly key: Buffer;
  private readonly fingerprintKey: Buffer;

  constructor(secret: string) {
    this.key = createHash('sha256').update('kiln-secrets-key\0').update(secret).digest();
    this.fingerprintKey = createHash('sha256')
      .update('kiln-secrets-fingerprint\0')
      .update(secret)
      .digest();
  }

  /**
   * A keyed digest of a value, sealed or not (HMAC-SHA256 of the plain value): equal values give
   * equal fingerprints, and a fingerprint tells nothing about its value to whoever lacks the key,
   * however guessable the value. Sealing itself is randomised, so two seals of one value differ.
   */
  fingerprint(text: string): string {
    return createHmac('sha256', this.fingerprintKey).update(this.unseal(text)).digest('hex');
  }

  seal(value: string): string {
    if (value.startsWith(SEALED_PREFIX)) return value;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(AAD);
    const ciphertext = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    const parts = [iv, ciphertext, cipher.getAuthTag()].map((part) => part.toString('base64url'));
    return `${SEALED_PREFIX}${parts.join('.')}`;
  }

  /**
   * The value of a sealed text. A text without the prefix is returned as it is: a build created
   * before sealing, or a Build resource's own value. Throws when the text was sealed with another
   * key or changed.
   */
  unseal(text: string): string {
    if (!text.startsWith(SEALED_PREFIX)) return text;
    const [iv, ciphertext, tag] = text
      .slice(SEALED_PREFIX.length)
      .split('.')
      .map((part) => Buffer.from(part, 'base64url'));
    if (iv === undefined || ciphertext === undefined || tag === undefined || iv.length !== 12) {
      throw new Error('a sealed build secret is malformed');
    }
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAAD(AAD);
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(
        'a build secret cannot be unsealed: it was sealed with another KILN_SECRETS_KEY, or changed',
      );
    }
  }

  /** Every value of a map sealed (keys as they are). */
  sealAll(values: Readonly<Record<string, string>>): Record<string, string> {
    return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, this.seal(v)]));
  }

  unsealAll(values: Readonly<Record<string, string>>): Record<string, string> {
    return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, this.unseal(v)]));
  }
}
