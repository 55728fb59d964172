import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CredentialAudit } from './support/credential-audit.js';

/** The audit the credential-handling suites rely on finds what it must find (it can fail). */
describe(CredentialAudit.name, () => {
  it.each([
    ['raw', (pw: string) => `password is ${pw}`],
    ['base64', (pw: string) => Buffer.from(pw).toString('base64')],
    [
      'the pair as Basic auth',
      (pw: string) => `Basic ${Buffer.from(`robot:${pw}`).toString('base64')}`,
    ],
    ['URL-encoded', (pw: string) => encodeURIComponent(pw)],
  ])('finds a registered password shown %s', (_form, show) => {
    const audit = new CredentialAudit();
    const password = 'p@ss/w0rd+"quoted"';
    audit.registerPair('robot', password);

    audit.record('a CLI run', show(password));

    expect(audit.leaks()).not.toEqual([]);
  });

  it("reads kiln's responses through the global fetch, and not what other servers answered kiln", async () => {
    const secret = 'hvs.a-token-kiln-must-not-show';
    const server = createServer((_request, response) => response.end(`echo ${secret}`));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const audit = new CredentialAudit();
    audit.register(secret);
    audit.watchFetch();
    try {
      await (await fetch(url)).text();
      await new Promise((done) => setImmediate(done));
      expect(audit.leaks()).toEqual([]);

      audit.kilnOrigin(url);

      expect(audit.leaks()).toEqual([
        expect.objectContaining({ where: `response to ${url}`, form: 'raw' }),
      ]);
    } finally {
      audit.stopWatching();
      server.close();
    }
  });
});
