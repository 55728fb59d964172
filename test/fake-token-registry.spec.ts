import { FakeTokenRegistry, SERVICE } from './support/fake-token-registry.js';

/** Pins the wire the push pre-flight relies on, talking to the fake with plain fetch. */

const basic = (user: string, password: string): string =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

const claimsOf = (token: string): any =>
  JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));

describe(FakeTokenRegistry.name, () => {
  describe('with bearer tokens', () => {
    let registry: FakeTokenRegistry;

    const token = async (scope: string, authorization?: string): Promise<string> => {
      const url = `${registry.realm}?service=${SERVICE}&scope=${encodeURIComponent(scope)}`;
      const response = await fetch(url, {
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(response.status).toBe(200);
      return ((await response.json()) as { token: string }).token;
    };

    const post = (name: string, bearer?: string): Promise<Response> =>
      fetch(`${registry.url}/v2/${name}/blobs/uploads/`, {
        method: 'POST',
        headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` },
      });

    beforeEach(async () => {
      registry = await FakeTokenRegistry.start();
      registry.addUser('dev', 'dev-pass', { 'team/app': ['pull', 'push', 'delete'] });
      registry.addUser('pusher', 'push-pass', { 'team/app': ['pull', 'push'] });
      registry.addUser('reader', 'read-pass', { 'team/ro': ['pull'] });
    });

    afterEach(async () => {
      await registry.stop();
    });

    it('challenges GET /v2/ without a token with the realm and service, and no scope', async () => {
      const response = await fetch(`${registry.url}/v2/`);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer realm="${registry.url}/token",service="${SERVICE}"`,
      );
      expect(response.headers.get('docker-distribution-api-version')).toBe('registry/2.0');
      expect((await response.json()).errors[0].code).toBe('UNAUTHORIZED');
    });

    it('answers GET /v2/ with a valid token', async () => {
      const bearer = await token('repository:team/app:pull', basic('dev', 'dev-pass'));
      const response = await fetch(`${registry.url}/v2/`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({});
    });

    it('issues an HS256 JWT whose access claim is the requested actions the user holds', async () => {
      const response = await fetch(
        `${registry.realm}?service=${SERVICE}&scope=repository:team/app:pull,push`,
        { headers: { authorization: basic('pusher', 'push-pass') } },
      );
      const body = await response.json();
      expect(body).toEqual({
        token: expect.any(String),
        access_token: body.token,
        expires_in: 300,
        issued_at: expect.any(String),
      });
      const header = JSON.parse(Buffer.from(body.token.split('.')[0], 'base64url').toString());
      expect(header).toEqual({ typ: 'JWT', alg: 'HS256', kid: 'fake' });
      expect(claimsOf(body.token)).toMatchObject({
        sub: 'pusher',
        aud: SERVICE,
        access: [{ type: 'repository', name: 'team/app', actions: ['pull', 'push'] }],
      });
    });

    it('grants only the intersection: pull for a pull-only user, nothing to anonymous', async () => {
      const reader = await token('repository:team/ro:pull,push', basic('reader', 'read-pass'));
      expect(claimsOf(reader).access[0].actions).toEqual(['pull']);
      const anonymous = await token('repository:team/app:pull,push');
      expect(claimsOf(anonymous)).toMatchObject({ sub: '', access: [{ actions: [] }] });
    });

    it('refuses a wrong password with 401 and a wrong service with 400', async () => {
      const wrong = await fetch(
        `${registry.realm}?service=${SERVICE}&scope=repository:team/app:push`,
        {
          headers: { authorization: basic('dev', 'nope') },
        },
      );
      expect(wrong.status).toBe(401);
      const service = await fetch(`${registry.realm}?service=other`);
      expect(service.status).toBe(400);
    });

    it('starts an upload with 202, Location, Docker-Upload-UUID and Range 0-0', async () => {
      const bearer = await token('repository:team/app:pull,push', basic('pusher', 'push-pass'));
      const response = await post('team/app', bearer);
      expect(response.status).toBe(202);
      const uuid = response.headers.get('docker-upload-uuid');
      expect(response.headers.get('location')).toBe(`/v2/team/app/blobs/uploads/${uuid}`);
      expect(response.headers.get('range')).toBe('0-0');
      expect(registry.openUploads()).toEqual([{ name: 'team/app', uuid }]);
    });

    it('asks for the delete action to cancel an upload, then cancels it with 204', async () => {
      const push = await token('repository:team/app:pull,push', basic('dev', 'dev-pass'));
      const location = (await post('team/app', push)).headers.get('location')!;
      const refused = await fetch(`${registry.url}${location}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${push}` },
      });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe(
        `Bearer realm="${registry.realm}",service="${SERVICE}",scope="repository:team/app:delete",error="insufficient_scope"`,
      );

      const remove = await token('repository:team/app:delete', basic('dev', 'dev-pass'));
      const cancel = () =>
        fetch(`${registry.url}${location}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${remove}` },
        });
      expect((await cancel()).status).toBe(204);
      expect(registry.openUploads()).toEqual([]);
      const again = await cancel();
      expect(again.status).toBe(404);
      expect((await again.json()).errors[0].code).toBe('BLOB_UPLOAD_UNKNOWN');
    });

    it('answers a push with a pull-only token with the insufficient_scope challenge', async () => {
      const bearer = await token('repository:team/ro:pull,push', basic('reader', 'read-pass'));
      const response = await post('team/ro', bearer);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer realm="${registry.realm}",service="${SERVICE}",scope="repository:team/ro:pull,push",error="insufficient_scope"`,
      );
    });

    it('answers a tampered token with error="invalid_token"', async () => {
      const bearer = await token('repository:team/app:pull,push', basic('dev', 'dev-pass'));
      const [header, , signature] = bearer.split('.');
      const forged = Buffer.from(
        JSON.stringify({
          ...claimsOf(bearer),
          access: [{ type: 'repository', name: 'team/ro', actions: ['push'] }],
        }),
      ).toString('base64url');
      const response = await post('team/ro', `${header}.${forged}.${signature}`);
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/,error="invalid_token"$/);
    });

    it('routes no name outside the OCI grammar, as distribution answers 404', async () => {
      const response = await post('Team/App');
      expect(response.status).toBe(404);
      expect(await response.text()).toBe('404 page not found\n');
    });

    it('records each request with its method, path, query and headers', async () => {
      await token('repository:team/app:pull,push', basic('dev', 'dev-pass'));
      expect(registry.requests).toEqual([
        {
          method: 'GET',
          path: '/token',
          query: new URLSearchParams({ service: SERVICE, scope: 'repository:team/app:pull,push' }),
          headers: expect.objectContaining({ authorization: basic('dev', 'dev-pass') }),
        },
      ]);
    });

    it('fails the next matching requests with the injected status, then serves again', async () => {
      registry.failNext(503, 2, /^GET \/v2\/$/);
      const statuses = [];
      for (let i = 0; i < 3; i += 1) statuses.push((await fetch(`${registry.url}/v2/`)).status);
      expect(statuses).toEqual([503, 503, 401]);
    });

    it('accepts requests and never answers them while hanging', async () => {
      registry.hang = true;
      const abort = new AbortController();
      const pending = fetch(`${registry.url}/v2/`, { signal: abort.signal });
      while (registry.requests.length === 0) await new Promise((done) => setTimeout(done, 10));
      abort.abort();
      await expect(pending).rejects.toThrow(/abort/i);
    });
  });

  it('issues opaque tokens it still honours when asked to', async () => {
    const registry = await FakeTokenRegistry.start({ opaqueTokens: true });
    try {
      registry.addUser('dev', 'dev-pass', { 'team/app': ['pull', 'push'] });
      const response = await fetch(
        `${registry.realm}?service=${SERVICE}&scope=repository:team/app:pull,push`,
        { headers: { authorization: basic('dev', 'dev-pass') } },
      );
      const { token } = await response.json();
      expect(token.split('.')).toHaveLength(1);
      const upload = await fetch(`${registry.url}/v2/team/app/blobs/uploads/`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(upload.status).toBe(202);
    } finally {
      await registry.stop();
    }
  });

  it('in basic mode challenges with Basic, and answers 403 DENIED to a user without push', async () => {
    const registry = await FakeTokenRegistry.start({ basicAuthMode: true });
    try {
      registry.addUser('dev', 'dev-pass', { 'team/app': ['pull', 'push'] });
      const anonymous = await fetch(`${registry.url}/v2/`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('www-authenticate')).toBe(`Basic realm="${SERVICE}"`);
      const ok = await fetch(`${registry.url}/v2/`, {
        headers: { authorization: basic('dev', 'dev-pass') },
      });
      expect(ok.status).toBe(200);
      const denied = await fetch(`${registry.url}/v2/team/other/blobs/uploads/`, {
        method: 'POST',
        headers: { authorization: basic('dev', 'dev-pass') },
      });
      expect(denied.status).toBe(403);
      expect((await denied.json()).errors[0].code).toBe('DENIED');
    } finally {
      await registry.stop();
    }
  });

  it('in Harbor mode grants nothing in a missing project and answers 401 "project not found"', async () => {
    const registry = await FakeTokenRegistry.start({ projects: ['team'] });
    try {
      registry.addUser('dev', 'dev-pass', {
        'other/app': ['pull', 'push'],
        'team/app': ['pull', 'push'],
      });
      const auth = { authorization: basic('dev', 'dev-pass') };
      const scopes = new URLSearchParams({ service: SERVICE });
      scopes.append('scope', 'repository:other/app:pull,push');
      scopes.append('scope', 'repository:team/app:pull,push');
      const { token } = await (
        await fetch(`${registry.realm}?${scopes}`, { headers: auth })
      ).json();
      expect(claimsOf(token).access.map((entry: any) => [entry.name, entry.actions])).toEqual([
        ['other/app', []],
        ['team/app', ['pull', 'push']],
      ]);
      const upload = await fetch(`${registry.url}/v2/other/app/blobs/uploads/`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(upload.status).toBe(401);
      expect(upload.headers.get('www-authenticate')).toBe('');
      expect((await upload.json()).errors[0]).toMatchObject({
        code: 'UNAUTHORIZED',
        message: 'project other not found',
      });
    } finally {
      await registry.stop();
    }
  });
});
