import { ConflictError } from '../../common/errors.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import type { ReconcilerLifecycle } from './reconciler-ports.js';

/**
 * Runs a lifecycle transition; when another writer won (the API's cancel, another operator), the
 * record as it is now, which the reconcile goes on from.
 */
export async function transition(
  lifecycle: Pick<ReconcilerLifecycle, 'find'>,
  record: BuildEntity,
  change: () => Promise<BuildEntity>,
): Promise<BuildEntity> {
  try {
    return await change();
  } catch (error) {
    if (!(error instanceof ConflictError)) throw error;
    const now = await lifecycle.find(record.id);
    if (now === undefined) throw error;
    return now;
  }
}
