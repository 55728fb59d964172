import { Injectable } from '@nestjs/common';
import { InvalidRequestError } from '../common/errors.js';
import type { AuditResult } from './audit-event.js';
import { auditEventView, type AuditEventView } from './audit-event.js';
import { AuditEventsRepository } from './audit-events.repository.js';

/** What a reader asks for: filters as the API takes them, and the page. */
export interface AuditQuery {
  /** A tenant id, null for events of no tenant, undefined for every tenant. */
  readonly tenantId?: string | null;
  readonly actor?: string;
  readonly action?: string;
  readonly targetId?: string;
  readonly result?: AuditResult;
  readonly since?: string;
  readonly until?: string;
  readonly page: number;
  readonly limit: number;
}

/** Reads the audit log for GET /api/v1/audit and its installation-wide twin. */
@Injectable()
export class AuditReader {
  constructor(private readonly events: AuditEventsRepository) {}

  async list(query: AuditQuery): Promise<{
    events: AuditEventView[];
    total: number;
    page: number;
    limit: number;
  }> {
    const since = query.since === undefined ? undefined : new Date(query.since);
    const until = query.until === undefined ? undefined : new Date(query.until);
    if (since !== undefined && until !== undefined && since > until) {
      throw new InvalidRequestError('since must not be after until', {
        since: 'after until',
      });
    }
    const { events, total } = await this.events.page(
      {
        tenantId: query.tenantId,
        actorUserId: query.actor?.toLowerCase(),
        action: query.action,
        targetId: query.targetId,
        result: query.result,
        since,
        until,
      },
      (query.page - 1) * query.limit,
      query.limit,
    );
    return { events: events.map(auditEventView), total, page: query.page, limit: query.limit };
  }
}
