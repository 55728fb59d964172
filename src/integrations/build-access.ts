import type { BuildSpec } from '../manifest/build-spec.js';
import { pushTargets } from '../manifest/build-spec.js';
import type { RegistryType } from '../manifest/types.js';
import type { FailureReason } from '../manifest/failure-reasons.js';
import {
  ImageReferenceError,
  repositoryProblem,
  splitImageReference,
} from '../registries/naming.js';
import {
  type OciRegistryType,
  type RegistryCredentials,
  type RegistryPreflight,
  RegistryUnauthorizedError,
  RegistryUnavailableError,
} from '../registries/registry.js';
import type {
  OciRegistrySettings,
  RegistrySettingsByType,
  S3RegistrySettings,
} from '../registries/settings.js';
import { isSecretReference } from '../manifest/secret-reference.js';
import type { Resolution } from '../secret-managers/secret-resolver.js';
import type { SecretSealer } from '../secrets/secret-sealer.js';

/** Where a tenant's registry settings come from (IntegrationsService). */
export interface RegistrySettingsSource {
  registry<T extends RegistryType>(
    tenantId: string,
    type: T,
  ): Promise<RegistrySettingsByType[T] | undefined>;
}

/** What resolves references (SecretResolver). */
export interface ReferenceResolver {
  resolve(
    tenantId: string,
    fields: Readonly<Record<string, string>>,
    signal?: AbortSignal,
  ): Promise<Resolution>;
}

/** Where a project's git credentials come from (ProjectsRepository). */
export interface GitCredentialsSource {
  findInTenant(
    tenantId: string,
    projectId: string,
  ): Promise<{ gitCredentials: { username: string; password: string } | null } | undefined>;
}

export interface BuildAccessDeps {
  readonly registries: RegistrySettingsSource;
  readonly projects: GitCredentialsSource;
  readonly resolver: ReferenceResolver;
  /** The pre-flight check of an S3 target: the bucket exists and the keys may use it. */
  readonly checkBucket: (target: S3ImageTarget, signal?: AbortSignal) => Promise<void>;
  /** The pre-flight check of each OCI registry type (OciRegistryPreflight). */
  readonly preflight: (type: OciRegistryType) => RegistryPreflight;
  readonly sealer: SecretSealer;
}

/** The build being started, as far as access goes. */
export interface BuildToStart {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly buildNumber: number;
  readonly spec: BuildSpec;
}

/** Where an `s3` build's image goes. */
export interface S3ImageTarget {
  readonly bucket: string;
  readonly prefix?: string;
  readonly region: string;
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/**
 * The log masker of the build being prepared (LogSink, for this build). BuildAccess registers every
 * value before the first call that could echo it, and masks what it reports with it.
 */
export interface BuildMasking {
  register(values: readonly string[]): void;
  mask(text: string): string;
}

/** What a starting build's Job gets, every value resolved; held in memory only. */
export interface BuildAccessGrant {
  readonly ok: true;
  /** buildx secrets by id. */
  readonly secrets: Readonly<Record<string, string>>;
  /** Environment entries that were references, by name (plain ones stay in the spec). */
  readonly env: Readonly<Record<string, string>>;
  /** A Docker config.json for the tenant's registry, when it has credentials. */
  readonly dockerConfig?: string;
  /** What the checkout clones with, when the project has git credentials. */
  readonly git?: { readonly username: string; readonly password: string };
  /**
   * `registry_type: s3`: where the image's OCI layout goes (the tenant's settings, keys resolved;
   * no keys: the build's own identity, e.g. IRSA on its service account).
   */
  readonly s3?: S3ImageTarget;
  /** Lines for the build log (`[kiln] …`), masked. */
  readonly notes: readonly string[];
}

export interface BuildAccessRefusal {
  readonly ok: false;
  readonly reason: Extract<
    FailureReason,
    'SecretUnavailable' | 'RegistryUnauthorized' | 'InvalidSpec'
  >;
  readonly message: string;
}

const OCI_TYPES: ReadonlySet<RegistryType> = new Set(['harbor', 'quay', 'artifactory']);

/**
 * Prepares what a build needs from outside kiln when it starts, shared by the operator and the
 * local runner (docs/adr/0021-secret-references.md, 0022-registries.md):
 *
 * 1. every reference among its buildx secrets, environment, the tenant's registry credentials and
 *    the project's git credentials resolved through the tenant's secret manager (failure:
 *    SecretUnavailable, naming the field and the reference);
 * 2. its push targets on the tenant's registry checked against that registry's naming rules
 *    (InvalidSpec) and by the pre-flight token flow (RegistryUnauthorized), so bad credentials
 *    fail before a pod is scheduled. A registry that cannot be reached is no verdict: the build
 *    goes on with a note, and fails at push if it is still down.
 */
export class BuildAccess {
  constructor(private readonly deps: BuildAccessDeps) {}

  /**
   * Every value that must never show (build secrets, resolved references, the registry password,
   * its `user:password` pair and that pair's base64, S3 keys, the git password) is registered
   * with `masking` before the first outside call that could echo it: plain values before the
   * secret manager is asked, resolved ones before the registry or bucket pre-flight. What this
   * reports (a refusal's message, notes) is masked with it and carries no URL credentials.
   */
  async prepare(
    build: BuildToStart,
    masking: BuildMasking,
    signal?: AbortSignal,
  ): Promise<BuildAccessGrant | BuildAccessRefusal> {
    const prepared = await this.prepareUnmasked(build, masking, signal);
    if (!prepared.ok) return { ...prepared, message: masking.mask(prepared.message) };
    return { ...prepared, notes: prepared.notes.map((note) => masking.mask(note)) };
  }

  private async prepareUnmasked(
    build: BuildToStart,
    masking: BuildMasking,
    signal: AbortSignal | undefined,
  ): Promise<BuildAccessGrant | BuildAccessRefusal> {
    const found = await this.referenceFields(build);
    if ('reason' in found) return found;
    const { secrets, fields, registryType, registry, s3, git } = found;
    // buildx secrets are secret whether or not they are references; a plain registry, S3 or git
    // password cannot be (settings refuse it), and user names are not secrets.
    masking.register(
      Object.values(secrets).filter((value) => value !== '' && !isSecretReference(value)),
    );
    const resolution = await this.deps.resolver.resolve(build.tenantId, fields, signal);
    if (!resolution.ok) {
      return { ok: false, reason: 'SecretUnavailable', message: resolution.message };
    }
    const values = resolution.values;
    const masked = new MaskQueue(masking);
    const resolvedSecrets: Record<string, string> = {};
    for (const id of Object.keys(secrets)) {
      resolvedSecrets[id] = values[`manifest.build_config.secrets.${id}`]!;
      masked.add(resolvedSecrets[id]);
    }
    const env: Record<string, string> = {};
    for (const name of Object.keys(build.spec.env)) {
      const value = values[`manifest.environment.${name}`];
      if (value === undefined) continue;
      env[name] = value;
      masked.add(value);
    }

    const gitAccess =
      git === undefined
        ? undefined
        : {
            username: values['project.git_credentials.username']!,
            password: values['project.git_credentials.password']!,
          };
    if (gitAccess !== undefined) masked.add(gitAccess.password);

    const notes: string[] = [];
    let dockerConfig: string | undefined;
    if (registry !== undefined && registryType !== undefined && registryType !== 's3') {
      const checked = await this.registryAccess(
        build,
        registryType,
        registry,
        values,
        masked,
        signal,
      );
      if ('reason' in checked) return checked;
      dockerConfig = checked.dockerConfig;
      notes.push(...checked.notes);
    }
    let s3Target: S3ImageTarget | undefined;
    if (s3 !== undefined) {
      const checked = await this.s3Access(s3, values, masked, signal);
      if ('reason' in checked) return checked;
      s3Target = checked.target;
      notes.push(...checked.notes);
    }
    masked.flush();
    return {
      ok: true,
      ...(s3Target === undefined ? {} : { s3: s3Target }),
      secrets: resolvedSecrets,
      env,
      ...(dockerConfig === undefined ? {} : { dockerConfig }),
      ...(gitAccess === undefined ? {} : { git: gitAccess }),
      notes,
    };
  }

  /**
   * How kiln itself reaches `host` for a build after it ran (attaching its signed provenance):
   * the tenant's credentials when `host` is the address of the build's registry, resolved as at
   * start, and whether that registry speaks plain HTTP; nothing for any other host (anonymous).
   * A refusal says which reference failed, never a value.
   */
  async registryLogin(
    build: Pick<BuildToStart, 'tenantId' | 'spec'>,
    host: string,
    signal?: AbortSignal,
  ): Promise<
    | { ok: true; credentials?: RegistryCredentials; insecure: boolean }
    | { ok: false; message: string }
  > {
    const registryType = build.spec.output.registryType ?? undefined;
    if (registryType === undefined || !OCI_TYPES.has(registryType)) {
      return { ok: true, insecure: false };
    }
    const registry = (await this.deps.registries.registry(build.tenantId, registryType)) as
      OciRegistrySettings | undefined;
    if (registry === undefined || registry.address !== host) return { ok: true, insecure: false };
    const insecure = registry.insecure === true;
    if (registry.username === undefined || registry.password === undefined) {
      return { ok: true, insecure };
    }
    const fields = {
      [`registry.${registryType}.username`]: registry.username,
      [`registry.${registryType}.password`]: registry.password,
    };
    const resolution = await this.deps.resolver.resolve(build.tenantId, fields, signal);
    if (!resolution.ok) return { ok: false, message: resolution.message };
    return {
      ok: true,
      insecure,
      credentials: {
        username: resolution.values[`registry.${registryType}.username`]!,
        password: resolution.values[`registry.${registryType}.password`]!,
      },
    };
  }

  /**
   * What the secret manager is asked to resolve, by field name (every buildx secret, environment
   * references, the registry's, S3's and git's credentials), with the settings they came from.
   */
  private async referenceFields(build: BuildToStart): Promise<
    | BuildAccessRefusal
    | {
        secrets: Record<string, string>;
        fields: Record<string, string>;
        registryType: RegistryType | undefined;
        registry: OciRegistrySettings | undefined;
        s3: S3RegistrySettings | undefined;
        git: { username: string; password: string } | undefined;
      }
  > {
    const { config } = build.spec;
    const secrets = this.deps.sealer.unsealAll(config.secrets ?? {});
    const fields: Record<string, string> = {};
    for (const [id, value] of Object.entries(secrets)) {
      fields[`manifest.build_config.secrets.${id}`] = value;
    }
    for (const [name, value] of Object.entries(build.spec.env)) {
      if (isSecretReference(value)) fields[`manifest.environment.${name}`] = value;
    }
    const registryType = build.spec.output.registryType ?? undefined;
    const registry =
      registryType !== undefined && OCI_TYPES.has(registryType)
        ? ((await this.deps.registries.registry(build.tenantId, registryType)) as
            OciRegistrySettings | undefined)
        : undefined;
    if (registry?.username !== undefined && registry.password !== undefined) {
      fields[`registry.${registryType}.username`] = registry.username;
      fields[`registry.${registryType}.password`] = registry.password;
    }
    const s3: S3RegistrySettings | undefined =
      registryType === 's3' ? await this.deps.registries.registry(build.tenantId, 's3') : undefined;
    if (registryType === 's3' && s3 === undefined) {
      return {
        ok: false,
        reason: 'InvalidSpec',
        message:
          'registry_type s3 needs the tenant’s S3 settings (a tenant admin sets them: kiln settings registry set s3, or PUT /api/v1/settings/registries/s3)',
      };
    }
    if (s3?.accessKeyId !== undefined && s3.secretAccessKey !== undefined) {
      fields['registry.s3.accessKeyId'] = s3.accessKeyId;
      fields['registry.s3.secretAccessKey'] = s3.secretAccessKey;
    }

    const project =
      build.spec.source.repository === null
        ? undefined
        : await this.deps.projects.findInTenant(build.tenantId, build.projectId);
    const git = project?.gitCredentials ?? undefined;
    if (git !== undefined) {
      fields['project.git_credentials.username'] = git.username;
      fields['project.git_credentials.password'] = git.password;
    }
    return { secrets, fields, registryType, registry, s3, git };
  }

  /**
   * The Docker config of the tenant's OCI registry (when it has credentials, masked in every
   * form before the pre-flight), and the pre-flight check of the build's push targets.
   */
  private async registryAccess(
    build: BuildToStart,
    registryType: OciRegistryType,
    registry: OciRegistrySettings,
    values: Readonly<Record<string, string>>,
    masked: MaskQueue,
    signal: AbortSignal | undefined,
  ): Promise<BuildAccessRefusal | { dockerConfig: string | undefined; notes: string[] }> {
    let credentials: RegistryCredentials | undefined;
    let dockerConfig: string | undefined;
    if (registry.username !== undefined) {
      credentials = {
        username: values[`registry.${registryType}.username`]!,
        password: values[`registry.${registryType}.password`]!,
      };
      const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString(
        'base64',
      );
      dockerConfig = JSON.stringify({ auths: { [registry.address]: { auth } } });
      masked.add(credentials.password);
      masked.add(`${credentials.username}:${credentials.password}`);
      masked.add(auth);
    }
    masked.flush();
    const checked = await this.checkTargets(build, registryType, registry, credentials, signal);
    if ('reason' in checked) return checked;
    return { dockerConfig, notes: checked.notes };
  }

  /** Where an s3 build's image goes, keys resolved and masked, checked when there are keys. */
  private async s3Access(
    s3: S3RegistrySettings,
    values: Readonly<Record<string, string>>,
    masked: MaskQueue,
    signal: AbortSignal | undefined,
  ): Promise<BuildAccessRefusal | { target: S3ImageTarget; notes: string[] }> {
    const { accessKeyId, secretAccessKey, ...where } = s3;
    const keys =
      accessKeyId === undefined || secretAccessKey === undefined
        ? undefined
        : {
            accessKeyId: values['registry.s3.accessKeyId']!,
            secretAccessKey: values['registry.s3.secretAccessKey']!,
          };
    if (keys !== undefined) masked.add(keys.secretAccessKey).add(keys.accessKeyId);
    masked.flush();
    const target: S3ImageTarget = {
      ...where,
      ...(keys === undefined ? {} : { credentials: keys }),
    };
    // With keys, kiln can ask as the build will; without, the build's pod has its own identity.
    if (keys === undefined) return { target, notes: [] };
    const checked = await this.checkBucket(target, signal);
    if (checked !== undefined && 'reason' in checked) return checked;
    return { target, notes: checked === undefined ? [] : [checked.note] };
  }

  private async checkBucket(
    target: S3ImageTarget,
    signal: AbortSignal | undefined,
  ): Promise<BuildAccessRefusal | { note: string } | undefined> {
    try {
      await this.deps.checkBucket(target, signal);
      return undefined;
    } catch (error) {
      if (error instanceof RegistryUnauthorizedError) {
        return { ok: false, reason: 'RegistryUnauthorized', message: error.message };
      }
      if (error instanceof RegistryUnavailableError) {
        return {
          note: `the pre-flight check of s3://${target.bucket} could not reach S3 (${error.message}); the build goes on`,
        };
      }
      throw error;
    }
  }

  /** The build's push targets on the tenant's registry: named by its rules, and pushable. */
  private async checkTargets(
    build: BuildToStart,
    type: OciRegistryType,
    registry: OciRegistrySettings,
    credentials: RegistryCredentials | undefined,
    signal: AbortSignal | undefined,
  ): Promise<BuildAccessRefusal | { notes: string[] }> {
    const repositories = new Set<string>();
    for (const target of pushTargets(build.spec.output, build.buildNumber)) {
      let reference;
      try {
        reference = splitImageReference(target);
      } catch (error) {
        if (error instanceof ImageReferenceError) {
          return { ok: false, reason: 'InvalidSpec', message: error.message };
        }
        throw error;
      }
      if (reference.host !== registry.address) continue;
      const problem = repositoryProblem(type, reference.path);
      if (problem !== undefined) {
        return { ok: false, reason: 'InvalidSpec', message: `${target}: ${problem}` };
      }
      repositories.add(reference.path);
    }
    const notes: string[] = [];
    for (const path of repositories) {
      const repository = { host: registry.address, path };
      try {
        await this.deps.preflight(type).checkPush(repository, credentials, {
          insecure: registry.insecure === true,
          ...(signal === undefined ? {} : { signal }),
        });
      } catch (error) {
        if (error instanceof RegistryUnauthorizedError) {
          return { ok: false, reason: 'RegistryUnauthorized', message: error.message };
        }
        if (error instanceof RegistryUnavailableError) {
          notes.push(
            `the pre-flight check of ${registry.address}/${path} could not reach the registry (${error.message}); the build goes on and pushes when it is done`,
          );
          continue;
        }
        throw error;
      }
    }
    return { notes };
  }
}

/**
 * Values to mask, registered with the build's masker in batches: `flush` before each outside call
 * that could echo one registers those added since the last flush, in the order added.
 */
class MaskQueue {
  private readonly values = new Set<string>();
  private readonly registered = new Set<string>();

  constructor(private readonly masking: BuildMasking) {}

  add(value: string): this {
    this.values.add(value);
    return this;
  }

  flush(): void {
    const fresh = [...this.values].filter((value) => value !== '' && !this.registered.has(value));
    for (const value of fresh) this.registered.add(value);
    if (fresh.length > 0) this.masking.register(fresh);
  }
}
