import { Injectable } from '@nestjs/common';
import argon2 from 'argon2';
import { randomBytes } from 'node:crypto';

/** OWASP Password Storage Cheat Sheet, argon2id: m = 19 MiB, t = 2, p = 1. */
export const ARGON2_PARAMETERS = {
  type: argon2.argon2id,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
} as const;

export const MAX_PASSWORD_LENGTH = 1024;

@Injectable()
export class PasswordHasher {
  private dummyHash: Promise<string> | undefined;

  hash(password: string): Promise<string> {
    return argon2.hash(password, ARGON2_PARAMETERS);
  }

  /**
   * Checks a password against a stored hash; with no hash (unknown user) it checks against a
   * dummy hash of the same cost, so both answers take about the same time.
   */
  async verify(hash: string | undefined, password: string): Promise<boolean> {
    this.dummyHash ??= this.hash(randomBytes(32).toString('base64url'));
    const target = hash ?? (await this.dummyHash);
    try {
      const ok = await argon2.verify(target, password);
      return ok && hash !== undefined;
    } catch {
      return false;
    }
  }

  /** True when the hash was made with other parameters than today's (rehash on login). */
  needsRehash(hash: string): boolean {
    try {
      return argon2.needsRehash(hash, ARGON2_PARAMETERS);
    } catch {
      return true;
    }
  }
}
