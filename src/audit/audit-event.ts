/**
 * One audit event (docs/operations.md "Audit log"): who did what to which record, with what
 * outcome. It never carries a request body, a header, a token or a secret: only the fields below,
 * each bounded.
 */
export interface AuditEvent {
  readonly id: string;
  readonly occurredAt: Date;
  readonly actor: AuditActor;
  /** The tenant the call acted in (or was refused in), or null for the installation's own. */
  readonly tenantId: string | null;
  /** A stable name per route or admin command, e.g. `build.cancel`, `token.create`. */
  readonly action: string;
  readonly target: AuditTarget | null;
  readonly result: AuditResult;
  /** The HTTP status answered; null for kiln-admin commands. */
  readonly status: number | null;
  readonly requestId: string | null;
  readonly sourceAddress: string | null;
  readonly userAgent: string | null;
}

export const ACTOR_TYPES = [
  'user',
  'api_token',
  'anonymous',
  'upload_token',
  'kiln-admin',
] as const;
/**
 * Who acted: a user signed in with an access token, a user's API token, nobody known (no or a
 * refused credential; a failed login carries the e-mail it tried), a build pod with its upload
 * token, or the database-direct `kiln-admin` command.
 */
export type ActorType = (typeof ACTOR_TYPES)[number];

export interface AuditActor {
  readonly type: ActorType;
  readonly userId: string | null;
  /** The user's e-mail at the time, or the e-mail a login tried. */
  readonly email: string | null;
  readonly apiTokenId: string | null;
}

export interface AuditTarget {
  readonly type: string;
  readonly id: string | null;
}

export const AUDIT_RESULTS = ['success', 'refused', 'failed'] as const;
export type AuditResult = (typeof AUDIT_RESULTS)[number];

/** 2xx and 3xx: success; 4xx: refused (the caller's fault or lack of right); 5xx: failed. */
export function resultOfStatus(status: number): AuditResult {
  if (status >= 500) return 'failed';
  if (status >= 400) return 'refused';
  return 'success';
}

export const MAX_USER_AGENT = 256;
export const MAX_EMAIL = 320;

/** `value` cut to `max` characters, or null when it is not a non-empty string. */
export function bounded(value: unknown, max: number): string | null {
  if (typeof value !== 'string' || value === '') return null;
  return value.length > max ? value.slice(0, max) : value;
}

/** The event as the audit log line, the API and the CLI show it (snake_case, ISO time). */
export function auditEventView(event: AuditEvent) {
  return {
    id: event.id,
    occurred_at: event.occurredAt.toISOString(),
    actor: {
      type: event.actor.type,
      user_id: event.actor.userId,
      email: event.actor.email,
      api_token_id: event.actor.apiTokenId,
    },
    tenant_id: event.tenantId,
    action: event.action,
    target: event.target === null ? null : { type: event.target.type, id: event.target.id },
    result: event.result,
    status: event.status,
    request_id: event.requestId,
    source_address: event.sourceAddress,
    user_agent: event.userAgent,
  };
}

export type AuditEventView = ReturnType<typeof auditEventView>;
