import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A throwaway CA and a server certificate it signed, all PEM. */
export interface TlsMaterial {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/**
 * Makes a self-signed CA and a server certificate for 127.0.0.1 and localhost
 * (subjectAltName IP:127.0.0.1, DNS:localhost), valid for a day, with the `openssl` CLI into a
 * temp dir that is removed afterwards. Node 20 has no X.509 builder, and the double adds no npm
 * dependency for it. EC P-256 keys: fast to make, and accepted by Node, Go (kubectl) and curl.
 * Go wants a real CA (basicConstraints CA:TRUE, keyCertSign) and a SAN, not just a CN.
 */
export function generateTlsMaterial(commonName = 'kiln-double'): TlsMaterial {
  const dir = mkdtempSync(join(tmpdir(), 'kube-double-tls-'));
  const file = (name: string): string => join(dir, name);
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  };
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  try {
    openssl(
      'req',
      '-x509',
      ...ecKey,
      '-keyout',
      file('ca.key'),
      '-out',
      file('ca.crt'),
      '-days',
      '1',
      '-subj',
      `/CN=${commonName}-ca`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    );
    openssl(
      'req',
      '-new',
      ...ecKey,
      '-keyout',
      file('server.key'),
      '-out',
      file('server.csr'),
      '-subj',
      `/CN=${commonName}`,
    );
    writeFileSync(
      file('server.ext'),
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth',
        'subjectAltName=IP:127.0.0.1,DNS:localhost',
        '',
      ].join('\n'),
    );
    openssl(
      'x509',
      '-req',
      '-in',
      file('server.csr'),
      '-CA',
      file('ca.crt'),
      '-CAkey',
      file('ca.key'),
      '-set_serial',
      `0x${Date.now().toString(16)}`,
      '-days',
      '1',
      '-extfile',
      file('server.ext'),
      '-out',
      file('server.crt'),
    );
    return {
      caPem: readFileSync(file('ca.crt'), 'utf8'),
      certPem: readFileSync(file('server.crt'), 'utf8'),
      keyPem: readFileSync(file('server.key'), 'utf8'),
    };
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(
      `could not make the double's TLS certificates with openssl: ${stderr || (error as Error).message}`,
      { cause: error },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
