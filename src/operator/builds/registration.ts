import { ConflictError, NotFoundError } from '../../common/errors.js';
import { carriesCredentials, credentialsInUrlProblem } from '../../common/url-credentials.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { specDigest } from '../../manifest/build-spec.js';
import { type BuildResource, KILN_LABELS } from '../api/build-resource.js';
import { buildSpecOf } from '../api/projection.js';
import type { BuildEvents } from './build-events.js';
import { namespaceOf, type ReconcilerDeps } from './reconciler-ports.js';
import { RefusedBuild } from './refused-build.js';
import { transition } from './transition.js';

/**
 * Which build record a Build resource stands for, and the registration of Builds applied with
 * kubectl. A Build the API wrote is named after its build id and labelled with it; any other
 * gets a record and a build number through `lifecycle.create`, under the idempotency key
 * `kubernetes:<uid>`, so a crash between the insert and the status write registers it once.
 */
export class Registration {
  constructor(
    private readonly deps: Pick<ReconcilerDeps, 'lifecycle' | 'sealer' | 'builds'>,
    private readonly events: BuildEvents,
  ) {}

  /** The Build's record: by the id its status names, or the one the API named it after. */
  async recordOf(resource: BuildResource): Promise<BuildEntity | undefined> {
    const id = resource.status?.buildId ?? apiBuildId(resource);
    return id === undefined ? undefined : this.deps.lifecycle.find(id);
  }

  /** Whether the Build had a record once: the API wrote it, or kiln registered it. */
  hadRecord(resource: BuildResource): boolean {
    return apiBuildId(resource) !== undefined || resource.status?.buildId !== undefined;
  }

  /** Its build was deleted through the API, which deletes the resource too (that failed). */
  async deleteOrphan(resource: BuildResource): Promise<void> {
    await this.deps.builds.delete(namespaceOf(resource), resource.metadata.name);
  }

  /**
   * Registers a Build applied without the API: its record (queued), an Event, and the record to
   * mirror. A Build kiln will not register throws RefusedBuild (InvalidSpec): credentials in its
   * repository URL, a project its tenant does not have, an active duplicate.
   */
  async register(resource: BuildResource): Promise<BuildEntity> {
    const read = buildSpecOf(resource);
    // Secret values a Build resource carries are stored sealed, as the API stores them.
    const spec =
      read.config.secrets === undefined
        ? read
        : {
            ...read,
            config: { ...read.config, secrets: this.deps.sealer.sealAll(read.config.secrets) },
          };
    const repository = read.source.repository;
    if (repository !== null && carriesCredentials(repository)) {
      throw new RefusedBuild(
        'InvalidSpec',
        `spec.source.repository ${credentialsInUrlProblem('the project’s git credentials (kiln project git-credentials)')}`,
      );
    }
    const uid = resource.metadata.uid ?? resource.metadata.name;
    await this.endReplaced(resource, uid);
    let created: BuildEntity;
    try {
      ({ build: created } = await this.deps.lifecycle.create({
        tenantId: resource.spec.tenantId,
        projectId: resource.spec.projectId,
        gitBranch: spec.source.branch,
        gitCommit: spec.source.commit,
        method: spec.form === 'reference' ? null : spec.method,
        config: {
          form: 'resource',
          namespace: namespaceOf(resource),
          name: resource.metadata.name,
          uid,
        },
        spec,
        specDigest: specDigest(spec, (value) => this.deps.sealer.fingerprint(value)),
        idempotencyKey: `kubernetes:${uid}`,
        requestHash: `kubernetes:${uid}`,
      }));
    } catch (error) {
      if (error instanceof NotFoundError) {
        throw new RefusedBuild(
          'InvalidSpec',
          `tenant ${resource.spec.tenantId} has no project ${resource.spec.projectId}`,
        );
      }
      if (error instanceof ConflictError) throw new RefusedBuild('InvalidSpec', error.message);
      throw error;
    }
    await this.events.emit(
      resource,
      'Normal',
      'Registered',
      `registered as build ${created.buildNumber} (${created.id})`,
    );
    return created;
  }

  /**
   * A Build deleted and re-created under its name while this operator did not see it (a watch
   * outage, or no operator running): the old object's build is still active, though nothing
   * will run it, and would refuse the new one as its duplicate. The uid tells them apart; the
   * old one is cancelled (its Job, owned by the old uid, goes with Kubernetes' garbage collector).
   */
  private async endReplaced(resource: BuildResource, uid: string): Promise<void> {
    const namespace = namespaceOf(resource);
    const name = resource.metadata.name;
    const { lifecycle } = this.deps;
    for (const old of await lifecycle.activeOfReplacedResource(namespace, name, uid)) {
      const reason = `the Build resource was deleted (${namespace}/${name} now names a new one)`;
      await transition(lifecycle, old, () => lifecycle.cancel(old.tenantId, old.id, reason));
      await this.events.emit(
        resource,
        'Normal',
        'Replaced',
        `cancelled build ${old.id}: ${reason}`,
      );
    }
  }
}

/** A Build the API wrote is named after its build id and labelled with it. */
function apiBuildId(resource: BuildResource): string | undefined {
  const label = resource.metadata.labels?.[KILN_LABELS.buildId];
  return label !== undefined && label === resource.metadata.name ? label : undefined;
}
