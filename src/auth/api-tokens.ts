import { Inject, Injectable } from '@nestjs/common';
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import {
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  UnauthorizedError,
} from '../common/errors.js';
import { LOGGER } from '../common/logger.js';
import { KilnConfig } from '../config/config.js';
import { AccessCache } from './access-cache.js';
import { ApiTokensRepository, type StoredApiToken } from './api-tokens.repository.js';
import { TENANT_PERMISSIONS, type TenantPermission } from './permissions.js';
import type { TenantContext } from './tenant-context.js';

/** What every API token starts with, so secret scanners can find one that leaked. */
export const API_TOKEN_PREFIX = 'kiln_';
/** `kiln_` and 32 random bytes in base64url. */
const API_TOKEN_FORMAT = /^kiln_[A-Za-z0-9_-]{43}$/;
/** A token never manages tokens: one that leaked cannot make others that outlive its revocation. */
const NEVER_IN_A_TOKEN: TenantPermission = 'token:manage';
/** Tokens a user holds in one tenant at most. */
export const MAX_API_TOKENS_PER_MEMBER = 100;
/** The expiry when none is asked for, unless KILN_API_TOKEN_MAX_DAYS is lower. */
const DEFAULT_DAYS = 30;
/** `last_used_at` is written at most this often per token. */
const TOUCH_EVERY_SECONDS = 60;

/** What a verified API token tells the guard. */
export interface VerifiedApiToken {
  readonly userId: string;
  readonly expiresAt: Date;
  readonly apiToken: {
    readonly id: string;
    readonly tenantId: string;
    readonly permissions: readonly TenantPermission[];
  };
}

/** The SHA-256 of a token, in hex: all kiln stores of it. */
function hashOf(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * API tokens (docs/adr/0044-api-tokens.md): bearer credentials for machines and CI, each acting
 * for its user in one tenant with at most the permissions it was given. A request made with one
 * needs the permission both in the token and in the user's role at that moment, so demoting or
 * removing the member, or disabling the user, cuts its tokens down at once.
 */
@Injectable()
export class ApiTokens {
  /** When this process last wrote `last_used_at`, by token id. */
  private readonly touched = new Map<string, number>();

  constructor(
    private readonly tokens: ApiTokensRepository,
    private readonly access: AccessCache,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  /** Makes a token for the caller in its tenant; the token itself is in the answer only. */
  async create(
    caller: TenantContext,
    request: { name: string; permissions?: readonly TenantPermission[]; expiresInDays?: number },
  ): Promise<{ stored: StoredApiToken; token: string }> {
    const name = request.name.trim();
    if (name === '')
      throw new InvalidRequestError('name must not be blank', { name: 'must not be blank' });
    const permissions =
      request.permissions ?? caller.permissions.filter((p) => p !== NEVER_IN_A_TOKEN);
    if (permissions.includes(NEVER_IN_A_TOKEN)) {
      throw new InvalidRequestError(`An API token cannot hold ${NEVER_IN_A_TOKEN}`, {
        permissions: `must not include ${NEVER_IN_A_TOKEN}`,
      });
    }
    if (permissions.length === 0) {
      throw new InvalidRequestError('An API token needs at least one permission', {
        permissions: 'must not be empty',
      });
    }
    const beyond = permissions.filter((p) => !caller.permissions.includes(p));
    if (beyond.length > 0) {
      throw new ForbiddenError(
        `Your role in this tenant lacks ${beyond.join(', ')}: a token gets at most what you hold`,
      );
    }
    const maxDays = this.config.apiTokenMaxDays;
    const days = request.expiresInDays ?? Math.min(DEFAULT_DAYS, maxDays);
    if (days > maxDays) {
      throw new InvalidRequestError(`expires_in_days must be at most ${maxDays}`, {
        expires_in_days: `must be from 1 to ${maxDays} (KILN_API_TOKEN_MAX_DAYS)`,
      });
    }
    const held = await this.tokens.ownedBy(caller.tenantId, caller.userId);
    if (held.length >= MAX_API_TOKENS_PER_MEMBER) {
      throw new ConflictError(
        `You hold ${held.length} API tokens in this tenant, the most one member may: revoke one first`,
      );
    }
    const token = `${API_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const stored = await this.tokens.insert({
      userId: caller.userId,
      tenantId: caller.tenantId,
      name,
      hash: hashOf(token),
      permissions: inListedOrder(permissions),
      expiresAt: new Date(Date.now() + days * 86_400_000),
    });
    return { stored, token };
  }

  list(caller: TenantContext): Promise<StoredApiToken[]> {
    return this.tokens.ownedBy(caller.tenantId, caller.userId);
  }

  /** Revokes one of the caller's tokens in its tenant: refused everywhere once replicas hear. */
  async revoke(caller: TenantContext, id: string): Promise<void> {
    if (!(await this.tokens.remove(caller.tenantId, caller.userId, id)))
      throw new NotFoundError('You have no API token with this id in this tenant');
    this.access.invalidate(caller.userId);
  }

  /**
   * The user and scope of a bearer token that looks like an API token (`kiln_…`): 401 unless it
   * is one kiln made, not revoked and not expired. Its use is recorded, to the minute.
   */
  async verify(token: string): Promise<VerifiedApiToken> {
    const refused = new UnauthorizedError('Invalid, expired or revoked API token');
    if (!API_TOKEN_FORMAT.test(token)) throw refused;
    const stored = await this.access.apiTokenOf(hashOf(token), (hash) =>
      this.tokens.findByHash(hash),
    );
    if (stored === undefined || stored.expiresAt.getTime() <= Date.now()) throw refused;
    this.recordUse(stored.id);
    return {
      userId: stored.userId,
      expiresAt: stored.expiresAt,
      apiToken: { id: stored.id, tenantId: stored.tenantId, permissions: stored.permissions },
    };
  }

  private recordUse(id: string): void {
    const now = Date.now();
    if ((this.touched.get(id) ?? 0) > now - TOUCH_EVERY_SECONDS * 1000) return;
    if (this.touched.size >= 10_000) this.touched.clear();
    this.touched.set(id, now);
    this.tokens.touch(id, TOUCH_EVERY_SECONDS).catch((error: unknown) => {
      this.logger.warn({ err: error, token_id: id }, 'could not record an API token use');
    });
  }
}

/** The permissions in the order TENANT_PERMISSIONS lists them, for stable answers. */
function inListedOrder(permissions: readonly TenantPermission[]): TenantPermission[] {
  return TENANT_PERMISSIONS.filter((p) => permissions.includes(p));
}
