import { Inject, Injectable } from '@nestjs/common';
import { createHash, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import {
  InvalidRequestError,
  PayloadTooLargeError,
  RateLimitedError,
  UnauthorizedError,
} from '../common/errors.js';
import { refuseDeepJson } from '../common/json-body.js';
import { LOGGER } from '../common/logger.js';
import type { ReceivedBody } from '../common/upload-body.js';
import { KilnConfig } from '../config/config.js';
import { isUuid } from '../config/formats.js';
import { RateLimitService } from '../ratelimit/rate-limit.service.js';
import { SecretSealer } from '../secrets/secret-sealer.js';
import { PayloadError, providerOf } from './providers/index.js';
import { type Received, TriggerDispatcher } from './trigger-dispatcher.js';
import type { TriggerRecord } from './triggers.repository.js';
import { TriggersRepository } from './triggers.repository.js';

/** The one answer for an unknown trigger and a wrong signature alike: no oracle for either. */
export const UNVERIFIED = 'Webhook signature could not be verified';

export type DeliveryAnswer =
  | { readonly kind: 'pong'; readonly received: Received }
  | { readonly kind: 'recorded'; readonly received: Received };

/**
 * Receives webhook deliveries (docs/adr/0053-triggers.md). In order: the trigger, its rate
 * limit, the body's size, the provider's signature over the raw bytes, and only then JSON and the
 * payload's schema. The delivery is recorded before the answer; its build is made after it.
 */
@Injectable()
export class WebhookReceiver {
  constructor(
    private readonly triggers: TriggersRepository,
    private readonly dispatcher: TriggerDispatcher,
    private readonly rateLimits: RateLimitService,
    private readonly sealer: SecretSealer,
    private readonly config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  get maxBodyBytes(): number {
    return this.config.triggers.webhookMaxBodyBytes;
  }

  /**
   * The trigger a delivery names, checked before the body is read. A delivery that names no
   * trigger counts against its sender's address, as every unverified one does (unverified()).
   */
  async admit(id: string, address: string | undefined): Promise<TriggerRecord> {
    const trigger = isUuid(id) ? await this.triggers.findAnyTenant(id.toLowerCase()) : undefined;
    if (trigger === undefined || !trigger.enabled) return this.unverified(address);
    return trigger;
  }

  /**
   * A delivery that could not be verified (no such trigger, a wrong signature) is limited by its
   * sender's address, with the API's write limit, and answered 401 until that is spent, then 429:
   * an unknown trigger and a known one with a wrong signature alike, so neither the answer nor
   * the limit tells a trigger exists. Verified deliveries are limited per trigger (verified()).
   */
  private async unverified(address: string | undefined): Promise<never> {
    const decision = await this.rateLimits.consume(`ip|${address ?? ''}`, 'write');
    if (decision !== undefined && !decision.allowed) {
      throw new RateLimitedError(
        'Too many unverified deliveries; wait until X-RateLimit-Reset',
        decision,
      );
    }
    throw new UnauthorizedError(UNVERIFIED);
  }

  /** A verified delivery counts against its trigger's own limit (KILN_WEBHOOK_RATE_LIMIT). */
  private async verified(trigger: TriggerRecord): Promise<void> {
    const limit = this.config.triggers.webhookRateLimit;
    if (limit === 0) return;
    const decision = await this.rateLimits.consumeUpTo(`trigger|${trigger.id}`, limit);
    if (!decision.allowed) {
      throw new RateLimitedError(
        'Too many deliveries for this trigger; wait until X-RateLimit-Reset',
        decision,
      );
    }
  }

  async receive(
    trigger: TriggerRecord,
    headers: IncomingHttpHeaders,
    body: ReceivedBody,
    address: string | undefined,
  ): Promise<DeliveryAnswer> {
    if (body.receivedBytes > this.maxBodyBytes) {
      throw new PayloadTooLargeError(
        `A webhook delivery may be at most ${this.maxBodyBytes} bytes`,
      );
    }
    const provider = providerOf(trigger.provider);
    const secret = this.sealer.unseal(trigger.secretSealed);
    if (!(await provider.verify(headers, body.bytes, secret))) {
      await this.refused(
        trigger,
        headers,
        'the signature or token did not match the trigger secret',
      );
      await this.unverified(address);
    }
    await this.verified(trigger);
    const eventName = provider.eventName(headers);
    if (eventName === null) {
      throw new InvalidRequestError(`The delivery names no event (${trigger.provider} header)`);
    }
    const payload = parseJson(headers, body.bytes);
    let event;
    try {
      event = provider.parse(eventName, payload);
    } catch (error) {
      if (!(error instanceof PayloadError)) throw error;
      await this.refused(trigger, headers, `the payload does not fit: ${error.message}`);
      throw new InvalidRequestError(`The ${eventName} payload does not fit: ${error.message}`);
    }
    // A host that sends no delivery id (old GitLab) redelivers the same bytes: their digest is it.
    const deliveryId =
      provider.deliveryId(headers) ??
      `body:${createHash('sha256').update(body.bytes).digest('hex')}`;
    const received = await this.dispatcher.record(trigger, deliveryId, eventName, event);
    if (!received.duplicate && received.delivery.outcome === 'pending' && event !== null) {
      // After the answer: a delivery is answered within a second, whatever the build takes.
      setImmediate(() => {
        this.dispatcher
          .build(trigger, received.delivery, event)
          .catch((error: unknown) =>
            this.logger.error({ err: error, trigger_id: trigger.id }, 'a delivery was not built'),
          );
      });
    }
    return { kind: event?.kind === 'ping' ? 'pong' : 'recorded', received };
  }

  /**
   * A delivery to a real trigger that could not be verified or read is listed for the trigger's
   * admins (a wrong secret pasted shows here), under an id of its own: the provider's id stays
   * free for the redelivery that verifies.
   */
  private async refused(
    trigger: TriggerRecord,
    headers: IncomingHttpHeaders,
    why: string,
  ): Promise<void> {
    const provider = providerOf(trigger.provider);
    const named = provider.deliveryId(headers);
    await this.triggers
      .recordDelivery(trigger.id, {
        deliveryId: `refused:${randomUUID()}`,
        event: (provider.eventName(headers) ?? 'unknown').slice(0, 100),
        ref: null,
        commit: null,
        pusher: null,
        outcome: 'refused',
        detail: named === null ? why : `${why} (delivery ${named.slice(0, 100)})`,
        eventData: null,
      })
      .catch((error: unknown) =>
        this.logger.warn({ err: error, trigger_id: trigger.id }, 'could not record a refusal'),
      );
    this.dispatcher.counted(trigger, 'refused');
  }
}

function parseJson(headers: IncomingHttpHeaders, bytes: Buffer): unknown {
  const type = headers['content-type'] ?? '';
  if (!/^application\/json\s*(?:;|$)/i.test(type)) {
    throw new InvalidRequestError(
      'A webhook delivery must be sent as application/json (set the content type in the webhook settings)',
      { 'Content-Type': 'must be application/json' },
    );
  }
  refuseDeepJson(bytes);
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new InvalidRequestError('The delivery body is not valid JSON', { body: 'invalid JSON' });
  }
}
