import type { RegistryType } from '../manifest/types.js';

/**
 * The port behind which each registry type sits (docs/adr/0022-registries.md). Harbor, Quay and
 * Artifactory are OCI registries that differ in how a repository path is named and checked
 * before a Job starts; S3 is not a registry: the image is written as an OCI layout tarball and
 * uploaded through the S3 API.
 */
export type OciRegistryType = Exclude<RegistryType, 's3'>;

/** Credentials for one registry, resolved at start; never stored, never logged. */
export interface RegistryCredentials {
  readonly username: string;
  readonly password: string;
}

/** A repository on a registry: `host[:port]` and the path, no tag or digest. */
export interface RepositoryAddress {
  readonly host: string;
  readonly path: string;
}

export interface PreflightOptions {
  /** Plain HTTP instead of HTTPS (a local registry in tests, a registry on the node). */
  readonly insecure?: boolean;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

/** Pre-flight checks of OCI registries (the Docker Registry v2 token flow). */
export interface RegistryPreflight {
  /**
   * Resolves when `credentials` may push to `repository`: `GET /v2/`, the `WWW-Authenticate`
   * challenge, a token for `repository:<path>:pull,push` (its `access` claim must grant push),
   * then an upload started (`POST /v2/<path>/blobs/uploads/`) and cancelled at once. Throws
   * RegistryUnauthorizedError when the registry refuses the credentials or the scope,
   * RegistryUnavailableError when it cannot be asked. The path must already satisfy the
   * registry's naming rules (naming.ts).
   */
  checkPush(
    repository: RepositoryAddress,
    credentials: RegistryCredentials | undefined,
    options?: PreflightOptions,
  ): Promise<void>;
}

/** The registry refused the credentials, or they may not push to the repository. */
export class RegistryUnauthorizedError extends Error {
  constructor(
    readonly repository: string,
    detail: string,
  ) {
    super(`${repository}: ${detail}`);
    this.name = 'RegistryUnauthorizedError';
  }
}

/** The registry could not be asked, or did not answer in time. */
export class RegistryUnavailableError extends Error {
  constructor(
    readonly repository: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`${repository}: ${detail}`, options);
    this.name = 'RegistryUnavailableError';
  }
}
