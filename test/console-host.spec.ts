import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CONSOLE_CSP, CONSOLE_DIR } from '../src/console-host/serve-console.js';
import { type TestApp, startTestApp } from './support/test-app.js';

/**
 * The api role serves the built console (dist/console/, from `make build`) at `/`: the page for
 * every browser navigation outside the API, under a strict Content-Security-Policy, without
 * shadowing a single API route or probe.
 */
describe('the console host', () => {
  let kiln: TestApp;

  beforeAll(async () => {
    if (!existsSync(join(CONSOLE_DIR, 'index.html'))) {
      throw new Error(`${CONSOLE_DIR} has no index.html: run \`make build\` first`);
    }
    kiln = await startTestApp();
  });

  afterAll(async () => {
    await kiln.close();
  });

  const get = (path: string, accept = 'text/html,application/xhtml+xml') =>
    fetch(`${kiln.baseUrl}${path}`, { headers: { accept } });

  it('serves the page at / and at any page a browser opens, under the strict CSP', async () => {
    for (const path of ['/', '/builds/0b9f0c66-3c3a-4f3c-9d8e-0f6e2d1c5a7b', '/builds/new']) {
      const response = await get(path);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/html/);
      expect(response.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
      expect(response.headers.get('x-frame-options')).toBe('DENY');
      expect(await response.text()).toContain('<div id="app"></div>');
    }
    expect(CONSOLE_CSP).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });

  it('ships no inline script or style, which the CSP would block', () => {
    const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attributes, body] of scripts) {
      expect(attributes).toMatch(/\bsrc="\/assets\//);
      expect(body!.trim()).toBe('');
    }
    expect(html).not.toMatch(/<style\b|\sstyle="|\son[a-z]+="/i);
  });

  it('caches hashed assets for a year and answers a missing one with 404, not the page', async () => {
    const [asset] = readdirSync(join(CONSOLE_DIR, 'assets')).filter((f) => f.endsWith('.js'));
    const found = await get(`/assets/${asset}`, '*/*');
    expect(found.status).toBe(200);
    expect(found.headers.get('content-type')).toMatch(/javascript/);
    expect(found.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(found.headers.get('content-security-policy')).toBe(CONSOLE_CSP);

    expect((await get('/assets/missing-0000.js')).status).toBe(404);
  });

  it('answers a missing asset with the console’s security headers and a body that does not echo the path', async () => {
    for (const accept of ['*/*', 'text/html', 'application/json']) {
      const missing = await get('/assets/%3Cscript%3Ealert(1)%3C%2Fscript%3E.js', accept);

      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(missing.headers.get('x-content-type-options')).toBe('nosniff');
      expect(missing.headers.get('x-frame-options')).toBe('DENY');
      const body = await missing.text();
      expect(JSON.parse(body)).toMatchObject({ code: 'NOT_FOUND', error: 'No such console asset' });
      expect(body).not.toMatch(/script|alert|assets/i);
    }
  });

  it('leaves the API, its documents and the probes as they were', async () => {
    const unknown = await get('/api/v1/no-such-route');
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await unknown.json()).toMatchObject({ code: 'NOT_FOUND' });

    const health = await get('/healthz', '*/*');
    expect(health.status).toBe(200);
    expect(health.headers.get('content-type')).toMatch(/^application\/json/);

    const openapi = await get('/api/v1/openapi.json', '*/*');
    expect(openapi.status).toBe(200);
    expect(((await openapi.json()) as { openapi: string }).openapi).toMatch(/^3\./);
  });

  it('answers only GET and HEAD, and only browsers asking for a page', async () => {
    const post = await fetch(`${kiln.baseUrl}/builds/new`, { method: 'POST' });
    expect(post.status).toBe(404);
    expect(await post.json()).toMatchObject({ code: 'NOT_FOUND' });

    const json = await get('/builds/new', 'application/json');
    expect(json.status).toBe(404);

    const head = await fetch(`${kiln.baseUrl}/`, {
      method: 'HEAD',
      headers: { accept: 'text/html' },
    });
    expect(head.status).toBe(200);
  });
});
