import { createHash, randomBytes } from 'node:crypto';

/**
 * Per-build upload tokens (docs/adr/0019-build-steps-and-artifacts.md): 32 random bytes, minted
 * by the operator for one build's pod and one artifact kind, stored only as a SHA-256 hash. A
 * prefix tells them apart from access tokens in a log or a bug report; they are no JWTs, so no
 * key is shared between the operator and the API and no user token can pass for one.
 */
export const UPLOAD_TOKEN_PREFIX = 'kiln-upload.';

export function newUploadToken(): string {
  return `${UPLOAD_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function hashUploadToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** The token of an `Authorization: Bearer …` header, or undefined when there is none. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
