import type { SecretReference } from '../manifest/secret-reference.js';
import type { SecretManagerType } from '../manifest/types.js';

/**
 * The port behind which each secret manager sits (docs/adr/0021-secret-references.md). One
 * adapter per `secret_manager_type`, each built from a tenant's settings with the vendor's SDK
 * (Vault: its HTTP API). An adapter resolves one parsed reference to its value; it never logs a
 * value, and its errors never carry one.
 */
export interface SecretManager {
  readonly type: SecretManagerType;
  /**
   * The value `reference` names. Throws SecretNotFoundError when the manager answered that the
   * secret, its version or its key does not exist or may not be read, and
   * SecretManagerUnavailableError when the manager could not be asked (unreachable, timed out,
   * 5xx after the bounded retries, its own credentials refused). `signal` aborts the call.
   */
  resolve(reference: SecretReference, signal?: AbortSignal): Promise<string>;
}

/** How long one call to a manager may take, and how often a transient failure is retried. */
export interface ResolveLimits {
  /** Per attempt. */
  readonly timeoutMs: number;
  /** Attempts in all (1: no retry), for network errors, timeouts, 429 and 5xx only. */
  readonly attempts: number;
}

export const DEFAULT_RESOLVE_LIMITS: ResolveLimits = { timeoutMs: 5_000, attempts: 3 };

/** The manager answered: the reference names nothing this tenant's credentials can read. */
export class SecretNotFoundError extends Error {
  constructor(
    readonly reference: string,
    detail: string,
  ) {
    super(`${reference}: ${detail}`);
    this.name = 'SecretNotFoundError';
  }
}

/** The manager could not be asked, or did not answer in time. */
export class SecretManagerUnavailableError extends Error {
  constructor(
    readonly manager: SecretManagerType,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${manager}: ${detail}`, options);
    this.name = 'SecretManagerUnavailableError';
  }
}
