import { buildObjectName, REGISTRY_CONFIG_KEY } from '../../build-methods/job.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import type { ReconcilerDeps } from './reconciler-ports.js';

/**
 * Registers a build's secret values with the LogSink's masker of this process, before any line
 * of its pod is read. A build this process started had them registered by BuildAccess as it
 * resolved them (`registered`). One it did not start (adopted after a restart or a lost lease)
 * has them in its own Secret, read back: what its pod was given is exactly what must be masked.
 * Resolved values exist nowhere else.
 */
export class SecretMasking {
  /**
   * Builds whose values this process registered. The masker lives in this process's memory, so
   * this set is of the same lifetime: a new process has neither, and registers every build's
   * values again (one read of its Secret) before it reads a line.
   */
  private readonly done = new Set<string>();

  constructor(private readonly deps: Pick<ReconcilerDeps, 'sealer' | 'workloads' | 'sink'>) {}

  /** BuildAccess registered the build's values as it resolved them. */
  registered(buildId: string): void {
    this.done.add(buildId);
  }

  async register(record: BuildEntity, namespace: string): Promise<void> {
    if (this.done.has(record.id)) return;
    const values = Object.values(this.deps.sealer.unsealAll(record.spec.config.secrets ?? {}));
    const secret = await this.deps.workloads.readSecret(namespace, buildObjectName(record.id));
    for (const [key, encoded] of Object.entries(secret?.data ?? {})) {
      const value = Buffer.from(encoded, 'base64').toString('utf8');
      values.push(value, ...(key === REGISTRY_CONFIG_KEY ? dockerConfigSecrets(value) : []));
    }
    const masked = values.filter((value) => value !== '');
    if (masked.length > 0) this.deps.sink.registerSecrets(record.id, masked);
    this.done.add(record.id);
  }

  forget(buildId: string): void {
    this.done.delete(buildId);
  }
}

/** The credentials inside a Docker config: each `auth` and the password it encodes. */
function dockerConfigSecrets(text: string): string[] {
  try {
    const config = JSON.parse(text) as { auths?: Record<string, { auth?: string }> };
    return Object.values(config.auths ?? {}).flatMap(({ auth }) => {
      if (typeof auth !== 'string') return [];
      const decoded = Buffer.from(auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      return colon < 0 ? [auth] : [auth, decoded.slice(colon + 1)];
    });
  } catch {
    return [];
  }
}
