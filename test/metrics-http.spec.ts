import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { parsePrometheusText, scrape, sumOf } from './support/prometheus-text.js';
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

describe('the Prometheus text parser the metrics tests use', () => {
  it('reads families, escaped labels and special values, and refuses malformed lines', () => {
    const families = parsePrometheusText(
      [
        '# HELP a_total A counter.',
        '# TYPE a_total counter',
        'a_total{path="C:\\\\x",q="say \\"hi\\"\\n"} 3',
        '# TYPE h histogram',
        'h_bucket{le="+Inf"} 2',
        'h_sum 1.5e-3',
        'h_count 2',
        '# TYPE g gauge',
        'g NaN',
      ].join('\n'),
    );
    expect(families.get('a_total')?.samples[0]?.labels).toEqual({ path: 'C:\\x', q: 'say "hi"\n' });
    expect(families.get('a_total')?.help).toBe('A counter.');
    expect(sumOf(families, 'h_count')).toBe(2);
    expect(sumOf(families, 'h_sum')).toBe(0.0015);
    expect(families.get('g')?.samples[0]?.value).toBeNaN();
    expect(() => parsePrometheusText('orphan 1')).toThrow(/without a # TYPE/);
    expect(() => parsePrometheusText('# TYPE x counter\nx{a=b} 1')).toThrow(/not quoted/);
    expect(() => parsePrometheusText('# TYPE x counter\nx one')).toThrow(/bad value/);
  });
});

describe('/metrics on its own port', () => {
  it('serves only /metrics there, and the main port answers none', async () => {
    const port = await freePort();
    const kiln = await startTestApp({ env: { KILN_METRICS_PORT: String(port) } });
    try {
      const families = await scrape(`http://127.0.0.1:${port}/metrics`);
      expect(families.get('kiln_builds_started_total')?.type).toBe('counter');
      expect((await fetch(`http://127.0.0.1:${port}/other`)).status).toBe(404);
      const main = await fetch(`${kiln.baseUrl}/metrics`);
      expect(await main.text()).not.toContain('# TYPE kiln_');
    } finally {
      await kiln.close();
    }
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
