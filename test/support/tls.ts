import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway certificate authority and one server certificate it signed, all PEM. */
export interface TestTls {
  /** The CA's certificate: what a client is told to trust. */
  readonly ca: string;
  /** The server's certificate, for 127.0.0.1, localhost and the names asked for. */
  readonly cert: string;
  readonly key: string;
}

/**
 * A fresh CA and a server certificate for 127.0.0.1, localhost and `dnsNames`, made with the
 * openssl CLI in a temporary directory that is removed before this returns. For fakes that must
 * speak HTTPS (SDKs that refuse plain HTTP); a client trusts `ca` explicitly, never globally.
 */
export function createTestTls(dnsNames: readonly string[] = []): TestTls {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-tls-'));
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  };
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    // prettier-ignore
    openssl(
      'req', '-x509', ...newKey, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2',
      '-subj', '/CN=kiln throwaway test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE',
      '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    );
    // prettier-ignore
    openssl(
      'req', ...newKey, '-keyout', file('server.key'), '-out', file('server.csr'),
      '-subj', '/CN=127.0.0.1',
    );
    const names = ['IP:127.0.0.1', 'DNS:localhost', ...dnsNames.map((name) => `DNS:${name}`)];
    writeFileSync(
      file('server.ext'),
      [
        `subjectAltName=${names.join(',')}`,
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth',
      ].join('\n'),
    );
    // prettier-ignore
    openssl(
      'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'),
      '-set_serial', `0x${Date.now().toString(16)}`, '-days', '2', '-extfile', file('server.ext'),
      '-out', file('server.crt'),
    );
    return {
      ca: readFileSync(file('ca.crt'), 'utf8'),
      cert: readFileSync(file('server.crt'), 'utf8'),
      key: readFileSync(file('server.key'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
