import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { type Observable, tap } from 'rxjs';
import { AUDIT_ROUTES } from './audit-actions.js';
import { AUDIT_STATE, type AuditState } from './audit-recorder.js';

/** The answer fields an audit event may name its target by: `id` and each `createdField`. */
const ID_FIELDS: readonly string[] = [
  ...new Set([
    'id',
    ...Object.values(AUDIT_ROUTES).flatMap((route) =>
      route.createdField === undefined ? [] : [route.createdField],
    ),
  ]),
];

/**
 * Hands AuditRecorder the id of what a state-changing handler created (`id`, or the route's
 * `createdField`: a member's `user_id`, a signing key's `key_id`), so a create's audit event names its target. It keeps nothing else of the answer.
 */
@Injectable()
export class AuditResultInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const state = context.switchToHttp().getRequest<{ [AUDIT_STATE]?: AuditState }>()[AUDIT_STATE];
    if (state === undefined) return next.handle();
    return next.handle().pipe(
      tap((answer: unknown) => {
        if (typeof answer !== 'object' || answer === null) return;
        for (const field of ID_FIELDS) {
          const value = (answer as Record<string, unknown>)[field];
          if (typeof value === 'string') (state.created ??= {})[field] = value;
        }
      }),
    );
  }
}
