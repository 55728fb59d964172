import { Injectable } from '@nestjs/common';
import argon2 from 'argon2';
import { randomBytes } from 'node:crypto';
import { InvalidRequestError } from '../common/errors.js';
import { MIN_PASSWORD_LENGTH } from '../config/config.js';

/** OWASP Password Storage Cheat Sheet, argon2id: m = 19 MiB, t = 2, p = 1. */
export const ARGON2_PARAMETERS = {
  type: argon2.argon2id,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
} as const;

export const MAX_PASSWORD_LENGTH = 1024;

/** 400 unless a new password has an allowed length; `field` names it in the details. */
export function checkNewPassword(password: string, field = 'password'): void {
  if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH) {
    throw new InvalidRequestError(
      `Password must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`,
      { [field]: `length ${MIN_PASSWORD_LENGTH}-${MAX_PASSWORD_LENGTH}` },
    );
  }
}

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
