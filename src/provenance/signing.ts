import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
} from 'node:crypto';
import { bundleFromJSON, isBundleWithDsseEnvelope } from '@sigstore/bundle';
import {
  type KeyFinderFunc,
  toSignedEntity,
  toTrustMaterial,
  VerificationError,
  Verifier,
} from '@sigstore/verify';

/**
 * kiln signs its provenance statements as DSSE envelopes inside Sigstore bundles (v0.3) that
 * carry a public-key hint instead of a certificate, and no transparency-log entry or timestamp:
 * kiln has no Rekor and no timestamp authority, so trust comes from the tenant's published key
 * alone (docs/provenance.md). Every tenant key is ECDSA P-256, the signature ECDSA with SHA-256
 * in DER, which is what cosign and the Sigstore clients expect of a key-signed bundle.
 */

/** The DSSE payload type of an in-toto statement. */
export const IN_TOTO_PAYLOAD_TYPE = 'application/vnd.in-toto+json';
/** The media type of a Sigstore bundle v0.3, in the bundle and as an OCI artifact type. */
export const SIGSTORE_BUNDLE_V03 = 'application/vnd.dev.sigstore.bundle.v0.3+json';

const CURVE = 'prime256v1';
const TRUSTED_ROOT_MEDIA_TYPE = 'application/vnd.dev.sigstore.trustedroot.v0.2+json';

/** A signing key as kiln stores it: PEM texts and the key id they share. */
export interface GeneratedSigningKey {
  /** PKCS#8 PEM. Sealed before it is stored. */
  readonly privateKeyPem: string;
  /** SPKI PEM, as `cosign --key` reads it. */
  readonly publicKeyPem: string;
  readonly keyId: string;
}

/** A private key ready to sign with. */
export interface SigningKey {
  readonly privateKey: KeyObject;
  readonly publicKeyPem: string;
  readonly keyId: string;
}

/** The Sigstore bundle kiln writes, in its JSON form (the protobuf JSON mapping). */
export interface SignedBundle {
  readonly mediaType: typeof SIGSTORE_BUNDLE_V03;
  readonly verificationMaterial: {
    readonly publicKey: { readonly hint: string };
    readonly tlogEntries: readonly never[];
  };
  readonly dsseEnvelope: {
    /** Base64 of the statement's bytes. */
    readonly payload: string;
    readonly payloadType: string;
    readonly signatures: readonly [{ readonly sig: string; readonly keyid: string }];
  };
}

/**
 * The text is not a key kiln can sign with. The message names what was found (a kind of key, or
 * that it is no private key at all) and never any part of the text, which may be a secret.
 */
export class SigningKeyError extends Error {
  constructor(detail: string) {
    super(`the signing key ${detail}; kiln signs with ECDSA P-256 private keys in PEM`);
    this.name = 'SigningKeyError';
  }
}

/** The bundle's envelope does not hold an in-toto statement kiln can read. */
export class BundleContentError extends Error {
  constructor(detail: string) {
    super(`the bundle's envelope ${detail}`);
    this.name = 'BundleContentError';
  }
}

/** A fresh ECDSA P-256 key pair. */
export function generateSigningKey(): GeneratedSigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ec', {
    namedCurve: CURVE,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey, keyId: keyIdOf(publicKey) };
}

/**
 * The signing key in `privateKeyPem` (PKCS#8 or SEC1 PEM, unencrypted). Throws SigningKeyError
 * when it is not an EC P-256 private key: a tenant's key from its secret manager is checked here
 * before kiln signs anything with it.
 */
export function signingKeyOf(privateKeyPem: string): SigningKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: privateKeyPem, format: 'pem' });
  } catch {
    // Node's own message may quote the input; this one says only what is wrong.
    throw new SigningKeyError('is not an unencrypted private key in PEM');
  }
  const type = privateKey.asymmetricKeyType;
  if (type !== 'ec') throw new SigningKeyError(`is of type ${type ?? 'unknown'}`);
  const curve = privateKey.asymmetricKeyDetails?.namedCurve;
  if (curve !== CURVE) throw new SigningKeyError(`is an EC key on ${curve ?? 'an unknown curve'}`);
  const publicKey = createPublicKey(privateKey);
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  return { privateKey, publicKeyPem, keyId: keyIdOf(publicKey) };
}

/**
 * The key id: lowercase hex SHA-256 of the public key's SPKI DER, 64 characters. The same for a
 * key whatever PEM it came in, and for its private key.
 */
export function keyIdOf(key: string | KeyObject): string {
  const publicKey = typeof key !== 'string' && key.type === 'public' ? key : createPublicKey(key);
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('hex');
}

/**
 * DSSE's pre-authentication encoding, the bytes that are signed:
 * `DSSEv1 <len(type)> <type> <len(payload)> <payload>`, lengths in bytes as ASCII decimals.
 * Signing these rather than the payload binds the payload type into the signature.
 */
export function pae(payloadType: string, payload: Buffer): Buffer {
  const type = Buffer.from(payloadType, 'utf8');
  return Buffer.concat([
    Buffer.from(`DSSEv1 ${type.length} `, 'ascii'),
    type,
    Buffer.from(` ${payload.length} `, 'ascii'),
    payload,
  ]);
}

/**
 * `statement` signed with `key`: the bundle, ready to be written as JSON. The payload is the
 * UTF-8 of `JSON.stringify(statement)`, so what a verifier reads is exactly what was signed.
 */
export function signStatement(statement: object, key: SigningKey): SignedBundle {
  const payload = Buffer.from(JSON.stringify(statement), 'utf8');
  const signature = sign('sha256', pae(IN_TOTO_PAYLOAD_TYPE, payload), {
    key: key.privateKey,
    dsaEncoding: 'der',
  });
  return {
    mediaType: SIGSTORE_BUNDLE_V03,
    verificationMaterial: { publicKey: { hint: key.keyId }, tlogEntries: [] },
    dsseEnvelope: {
      payload: payload.toString('base64'),
      payloadType: IN_TOTO_PAYLOAD_TYPE,
      signatures: [{ sig: signature.toString('base64'), keyid: key.keyId }],
    },
  };
}

/**
 * The statement in a bundle's envelope, read without any verification: for showing what kiln
 * stored. Whoever needs to trust it verifies the bundle (verifyBundleWithKey).
 */
export function envelopeStatement(bundle: SignedBundle): Record<string, unknown> {
  const { payloadType, payload } = bundle.dsseEnvelope;
  return readStatement(payloadType, Buffer.from(payload, 'base64'));
}

/**
 * Verifies `bundle` (its JSON form, as read from a registry or the API) against one public key
 * with @sigstore/verify, and returns the statement it signs. Throws the library's errors
 * (ValidationError for a malformed bundle, VerificationError when the hint names another key or
 * the signature does not hold) and BundleContentError when the signed payload is no statement.
 */
export function verifyBundleWithKey(
  bundle: unknown,
  publicKeyPem: string,
): Record<string, unknown> {
  const parsed = bundleFromJSON(bundle);
  const trust = toTrustMaterial(
    {
      mediaType: TRUSTED_ROOT_MEDIA_TYPE,
      tlogs: [],
      certificateAuthorities: [],
      ctlogs: [],
      timestampAuthorities: [],
    },
    trustedKeys([createPublicKey(publicKeyPem)]),
  );
  // The library requires a log entry and a timestamp by default; kiln's bundles have neither,
  // so the key alone is the trust, as with `cosign verify-attestation --key`.
  new Verifier(trust, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }).verify(
    toSignedEntity(parsed),
  );
  if (!isBundleWithDsseEnvelope(parsed)) throw new BundleContentError('is not a DSSE envelope');
  // The statement is read from the very bytes that were verified, never from the JSON again.
  const { payloadType, payload } = parsed.content.dsseEnvelope;
  return readStatement(payloadType, payload);
}

/** Public keys by key id, as the verifier looks up a bundle's hint. */
function trustedKeys(keys: readonly KeyObject[]): KeyFinderFunc {
  const byId = new Map(keys.map((key) => [keyIdOf(key), key]));
  return (hint) => {
    const publicKey = byId.get(hint);
    if (publicKey === undefined) {
      throw new VerificationError({ code: 'PUBLIC_KEY_ERROR', message: `key not found: ${hint}` });
    }
    // A rotated key stays valid for what it signed: kiln keys carry no validity window.
    return { publicKey, validFor: () => true };
  };
}

function readStatement(payloadType: string, payload: Buffer): Record<string, unknown> {
  if (payloadType !== IN_TOTO_PAYLOAD_TYPE) {
    throw new BundleContentError(`has payload type ${payloadType}, not ${IN_TOTO_PAYLOAD_TYPE}`);
  }
  let statement: unknown;
  try {
    statement = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new BundleContentError('payload is not JSON');
  }
  if (typeof statement !== 'object' || statement === null || Array.isArray(statement)) {
    throw new BundleContentError('payload is not a JSON object');
  }
  return statement as Record<string, unknown>;
}
