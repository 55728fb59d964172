/**
 * How kiln reads what a registry (or its token service) answered, shared by the push pre-flight
 * (oci-preflight.ts) and the referrers client (oci-session.ts): never a secret in what it says.
 */

/** How much of a registry's own error message a kiln message quotes. */
const MAX_REGISTRY_MESSAGE = 200;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `text` with every secret blanked, in case a registry echoes what it was sent. Longest first, so
 * a `user:password` pair is blanked whole before the password inside it.
 */
export function scrubSecrets(text: string, secrets: Iterable<string>): string {
  return [...secrets]
    .sort((a, b) => b.length - a.length)
    .reduce((scrubbed, secret) => scrubbed.split(secret).join('***'), text);
}

/**
 * `; the registry said: CODE: message` from an OCI error body (its first error), secrets blanked
 * and cut to a bounded length; empty when the body says nothing readable.
 */
export function registrySays(body: string, secrets: Iterable<string>): string {
  let said: string | undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    const first =
      isRecord(parsed) && Array.isArray(parsed.errors) ? (parsed.errors[0] as unknown) : undefined;
    if (isRecord(first)) {
      said = [first.code, first.message].filter((part) => typeof part === 'string').join(': ');
    }
  } catch {
    return '';
  }
  if (said === undefined || said === '') return '';
  return `; the registry said: ${scrubSecrets(said, secrets).slice(0, MAX_REGISTRY_MESSAGE)}`;
}

/**
 * A token service's answer: `token`, or `access_token` for OAuth 2.0 compatibility, and
 * `expires_in` (https://distribution.github.io/distribution/spec/auth/token/).
 */
export function tokenAnswer(body: string): { token: string; expiresIn?: number } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!isRecord(parsed)) return undefined;
  const token = parsed.token ?? parsed.access_token;
  if (typeof token !== 'string' || token === '') return undefined;
  const expiresIn = parsed.expires_in;
  return typeof expiresIn === 'number' && expiresIn > 0 ? { token, expiresIn } : { token };
}

/**
 * The system error code of a failed fetch (ECONNREFUSED, ENOTFOUND, ...), or its message. Duck
 * typed: the error may come from another realm (a test runner's sandbox), where instanceof fails.
 */
export function networkFailure(error: unknown): string {
  const cause = isRecord(error) ? error.cause : undefined;
  if (isRecord(cause) && typeof cause.code === 'string') {
    return `could not be reached (${cause.code})`;
  }
  const message =
    isRecord(error) && typeof error.message === 'string' ? error.message : String(error);
  return `could not be reached (${message})`;
}
