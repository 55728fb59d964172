import type { BuildAccessRefusal } from '../../integrations/build-access.js';
import { TerminalError } from '../runtime/controller.js';

/**
 * A build kiln will not run as it stands: a Build it will not register, a spec its method cannot
 * translate, a secret reference that does not resolve, a registry that refuses its credentials.
 * Trying again would meet the same refusal, so the reconciler writes it to the record and the
 * Build's status and does not requeue; the `reason` is the failure reason they carry.
 */
export class RefusedBuild extends TerminalError {
  constructor(
    readonly reason: BuildAccessRefusal['reason'],
    message: string,
  ) {
    super(message);
    this.name = 'RefusedBuild';
  }
}
