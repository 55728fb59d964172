/** The parsed JSON body of a response, typed loosely for assertions. */
export async function jsonOf(response: Response): Promise<any> {
  return response.json();
}

/** A status and its parsed JSON body (undefined when empty). */
export interface ApiReply {
  readonly status: number;
  readonly body: any;
}

/**
 * `method /api/v1<path>` on `baseUrl` with a bearer token, X-Tenant-ID when `tenant` is given and
 * a JSON body when `body` is: what the admin, settings and token suites send.
 */
export async function callApi(
  baseUrl: string,
  bearer: string,
  method: string,
  path: string,
  { tenant, body }: { tenant?: string; body?: unknown } = {},
): Promise<ApiReply> {
  const response = await fetch(`${baseUrl}/api/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${bearer}`,
      ...(tenant === undefined ? {} : { 'x-tenant-id': tenant }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}
