import type { V1Job, V1OwnerReference, V1Secret } from '@kubernetes/client-node';
import {
  BUILD_SECRET_PREFIX,
  buildObjectName,
  ENV_SECRET_PREFIX,
  GIT_CREDENTIAL_KEYS,
  REGISTRY_CONFIG_KEY,
  S3_CREDENTIAL_KEYS,
  type S3UploadTarget,
} from '../../build-methods/job.js';
import { BUILD_METHODS } from '../../build-methods/methods.js';
import { placementProblem } from '../../build-methods/namespaces.js';
import { UPLOAD_TOKEN_PREFIX } from '../../build-methods/steps.js';
import type { BuildAccessGrant } from '../../integrations/build-access.js';
import { KubeApiError } from '../../kubernetes/errors.js';
import type { BuildEntity } from '../../lifecycle/build.entity.js';
import { BUILD_API_VERSION, BUILD_KIND, type BuildResource } from '../api/build-resource.js';
import type { BuildEvents } from './build-events.js';
import { KUEUE_QUEUE_LABEL, namespaceOf, type ReconcilerDeps } from './reconciler-ports.js';
import { RefusedBuild } from './refused-build.js';
import type { SecretMasking } from './secret-masking.js';

/**
 * What `assemble` made: the Job as the server answered its create; `exists` when a Job of that
 * name was there already (the cache has not caught up: look again); `gone` when the build was
 * deleted meanwhile.
 */
export type Assembled = V1Job | 'exists' | 'gone';

type AssemblerDeps = Pick<
  ReconcilerDeps,
  'access' | 'artifacts' | 'sink' | 'workloads' | 'settings'
>;

/**
 * Makes a running build's Job and what it mounts, in the Build's namespace when that namespace's
 * Pod Security level admits the method's pods: its access prepared (secret references
 * resolved, the registry checked), the method's pure `jobSpec` translation, its ConfigMap, its
 * Secret holding exactly the keys the Job reads, and the Job itself with a controller
 * ownerReference to the Build. The Job then becomes the controller of the ConfigMap and the
 * Secret, so they go with it. A build it cannot assemble throws RefusedBuild.
 */
export class JobAssembler {
  /**
   * Builds whose ConfigMap and Secret this process saw its Job control. Only spares the requests
   * of `own` on every reconcile: a new process checks each Job again (one read of its Secret).
   */
  private readonly owned = new Set<string>();

  constructor(
    private readonly deps: AssemblerDeps,
    private readonly events: BuildEvents,
    private readonly masking: SecretMasking,
  ) {}

  async assemble(
    resource: BuildResource,
    record: BuildEntity,
    /** A write of the caller's made with the Job's own (the Build's status naming it). */
    alongside: () => Promise<void> = () => Promise.resolve(),
  ): Promise<Assembled> {
    const namespace = namespaceOf(resource);
    const name = buildObjectName(record.id);
    // The Job, its pod and Secret live in the Build's namespace (owner references cannot cross
    // namespaces): one whose Pod Security level would refuse the pod gets nothing, not even access.
    const misplaced = placementProblem(
      this.deps.settings.namespaces,
      namespace,
      record.spec.method,
    );
    if (misplaced !== undefined) throw new RefusedBuild('InvalidSpec', misplaced);
    // Every value is registered for masking before the first call that could echo it, and before
    // any line of the pod is read.
    const access = await this.deps.access.prepare(record, this.deps.sink.masking(record.id));
    if (!access.ok) throw new RefusedBuild(access.reason, access.message);
    const credentialsSecret =
      access.dockerConfig !== undefined ? name : resource.spec.output?.credentialsSecret;
    const translation = BUILD_METHODS[record.spec.method].jobSpec(record.spec, {
      buildId: record.id,
      tenantId: record.tenantId,
      projectId: record.projectId,
      buildNumber: record.buildNumber,
      namespace,
      settings: this.deps.settings.job,
      configMapName: name,
      buildSecretName: name,
      ...(credentialsSecret === undefined ? {} : { credentialsSecret }),
      ...(access.git === undefined ? {} : { gitCredentials: true }),
      ...(access.s3 === undefined ? {} : { s3: s3TargetOf(access.s3) }),
    });
    if (translation.kind === 'unsupported')
      throw new RefusedBuild('InvalidSpec', translation.reason);
    if (translation.configMap !== undefined) {
      await ignoreExists(this.deps.workloads.createConfigMap(namespace, translation.configMap));
    }
    const secretKeys = translation.secretKeys ?? [];
    if (secretKeys.length > 0) {
      const secret = await this.buildSecret(record, secretKeys, translation.job, access);
      if (secret === undefined) return 'gone';
      await ignoreExists(this.deps.workloads.createSecret(namespace, secret));
    }
    // BuildAccess registered the values it resolved, and buildSecret the tokens it minted: what
    // the pod is given is masked, and need not be read back from the Secret.
    this.masking.registered(record.id);
    const { kueue } = this.deps.settings;
    const job: V1Job = {
      ...translation.job,
      metadata: { ...translation.job.metadata, ownerReferences: [ownerOf(resource)] },
    };
    if (kueue !== undefined) {
      // Kueue admits it: created suspended in the tenant's LocalQueue, unsuspended by Kueue, and
      // its activeDeadlineSeconds counts from then.
      job.metadata = {
        ...job.metadata,
        labels: {
          ...job.metadata?.labels,
          [KUEUE_QUEUE_LABEL]: kueue.localQueues[record.tenantId] ?? kueue.localQueue,
        },
      };
      job.spec = { ...job.spec!, suspend: true };
    }
    let created: V1Job;
    try {
      created = await this.deps.workloads.createJob(namespace, job);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 409) return 'exists';
      throw error;
    }
    const notes = [...access.notes, ...translation.notes];
    // The notes, the Event, the ownership and the caller's write at once: this reconcile holds
    // the Build's key until they are written, and the pod's first changes (its log followed) wait
    // behind it. Each is written once whatever the others do: a failure is retried by adopting
    // the Job, which writes neither notes nor Event again. This process knows whether it made a
    // Secret: no read.
    const written = await Promise.allSettled([
      notes.length === 0
        ? Promise.resolve()
        : this.deps.sink.append(
            record.id,
            notes.map((text) => ({ text: `[kiln] ${text}`, container: 'kiln' })),
          ),
      this.events.emit(resource, 'Normal', 'JobCreated', `created Job ${name}`),
      this.own(namespace, record.id, created, secretKeys.length > 0 ? 'made' : 'none'),
      alongside(),
    ]);
    const failed = written.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    return created;
  }

  /**
   * Makes the Job the controller of the build's ConfigMap and Secret, so that Kubernetes deletes
   * them with it. Decided from the cluster, not from what this process did, so that an operator
   * adopting the Job completes what another left undone: the ConfigMap the Job mounts is patched
   * (the patch is idempotent, and the operator may not read ConfigMaps); the Secret, whichever
   * keys it holds, is read and patched unless the Job already controls it. A failure throws: the
   * reconcile is retried with backoff and adopts the Job. `secret` is what the caller knows of
   * the Secret: it just `made` one (patched without a read) or the Job mounts `none`.
   */
  async own(
    namespace: string,
    buildId: string,
    job: V1Job,
    secret: 'made' | 'none' | 'unknown' = 'unknown',
  ): Promise<void> {
    if (this.owned.has(buildId)) return;
    const name = job.metadata?.name;
    const uid = job.metadata?.uid;
    if (name === undefined || uid === undefined) return;
    const patch = {
      metadata: {
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'Job',
            name,
            uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    };
    if (mountsConfigMap(job, name)) {
      await ignoreMissing(this.deps.workloads.patchConfigMap(namespace, name, patch));
    }
    if (secret === 'made') {
      await ignoreMissing(this.deps.workloads.patchSecret(namespace, name, patch));
    } else if (secret === 'unknown') {
      const found = await this.deps.workloads.readSecret(namespace, name);
      const controller = found?.metadata?.ownerReferences?.find((o) => o.controller === true);
      if (found !== undefined && controller?.uid !== uid) {
        await ignoreMissing(this.deps.workloads.patchSecret(namespace, name, patch));
      }
    }
    this.owned.add(buildId);
  }

  forget(buildId: string): void {
    this.owned.delete(buildId);
  }

  /**
   * The build's Secret (named as its Job): the keys its Job reads, no more. Upload tokens are
   * minted now, valid until the Job's deadline (activeDeadlineSeconds counts from about now);
   * buildx secret values come from the build's spec. Made before the Job, owned by it after, so it
   * goes with it. Undefined when the build is gone.
   */
  private async buildSecret(
    record: BuildEntity,
    keys: readonly string[],
    job: V1Job,
    access: BuildAccessGrant,
  ): Promise<V1Secret | undefined> {
    const data: Record<string, string> = {};
    let tokens: Record<'sbom' | 'scan', string> | undefined;
    if (keys.some((key) => key.startsWith(UPLOAD_TOKEN_PREFIX))) {
      // With Kueue the Job may wait suspended first: the tokens outlive the longest wait too.
      const waits = this.deps.settings.kueue?.queueTtlSeconds ?? 0;
      tokens = await this.deps.artifacts.mintUploadTokens(
        record.id,
        record.spec.timeoutSeconds + waits,
      );
      if (tokens === undefined) return undefined;
      // A step that prints its upload token (a shell's trace) must not show it.
      this.deps.sink.registerSecrets(record.id, [tokens.sbom, tokens.scan]);
    }
    for (const key of keys) {
      const value = secretValueOf(key, access, tokens);
      if (value === undefined)
        throw new Error(`the Job of build ${record.id} reads an unknown Secret key ${key}`);
      data[key] = Buffer.from(value, 'utf8').toString('base64');
    }
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      immutable: true,
      metadata: {
        name: buildObjectName(record.id),
        namespace: job.metadata?.namespace,
        labels: { ...job.metadata?.labels },
      },
      data,
    };
  }
}

/** The uid of another Build that controls the Job; undefined when it is this one's (or no one's). */
export function foreignController(job: V1Job, resource: BuildResource): string | undefined {
  const owner = job.metadata?.ownerReferences?.find((o) => o.controller === true);
  return owner !== undefined && owner.uid !== resource.metadata.uid ? owner.uid : undefined;
}

/** The ownerReference that makes a Build the controller of its Job. */
export function ownerOf(resource: BuildResource): V1OwnerReference {
  return {
    apiVersion: BUILD_API_VERSION,
    kind: BUILD_KIND,
    name: resource.metadata.name,
    uid: resource.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

async function ignoreExists(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 409)) throw error;
  }
}

/** A write to an object deleted meanwhile (its Job gone, the garbage collector took it): done. */
async function ignoreMissing(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!(error instanceof KubeApiError && error.status === 404)) throw error;
  }
}

/** The value of one key of a build's Secret: a token, a resolved secret or credential. */
function secretValueOf(
  key: string,
  access: BuildAccessGrant,
  tokens: Record<'sbom' | 'scan', string> | undefined,
): string | undefined {
  if (key.startsWith(UPLOAD_TOKEN_PREFIX)) {
    return tokens?.[key.slice(UPLOAD_TOKEN_PREFIX.length) as 'sbom' | 'scan'];
  }
  if (key.startsWith(BUILD_SECRET_PREFIX)) {
    return access.secrets[key.slice(BUILD_SECRET_PREFIX.length)];
  }
  if (key.startsWith(ENV_SECRET_PREFIX)) {
    return access.env[key.slice(ENV_SECRET_PREFIX.length)];
  }
  switch (key) {
    case REGISTRY_CONFIG_KEY:
      return access.dockerConfig;
    case GIT_CREDENTIAL_KEYS.username:
      return access.git?.username;
    case GIT_CREDENTIAL_KEYS.password:
      return access.git?.password;
    case S3_CREDENTIAL_KEYS.accessKeyId:
      return access.s3?.credentials?.accessKeyId;
    case S3_CREDENTIAL_KEYS.secretAccessKey:
      return access.s3?.credentials?.secretAccessKey;
    default:
      return undefined;
  }
}

/** What the Job learns of an s3 build's target: everything but the keys, which stay in its Secret. */
function s3TargetOf(target: NonNullable<BuildAccessGrant['s3']>): S3UploadTarget {
  const { credentials, ...where } = target;
  return { ...where, credentials: credentials !== undefined };
}

/** Whether the Job's pod mounts the ConfigMap `name` (the build's files). */
function mountsConfigMap(job: V1Job, name: string): boolean {
  return (job.spec?.template.spec?.volumes ?? []).some((volume) => volume.configMap?.name === name);
}
