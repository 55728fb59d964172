import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import { type Observable, tap } from 'rxjs';
import { AUDIT_STATE, type AuditState } from './audit-recorder.js';

/**
 * Hands AuditRecorder the id of what a state-changing handler created (`id`, or a member's
 * `user_id`), so a create's audit event names its target. It keeps nothing else of the answer.
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
        const { id, user_id: userId } = answer as { id?: unknown; user_id?: unknown };
        if (typeof id === 'string') state.createdId = id;
        if (typeof userId === 'string') state.createdUserId = userId;
      }),
    );
  }
}
