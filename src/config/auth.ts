import { EMAIL_PATTERN } from './formats.js';
import type { EnvReader } from './reader.js';

export const MIN_PASSWORD_LENGTH = 12;

/** Access tokens, API tokens' longest life, and how many failed logins a caller may make per window. */
export function readAuth(read: EnvReader) {
  return {
    jwtTtlSeconds: read.integer('KILN_JWT_TTL_SECONDS', 900, 60, 86_400),
    jwtIssuer: read.value('KILN_JWT_ISSUER') ?? 'kiln',
    jwtAudience: read.value('KILN_JWT_AUDIENCE') ?? 'kiln-api',
    loginMaxFailures: read.integer('KILN_LOGIN_MAX_FAILURES', 10, 1, 1000),
    apiTokenMaxDays: read.integer('KILN_API_TOKEN_MAX_DAYS', 365, 1, 3650),
  };
}

/** How long a user's access to a tenant is reused without a query. */
export function readAccessCache(read: EnvReader) {
  return { accessCacheTtlMs: read.integer('KILN_ACCESS_CACHE_TTL_MS', 5000, 0, 600_000) };
}

/**
 * The login window and the first admin. Read apart from readAuth, after the local runner, because
 * that is where ConfigError has always listed their problems.
 */
export function readLogin(read: EnvReader) {
  const loginWindowSeconds = read.integer('KILN_LOGIN_WINDOW_SECONDS', 900, 1, 86_400);
  return { loginWindowSeconds, bootstrapAdmin: readBootstrapAdmin(read) };
}

function readBootstrapAdmin(read: EnvReader): { email: string; password: string } | undefined {
  const email = read.value('KILN_BOOTSTRAP_ADMIN_EMAIL');
  // Untrimmed: blanks around a password are part of it.
  const password = read.env['KILN_BOOTSTRAP_ADMIN_PASSWORD'] ?? '';
  if (email === undefined && password === '') return undefined;
  if (email === undefined || !EMAIL_PATTERN.test(email)) {
    return read.bad(
      'KILN_BOOTSTRAP_ADMIN_EMAIL',
      'an e-mail address (set together with KILN_BOOTSTRAP_ADMIN_PASSWORD)',
    );
  }
  if (password.length < MIN_PASSWORD_LENGTH) {
    return read.bad(
      'KILN_BOOTSTRAP_ADMIN_PASSWORD',
      `a password of at least ${MIN_PASSWORD_LENGTH} characters`,
    );
  }
  return { email: email.toLowerCase(), password };
}
