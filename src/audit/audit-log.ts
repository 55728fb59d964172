import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { LOGGER } from '../common/logger.js';
import { Metrics } from '../metrics/metrics.js';
import { type AuditEvent, auditEventView } from './audit-event.js';
import { AuditEventsRepository } from './audit-events.repository.js';

/** The `log` field of every audit line: what operators route the audit stream by. */
export const AUDIT_LOG_NAME = 'audit';

/** DI token of AuditLogOptions (none in the server). */
export const AUDIT_LOG_OPTIONS = Symbol('AUDIT_LOG_OPTIONS');

export interface AuditLogOptions {
  /**
   * Write audit lines only at the logger's own level and above (info), as any other line.
   * kiln-admin's: its standard error is for people and carries warnings only by default; its
   * events are still rows. The server writes audit lines whatever KILN_LOG_LEVEL says.
   */
  readonly followLoggerLevel?: boolean;
}

/**
 * Records audit events (docs/adr/0049-audit-log.md): each is one JSON line on the audit logger
 * (`"log":"audit"`, written whatever KILN_LOG_LEVEL says) and one row of `audit_events`, and
 * counts in kiln_audit_events_total. The line is written first and always; when the row cannot
 * be stored the call that caused it is not failed (its change is already done), and an error line
 * says which event the table lacks. The line stream is the complete record.
 */
@Injectable()
export class AuditLog {
  private readonly lines: Logger;

  constructor(
    private readonly events: AuditEventsRepository,
    @Inject(LOGGER) private readonly logger: Logger,
    @Optional() private readonly metrics?: Metrics,
    @Optional() @Inject(AUDIT_LOG_OPTIONS) options: AuditLogOptions = {},
  ) {
    this.lines =
      options.followLoggerLevel === true
        ? logger.child({ log: AUDIT_LOG_NAME })
        : logger.child({ log: AUDIT_LOG_NAME }, { level: 'info' });
  }

  /** Writes the line and the row of one event; never throws for the row. */
  async record(fields: Omit<AuditEvent, 'id' | 'occurredAt'>): Promise<AuditEvent> {
    const event: AuditEvent = { id: randomUUID(), occurredAt: new Date(), ...fields };
    this.lines.info(auditEventView(event), `${event.action} ${event.result}`);
    this.metrics?.inc('kiln_audit_events_total', { result: event.result });
    try {
      await this.events.insert(event);
    } catch (error) {
      this.logger.error(
        { err: error, audit_event_id: event.id, action: event.action },
        'audit: the event could not be stored in audit_events; its audit line is the only record',
      );
    }
    return event;
  }
}
