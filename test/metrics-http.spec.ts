import { type TestApp, startTestApp } from './support/test-app.js';

describe('/metrics on the main port', () => {
  let kiln: TestApp;
  beforeAll(async () => {
    kiln = await startTestApp();
  });
  afterAll(() => kiln.close());

  it('counts requests by route template, never by path', async () => {
    await fetch(`${kiln.baseUrl}/api/v1/builds/00000000-0000-4000-8000-000000000001`);
    await fetch(`${kiln.baseUrl}/no/such/path/123`);
    const res = await fetch(`${kiln.baseUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toContain('process_resident_memory_bytes');
    expect(text).not.toContain('00000000-0000-4000-8000-000000000001');
  });
});
