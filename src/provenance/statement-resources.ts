/*
 * The names a statement gives things: images as Package URLs, git repositories as SLSA writes
 * them, digests as in-toto DigestSets.
 */

/** An image a build ran, pinned by digest where known (`imageDependency` makes one). */
export interface ImageDependency {
  readonly name: string;
  readonly uri: string;
  /** `sha256:…`. */
  readonly digest?: string;
}

/**
 * An image as a dependency: its Package URL (`pkg:docker/<path>@<tag>`, the registry in
 * `repository_url` unless Docker Hub), and its digest when the reference pins one.
 */
export function imageDependency(name: string, reference: string): ImageDependency {
  const { name: image, digest } = splitDigest(reference);
  const slash = image.indexOf('/');
  const first = slash < 0 ? '' : image.slice(0, slash);
  const registry =
    first !== '' && (/[.:]/.test(first) || first === 'localhost') ? first.toLowerCase() : null;
  const path = registry === null ? image : image.slice(slash + 1);
  const colon = path.lastIndexOf(':');
  const tagged = colon > path.lastIndexOf('/');
  const repository = tagged ? path.slice(0, colon) : path;
  const version = tagged ? path.slice(colon + 1) : digest;
  const uri =
    `pkg:docker/${repository.split('/').map(encodeURIComponent).join('/')}` +
    (version === undefined ? '' : `@${encodeURIComponent(version)}`) +
    (registry === null || registry === 'docker.io'
      ? ''
      : `?repository_url=${encodeURIComponent(registry)}`);
  return { name, uri, ...(digest === undefined ? {} : { digest }) };
}

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/** `name[:tag]@sha256:…` → the name and the digest; a reference without one has none. */
export function splitDigest(reference: string): { name: string; digest?: string } {
  const at = reference.lastIndexOf('@');
  const digest = reference.slice(at + 1);
  return at > 0 && DIGEST.test(digest)
    ? { name: reference.slice(0, at), digest }
    : { name: reference };
}

/** `sha256:<hex>` (or the bare hex) as an in-toto DigestSet. */
export function digestSet(digest: string): Record<string, string> {
  const hex = digest.startsWith('sha256:') ? digest.slice('sha256:'.length) : digest;
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new TypeError(`"${digest}" is not a sha256 digest`);
  return { sha256: hex };
}

/**
 * A repository URL as SLSA writes a git dependency (`git+https://…`, `git+ssh://…`), scheme and
 * host in lowercase as in-toto's ResourceURI asks. scp-like `git@host:path` becomes ssh.
 */
export function gitUrl(repository: string): string {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(repository);
  if (scheme === null) {
    const scp = /^(?:([^@/:]+)@)?([^/:]+):(.+)$/.exec(repository);
    if (scp !== null) {
      const [, user, host, path] = scp;
      return `git+ssh://${user === undefined ? '' : `${user}@`}${host!.toLowerCase()}/${path!.replace(/^\/+/, '')}`;
    }
    return repository.startsWith('/') ? `git+file://${repository}` : `git+${repository}`;
  }
  const url = normalisedUri(repository);
  return /^git(\+|:)/.test(url) ? url : `git+${url}`;
}

/** Scheme and authority in lowercase, the rest as given (RFC 3986 6.2.2.1). */
export function normalisedUri(uri: string): string {
  return uri.replace(
    /^([A-Za-z][A-Za-z0-9+.-]*:)(\/\/[^/?#]*)?/,
    (_whole, scheme: string, authority: string | undefined) =>
      `${scheme.toLowerCase()}${(authority ?? '').toLowerCase()}`,
  );
}
