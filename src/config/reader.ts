import { withoutCredentials } from '../common/url-credentials.js';

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {
  constructor(readonly problems: ReadonlyArray<{ variable: string; expected: string }>) {
    super(
      [
        'kiln: invalid configuration:',
        ...problems.map((p) => `  ${p.variable}: ${p.expected}`),
        'See the configuration reference in docs/configuration.md.',
      ].join('\n'),
    );
    this.name = 'ConfigError';
  }
}

/**
 * One environment's variables, read for every concern's reader, and the problems they found in
 * the order they found them: `check()` throws one ConfigError that lists them all. A blank value
 * counts as unset; a bad one is reported and replaced by the default, so reading goes on.
 */
export class EnvReader {
  private readonly problems: Array<{ variable: string; expected: string }> = [];

  constructor(readonly env: Env) {}

  /**
   * Reports a problem; `got`, when given, is quoted after what was expected, any URL in it without
   * its credentials (the message is printed).
   */
  bad(variable: string, expected: string, got?: string): undefined {
    const shown = got === undefined ? undefined : withoutCredentials(got);
    const left = shown === got ? '' : ' (its credentials left out)';
    this.problems.push({
      variable,
      expected: shown === undefined ? expected : `${expected}, got ${JSON.stringify(shown)}${left}`,
    });
    return undefined;
  }

  /** The value, trimmed; undefined when unset or blank. */
  value(name: string): string | undefined {
    const raw = this.env[name];
    return raw === undefined || raw.trim() === '' ? undefined : raw.trim();
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback: T): T {
    const raw = this.value(name);
    if (raw === undefined) return fallback;
    if ((allowed as readonly string[]).includes(raw)) return raw as T;
    this.bad(name, `one of ${allowed.join('|')}`, raw);
    return fallback;
  }

  /** Decimal digits only (no sign, exponent or separator), from `min` to `max`. */
  integer(name: string, fallback: number, min: number, max: number): number {
    const raw = this.value(name);
    if (raw === undefined) return fallback;
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (Number.isSafeInteger(n) && n >= min && n <= max) return n;
    this.bad(name, `an integer from ${min} to ${max}`, raw);
    return fallback;
  }

  /** An http(s) URL without credentials, its trailing slashes removed. */
  httpUrl(name: string): string | undefined {
    const raw = this.value(name);
    if (raw === undefined) return undefined;
    try {
      const url = new URL(raw);
      const credentials = url.username !== '' || url.password !== '';
      if ((url.protocol === 'http:' || url.protocol === 'https:') && !credentials) {
        return raw.replace(/\/+$/, '');
      }
    } catch {
      // reported below
    }
    return this.bad(name, 'an http(s) URL without credentials', raw);
  }

  /** Comma-separated entries, each trimmed; empty ones dropped. */
  list(name: string): string[] {
    return (this.value(name) ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
  }

  /** Throws the ConfigError listing every problem reported, if there is one. */
  check(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }
}
