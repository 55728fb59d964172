import type { IncomingHttpHeaders } from 'node:http';
import type { GitEvent } from '../git-event.js';

export const PROVIDER_NAMES = ['github', 'gitlab', 'gitea', 'forgejo'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

/** One git host's webhooks: how its deliveries are authenticated, named and read. */
export interface WebhookProvider {
  readonly name: ProviderName;
  /** Constant-time verification over the raw body; false for missing/wrong. Never throws. */
  verify(headers: IncomingHttpHeaders, rawBody: Buffer, secret: string): Promise<boolean>;
  /** The provider's delivery id header value, or null when absent. */
  deliveryId(headers: IncomingHttpHeaders): string | null;
  /** The event header value (X-GitHub-Event, X-Gitlab-Event, X-Gitea-Event/X-Forgejo-Event). */
  eventName(headers: IncomingHttpHeaders): string | null;
  /**
   * Reads an already JSON.parsed payload; throws PayloadError when it does not have the shape the
   * provider documents. Returns null for an event kiln ignores (e.g. GitHub 'issues').
   */
  parse(eventName: string, payload: unknown): GitEvent | null;
}
