import { createHash, createPrivateKey, generateKeyPairSync } from 'node:crypto';
import {
  assertBundleLatest,
  BUNDLE_V03_MEDIA_TYPE,
  bundleFromJSON,
  isBundleWithDsseEnvelope,
  isBundleWithPublicKey,
} from '@sigstore/bundle';
import { dsse } from '@sigstore/core';
import { VerificationError } from '@sigstore/verify';
import {
  BundleContentError,
  envelopeStatement,
  generateSigningKey,
  IN_TOTO_PAYLOAD_TYPE,
  keyIdOf,
  pae,
  type SignedBundle,
  SIGSTORE_BUNDLE_V03,
  signingKeyOf,
  SigningKeyError,
  signStatement,
  verifyBundleWithKey,
} from './signing.js';

const statement = {
  _type: 'https://in-toto.io/Statement/v1',
  subject: [
    {
      name: 'registry.example.com/team/app',
      digest: { sha256: 'a'.repeat(64) },
    },
  ],
  predicateType: 'https://slsa.dev/provenance/v1',
  predicate: {
    buildDefinition: {
      buildType: 'https://kiln.dev/buildtypes/kaniko/v1',
      externalParameters: { context: 'git+https://git.example.com/app.git', note: 'Zoë’s café ☕' },
    },
    runDetails: { builder: { id: 'https://kiln.example.com/builders/kaniko' } },
  },
};

/** The bundle as it travels: written as JSON text and read back. */
function asJson(bundle: SignedBundle): Record<string, unknown> {
  return JSON.parse(JSON.stringify(bundle)) as Record<string, unknown>;
}

/** A copy of the bundle with its envelope's fields replaced. */
function withEnvelope(
  bundle: SignedBundle,
  change: Partial<SignedBundle['dsseEnvelope']>,
): SignedBundle {
  return { ...bundle, dsseEnvelope: { ...bundle.dsseEnvelope, ...change } };
}

/** What verifying threw; fails the test when it did not throw. */
function failureOf(verify: () => unknown): Error {
  try {
    verify();
  } catch (error) {
    return error as Error;
  }
  throw new Error('the bundle verified');
}

function pemBody(pem: string): string[] {
  return pem.split('\n').filter((line) => line !== '' && !line.startsWith('-----'));
}

describe('signing', () => {
  const generated = generateSigningKey();
  const key = signingKeyOf(generated.privateKeyPem);
  const other = generateSigningKey();

  describe(signStatement.name, () => {
    it('makes a bundle @sigstore/verify accepts with the public key, returning the statement', () => {
      const bundle = signStatement(statement, key);

      expect(verifyBundleWithKey(asJson(bundle), generated.publicKeyPem)).toEqual(statement);
    });

    it('makes a Sigstore v0.3 bundle with a public-key hint, a DSSE envelope and no log entry', () => {
      const bundle = signStatement(statement, key);
      const parsed = bundleFromJSON(asJson(bundle));

      expect(() => assertBundleLatest(parsed)).not.toThrow();
      expect(SIGSTORE_BUNDLE_V03).toBe(BUNDLE_V03_MEDIA_TYPE);
      expect(parsed.mediaType).toBe(BUNDLE_V03_MEDIA_TYPE);
      expect(isBundleWithPublicKey(parsed)).toBe(true);
      expect(isBundleWithDsseEnvelope(parsed)).toBe(true);
      expect(parsed.verificationMaterial.tlogEntries).toEqual([]);
      expect(bundle.verificationMaterial.publicKey.hint).toBe(generated.keyId);
      expect(bundle.dsseEnvelope.signatures).toEqual([
        { sig: expect.any(String), keyid: generated.keyId },
      ]);
      expect(bundle.dsseEnvelope.payloadType).toBe(IN_TOTO_PAYLOAD_TYPE);
    });

    it('signs exactly the bytes of JSON.stringify(statement), which envelopeStatement reads back', () => {
      const bundle = signStatement(statement, key);

      expect(Buffer.from(bundle.dsseEnvelope.payload, 'base64')).toEqual(
        Buffer.from(JSON.stringify(statement), 'utf8'),
      );
      expect(envelopeStatement(bundle)).toEqual(statement);
    });

    it('is refused when one byte of the statement changed', () => {
      const bundle = signStatement(statement, key);
      const payload = Buffer.from(bundle.dsseEnvelope.payload, 'base64');
      const at = payload.indexOf('a'.repeat(64));
      payload[at] = 'b'.charCodeAt(0);
      const tampered = withEnvelope(bundle, { payload: payload.toString('base64') });

      expect(envelopeStatement(tampered)).not.toEqual(statement);
      expect(
        failureOf(() => verifyBundleWithKey(asJson(tampered), generated.publicKeyPem)),
      ).toMatchObject({
        name: VerificationError.name,
        code: 'SIGNATURE_ERROR',
      });
    });

    it('is refused when the signature changed', () => {
      const bundle = signStatement(statement, key);
      const [signature] = bundle.dsseEnvelope.signatures;
      const sig = Buffer.from(signature.sig, 'base64');
      sig[sig.length - 1] = sig[sig.length - 1]! ^ 1;
      const tampered = withEnvelope(bundle, {
        signatures: [{ ...signature, sig: sig.toString('base64') }],
      });

      expect(
        failureOf(() => verifyBundleWithKey(asJson(tampered), generated.publicKeyPem)),
      ).toMatchObject({
        code: 'SIGNATURE_ERROR',
      });
    });

    it('is refused when the payload type changed, as the type is part of what is signed', () => {
      const bundle = signStatement(statement, key);
      const tampered = withEnvelope(bundle, { payloadType: 'application/json' });

      expect(
        failureOf(() => verifyBundleWithKey(asJson(tampered), generated.publicKeyPem)),
      ).toMatchObject({
        code: 'SIGNATURE_ERROR',
      });
    });

    it('is refused with another key, whether or not the hint names that key', () => {
      const bundle = signStatement(statement, key);
      const hintingOther: SignedBundle = {
        ...bundle,
        verificationMaterial: { ...bundle.verificationMaterial, publicKey: { hint: other.keyId } },
      };

      expect(
        failureOf(() => verifyBundleWithKey(asJson(bundle), other.publicKeyPem)),
      ).toMatchObject({
        code: 'PUBLIC_KEY_ERROR',
      });
      expect(
        failureOf(() => verifyBundleWithKey(asJson(hintingOther), other.publicKeyPem)),
      ).toMatchObject({ code: 'SIGNATURE_ERROR' });
    });

    it('is refused when the hint names another key than the one it is verified with', () => {
      const bundle = signStatement(statement, key);
      const hintingOther: SignedBundle = {
        ...bundle,
        verificationMaterial: { ...bundle.verificationMaterial, publicKey: { hint: other.keyId } },
      };

      expect(
        failureOf(() => verifyBundleWithKey(asJson(hintingOther), generated.publicKeyPem)),
      ).toMatchObject({ code: 'PUBLIC_KEY_ERROR', message: `key not found: ${other.keyId}` });
    });

    it('after a rotation, old bundles verify with the old key and new ones with the new key only', () => {
      const oldKey = generateSigningKey();
      const signedBefore = signStatement(statement, signingKeyOf(oldKey.privateKeyPem));
      const newKey = generateSigningKey();
      const signedAfter = signStatement(statement, signingKeyOf(newKey.privateKeyPem));

      expect(verifyBundleWithKey(asJson(signedBefore), oldKey.publicKeyPem)).toEqual(statement);
      expect(verifyBundleWithKey(asJson(signedAfter), newKey.publicKeyPem)).toEqual(statement);
      expect(
        failureOf(() => verifyBundleWithKey(asJson(signedAfter), oldKey.publicKeyPem)),
      ).toBeInstanceOf(VerificationError);
      expect(
        failureOf(() => verifyBundleWithKey(asJson(signedBefore), newKey.publicKeyPem)),
      ).toBeInstanceOf(VerificationError);
    });

    it('signs afresh each time, and each signature verifies', () => {
      const first = signStatement(statement, key);
      const second = signStatement(statement, key);

      expect(first.dsseEnvelope.signatures[0].sig).not.toBe(second.dsseEnvelope.signatures[0].sig);
      expect(verifyBundleWithKey(asJson(second), generated.publicKeyPem)).toEqual(statement);
    });
  });

  describe(verifyBundleWithKey.name, () => {
    it('refuses a bundle that is not a valid Sigstore bundle', () => {
      const bundle = asJson(signStatement(statement, key));
      delete bundle.verificationMaterial;

      expect(() => verifyBundleWithKey(bundle, generated.publicKeyPem)).toThrow(/invalid bundle/);
    });
  });

  describe(envelopeStatement.name, () => {
    it('refuses an envelope whose payload is not an in-toto JSON object', () => {
      const bundle = signStatement(statement, key);

      expect(() => envelopeStatement(withEnvelope(bundle, { payloadType: 'text/plain' }))).toThrow(
        BundleContentError,
      );
      expect(() =>
        envelopeStatement(withEnvelope(bundle, { payload: Buffer.from('[1]').toString('base64') })),
      ).toThrow(/not a JSON object/);
      expect(() =>
        envelopeStatement(withEnvelope(bundle, { payload: Buffer.from('{').toString('base64') })),
      ).toThrow(/not JSON/);
    });
  });

  describe(pae.name, () => {
    it('encodes the DSSE protocol example', () => {
      expect(pae('http://example.com/HelloWorld', Buffer.from('hello world')).toString()).toBe(
        'DSSEv1 29 http://example.com/HelloWorld 11 hello world',
      );
    });

    it('counts bytes, not characters, as @sigstore/core does', () => {
      const payload = Buffer.from(JSON.stringify(statement), 'utf8');

      expect(pae(IN_TOTO_PAYLOAD_TYPE, payload)).toEqual(
        dsse.preAuthEncoding(IN_TOTO_PAYLOAD_TYPE, payload),
      );
      expect(pae('type/ü', Buffer.from('☕')).toString()).toBe('DSSEv1 7 type/ü 3 ☕');
    });
  });

  describe(generateSigningKey.name, () => {
    it('makes a P-256 key pair in PKCS#8 and SPKI PEM', () => {
      const pair = generateSigningKey();
      const privateKey = createPrivateKey(pair.privateKeyPem);

      expect(pair.privateKeyPem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
      expect(pair.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
      expect(privateKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
      expect(pair.keyId).not.toBe(generated.keyId);
    });
  });

  describe(keyIdOf.name, () => {
    it('is the lowercase hex SHA-256 of the SPKI DER, 64 characters', () => {
      const der = Buffer.from(pemBody(generated.publicKeyPem).join(''), 'base64');

      expect(generated.keyId).toMatch(/^[0-9a-f]{64}$/);
      expect(generated.keyId).toBe(createHash('sha256').update(der).digest('hex'));
    });

    it('is the same for a key in every form it comes in', () => {
      const privateKey = createPrivateKey(generated.privateKeyPem);
      const sec1 = privateKey.export({ type: 'sec1', format: 'pem' }) as string;

      expect(keyIdOf(generated.publicKeyPem)).toBe(generated.keyId);
      expect(keyIdOf(generated.publicKeyPem.replace(/\n/g, '\r\n'))).toBe(generated.keyId);
      expect(keyIdOf(privateKey)).toBe(generated.keyId);
      expect(key.keyId).toBe(generated.keyId);
      expect(signingKeyOf(sec1).keyId).toBe(generated.keyId);
      expect(key.publicKeyPem).toBe(generated.publicKeyPem);
    });
  });

  describe(signingKeyOf.name, () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const refused: [string, string][] = [
      ['an RSA key', rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string],
      [
        'an Ed25519 key',
        generateKeyPairSync('ed25519').privateKey.export({
          type: 'pkcs8',
          format: 'pem',
        }) as string,
      ],
      [
        'a P-384 key',
        generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey.export({
          type: 'pkcs8',
          format: 'pem',
        }) as string,
      ],
      ['a P-256 public key', generated.publicKeyPem],
      [
        'an encrypted P-256 key',
        createPrivateKey(generated.privateKeyPem).export({
          type: 'pkcs8',
          format: 'pem',
          cipher: 'aes-256-cbc',
          passphrase: 'a passphrase',
        }) as string,
      ],
      ['garbage', 'not-a-key-but-a-secret-value-0123456789'],
      [
        'a PEM with a broken body',
        `-----BEGIN PRIVATE KEY-----\n${pemBody(generated.privateKeyPem)[0]}\n-----END PRIVATE KEY-----\n`,
      ],
    ];

    it.each(refused)('refuses %s with a message that shows none of it', (_, pem) => {
      const error = failureOf(() => signingKeyOf(pem));

      expect(error).toBeInstanceOf(SigningKeyError);
      expect(error.message).toMatch(
        /^the signing key .*; kiln signs with ECDSA P-256 private keys/,
      );
      for (const line of [...pemBody(pem), pem]) expect(error.message).not.toContain(line);
      expect(error.message).not.toContain('BEGIN');
    });

    it('says which kind of key it refused', () => {
      expect(() => signingKeyOf(refused[0]![1])).toThrow(/is of type rsa/);
      expect(() => signingKeyOf(refused[1]![1])).toThrow(/is of type ed25519/);
      expect(() => signingKeyOf(refused[2]![1])).toThrow(/is an EC key on secp384r1/);
      expect(() => signingKeyOf(refused[3]![1])).toThrow(/is not an unencrypted private key/);
    });

    it('takes a P-256 key in PKCS#8 and in SEC1 PEM, and both sign verifiable bundles', () => {
      const sec1 = createPrivateKey(generated.privateKeyPem).export({
        type: 'sec1',
        format: 'pem',
      });

      const bundle = signStatement(statement, signingKeyOf(sec1 as string));

      expect(verifyBundleWithKey(asJson(bundle), generated.publicKeyPem)).toEqual(statement);
    });
  });
});
