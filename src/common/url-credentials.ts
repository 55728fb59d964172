/**
 * No URL kiln stores or prints carries credentials
 * (docs/adr/0031-credentials-in-urls-and-masking.md). Credentials are secret references, or a
 * project's git credentials; a URL names a place.
 *
 * What counts as credentials in a URL's userinfo (`scheme://userinfo@host`): a password
 * (`user:password@`) in any scheme, and any userinfo at all except in `ssh://`, where a bare user
 * name (`ssh://git@host/…`) is the login, not a secret. Over https a bare "user" is often a token
 * (`https://<token>@host/…`).
 */

/**
 * `scheme://userinfo@`, the userinfo (RFC 3986's characters) running to the authority's last `@`,
 * as URL parsers read it. A quote ends it, so JSON such as `{"u":"https://h","m":"a@b"}` is no
 * URL with userinfo. The scheme is bounded so that a long line of build output costs linear time
 * whatever it holds.
 */
const USERINFO =
  /\b([a-z][a-z0-9+.-]{0,31}):\/\/([\w.~%!$&'()*+,;=:-]*(?:@[\w.~%!$&'()*+,;=:-]*)*)@/gi;

function isCredential(scheme: string, userinfo: string): boolean {
  return userinfo.includes(':') || scheme.toLowerCase() !== 'ssh';
}

/** True when `url` (or any URL inside a text) carries credentials. */
export function carriesCredentials(text: string): boolean {
  if (!text.includes('://')) return false;
  for (const match of text.matchAll(USERINFO)) {
    if (isCredential(match[1]!, match[2]!)) return true;
  }
  return false;
}

/**
 * `text` with the credentials of every URL in it removed (`https://user:pw@host/x` →
 * `https://host/x`), the rest unchanged: the one way kiln formats a URL into a message, an error
 * or a log line.
 */
export function withoutCredentials(text: string): string {
  if (!text.includes('://')) return text;
  return text.replace(USERINFO, (whole, scheme: string, userinfo: string) =>
    isCredential(scheme, userinfo) ? `${scheme}://` : whole,
  );
}

/** `value` with withoutCredentials applied to every string in it, at any depth. */
export function withoutCredentialsDeep<T>(value: T): T {
  if (typeof value === 'string') return withoutCredentials(value) as T;
  if (Array.isArray(value)) return value.map((item: unknown) => withoutCredentialsDeep(item)) as T;
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, withoutCredentialsDeep(item)]),
    ) as T;
  }
  return value;
}

/**
 * The message for a field whose URL carries credentials, saying where they go instead (`instead`:
 * e.g. "a secret reference in auth.tokenFile" or "kiln project git-credentials").
 */
export function credentialsInUrlProblem(instead: string): string {
  return `must not carry credentials (user:password@ or a token before @): kiln stores URLs in the clear and shows them; give the credentials as ${instead}`;
}
