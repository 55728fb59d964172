import { Inject, Injectable } from '@nestjs/common';
import { ConflictError, InvalidRequestError, NotFoundError } from '../common/errors.js';
import type { ReferenceResolver } from '../integrations/build-access.js';
import { REFERENCE_RESOLVER } from '../integrations/integrations.module.js';
import { isSecretReference } from '../manifest/secret-reference.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import {
  ProvenanceRepository,
  type ProvenanceSettings,
  type StoredSigningKey,
} from './provenance.repository.js';
import { generateSigningKey, type SigningKey, SigningKeyError, signingKeyOf } from './signing.js';

export const SIGNING_ALGORITHM = 'ecdsa-p256-sha256';

/** The field a tenant's own key is resolved under: failures name it. */
const KEY_FIELD = 'provenance.signing_key';

/** Tries at making a key active while other replicas do the same (each try reads anew). */
const ACTIVATE_TRIES = 3;

export type Signer =
  | { readonly ok: true; readonly key: SigningKey }
  | { readonly ok: false; readonly message: string };

/**
 * Each tenant's signing keys (docs/provenance.md, "Keys"). A tenant signs with a key kiln
 * generates on first use (ECDSA P-256, its private half sealed with KILN_SECRETS_KEY), or with its
 * own from its secret manager (a secret reference in its provenance settings). Every key that ever
 * signed stays listed with its public half, retired once another took its place, so statements
 * signed before a rotation still verify.
 */
@Injectable()
export class SigningKeys {
  constructor(
    private readonly repository: ProvenanceRepository,
    private readonly sealer: SecretSealer,
    @Inject(REFERENCE_RESOLVER) private readonly resolver: ReferenceResolver,
  ) {}

  settings(tenantId: string): Promise<ProvenanceSettings> {
    return this.repository.settings(tenantId);
  }

  /**
   * Sets the tenant's policy and key source; bad values change nothing (400). A secret reference
   * is read now, through the tenant's secret manager, and must hold an ECDSA P-256 private key:
   * a key that cannot sign is refused here rather than failing every build after.
   */
  async setSettings(
    tenantId: string,
    change: { policy?: string; signingKey?: string | null },
  ): Promise<ProvenanceSettings> {
    const current = await this.repository.settings(tenantId);
    const details: Record<string, string> = {};
    const policy = change.policy ?? current.policy;
    if (policy !== 'optional' && policy !== 'required') {
      details['provenance'] = 'optional or required';
    }
    const signingKey = change.signingKey === undefined ? current.signingKey : change.signingKey;
    if (signingKey !== null && !isSecretReference(signingKey)) {
      details['signing_key'] =
        'a secret reference (e.g. vault:kv/data/kiln#signing-key) to a PEM private key, or null for the key kiln generates; never the key itself';
    }
    if (Object.keys(details).length > 0) {
      throw new InvalidRequestError('Invalid provenance settings', details);
    }
    if (signingKey !== null && signingKey !== current.signingKey) {
      const signer = await this.fromManager(tenantId, signingKey);
      if (!signer.ok) {
        throw new InvalidRequestError('The signing key cannot be used', {
          signing_key: signer.message,
        });
      }
    }
    return this.repository.setSettings(tenantId, {
      policy: policy as ProvenanceSettings['policy'],
      signingKey,
    });
  }

  /**
   * The key the tenant signs with now, given its settings' `signingKey` (a secret reference, or
   * null for kiln's generated key); never throws for a key that cannot be had.
   */
  signer(tenantId: string, signingKey: string | null): Promise<Signer> {
    if (signingKey !== null) return this.fromManager(tenantId, signingKey);
    return this.generated(tenantId);
  }

  keys(tenantId: string): Promise<StoredSigningKey[]> {
    return this.repository.keys(tenantId);
  }

  async key(tenantId: string, keyId: string): Promise<StoredSigningKey> {
    const key = /^[0-9a-f]{64}$/.test(keyId)
      ? await this.repository.key(tenantId, keyId)
      : undefined;
    if (key === undefined) throw new NotFoundError('Signing key not found');
    return key;
  }

  /**
   * A new generated key for the tenant; the one before is retired and keeps verifying what it
   * signed. A tenant that signs with its own key rotates it in its secret manager (409 here).
   */
  async rotate(tenantId: string): Promise<StoredSigningKey> {
    const { signingKey } = await this.repository.settings(tenantId);
    if (signingKey !== null) {
      throw new ConflictError(
        "This tenant signs with its own key from its secret manager: rotate it there (kiln records the new key's public half when it first signs with it)",
        { signing_key: signingKey },
      );
    }
    const active = await this.repository.activeKey(tenantId);
    const stored = await this.repository.activate(
      tenantId,
      this.freshKey().stored,
      active?.keyId ?? null,
    );
    if (stored === undefined) {
      throw new ConflictError('The signing key changed while it was being rotated; try again');
    }
    return stored;
  }

  /** The tenant's generated key, made on first use. */
  private async generated(tenantId: string): Promise<Signer> {
    for (let attempt = 0; attempt < ACTIVATE_TRIES; attempt += 1) {
      const active = await this.repository.activeKey(tenantId);
      if (active?.source === 'generated' && active.privateKeySealed !== null) {
        try {
          return { ok: true, key: signingKeyOf(this.sealer.unseal(active.privateKeySealed)) };
        } catch (error) {
          return { ok: false, message: `kiln's signing key cannot be read: ${messageOf(error)}` };
        }
      }
      // None yet, or the tenant switched back from its own key: a new generated one.
      const fresh = this.freshKey();
      const stored = await this.repository.activate(tenantId, fresh.stored, active?.keyId ?? null);
      if (stored !== undefined) return { ok: true, key: fresh.key };
    }
    return { ok: false, message: 'the signing key kept changing while kiln tried to make one' };
  }

  /** The tenant's own key, read through its secret manager and recorded (public half) on change. */
  private async fromManager(tenantId: string, reference: string): Promise<Signer> {
    const resolution = await this.resolver.resolve(tenantId, { [KEY_FIELD]: reference });
    if (!resolution.ok) return { ok: false, message: resolution.message };
    let key: SigningKey;
    try {
      key = signingKeyOf(resolution.values[KEY_FIELD]!);
    } catch (error) {
      if (!(error instanceof SigningKeyError)) throw error;
      return { ok: false, message: `${KEY_FIELD}: ${reference}: ${error.message}` };
    }
    for (let attempt = 0; attempt < ACTIVATE_TRIES; attempt += 1) {
      const active = await this.repository.activeKey(tenantId);
      if (active?.keyId === key.keyId) return { ok: true, key };
      const stored = await this.repository.activate(
        tenantId,
        {
          keyId: key.keyId,
          algorithm: SIGNING_ALGORITHM,
          publicKey: key.publicKeyPem,
          privateKeySealed: null,
          source: 'secret-manager',
          reference,
        },
        active?.keyId ?? null,
      );
      if (stored !== undefined) return { ok: true, key };
    }
    return { ok: false, message: 'the signing key kept changing while kiln tried to record it' };
  }

  private freshKey(): {
    key: SigningKey;
    stored: Omit<StoredSigningKey, 'createdAt' | 'retiredAt'>;
  } {
    const generated = generateSigningKey();
    return {
      key: signingKeyOf(generated.privateKeyPem),
      stored: {
        keyId: generated.keyId,
        algorithm: SIGNING_ALGORITHM,
        publicKey: generated.publicKeyPem,
        privateKeySealed: this.sealer.seal(generated.privateKeyPem),
        source: 'generated',
        reference: null,
      },
    };
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
