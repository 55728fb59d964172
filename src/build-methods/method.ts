import type { BuilderFormat } from '../manifest/formats.js';
import type { BuildSpec } from '../manifest/build-spec.js';
import type { Json } from '../manifest/fields.js';
import type { JobContext, JobTranslation, PodSecurityLevel } from './job.js';
import type { BuildConfig, Details, MethodName } from '../manifest/types.js';

/** A manifest as far as the rules every method shares have read it (values undefined if wrong). */
export interface ManifestDraft {
  readonly baseImage: string;
  readonly instructions: readonly string[];
  readonly config: Partial<BuildConfig>;
  /** `build_context` as sent, trimmed: kaniko tells an empty context from an absent one. */
  readonly contextGiven: string | undefined;
  /** Whether a full-reference tag or a default registry names the output repository. */
  readonly repositoryFromElsewhere: boolean;
}

/** A Dockerfile build's plan: what the local runner runs, and what kaniko's Job is made from. */
export interface DockerfilePlan {
  readonly kind: 'dockerfile';
  /** Inline Dockerfile content, or undefined to use the repository's own Dockerfile. */
  readonly dockerfile: string | undefined;
  /** Path of the Dockerfile in the repository when not inline. */
  readonly dockerfilePath: string;
  readonly buildArgs: Readonly<Record<string, string>>;
  readonly target: string | undefined;
  readonly platforms: readonly string[];
  /**
   * Whether the local runner may reuse and keep layers in the project's layer cache: on unless
   * the manifest says `cache: false` (docs/adr/0055-local-layer-cache.md). On Kubernetes, kaniko
   * and buildx read `cache` themselves (a registry cache, off unless `cache: true`).
   */
  readonly layerCache: boolean;
}

/** What the local runner does for one build (pure data, decided from the spec alone). */
export type LocalPlan =
  | DockerfilePlan
  | {
      readonly kind: 'pack';
      /** The builder image to run, after mapping the wizard's deprecated names. */
      readonly builder: string;
      readonly requestedBuilder: string;
      readonly buildpacks: readonly string[];
      readonly env: Readonly<Record<string, string>>;
    }
  | {
      readonly kind: 'packer';
      readonly template: string;
      /** JSON templates go to template.json, HCL2 to template.pkr.hcl (packer picks by name). */
      readonly templateFile: 'template.json' | 'template.pkr.hcl';
      readonly variables: Readonly<Record<string, string>>;
      /** The build's declared environment and build args: packer reads its environment. */
      readonly env: Readonly<Record<string, string>>;
    };

/**
 * Everything kiln knows about one build method, in one file per method (`<method>.ts`) and one
 * table (`methods.ts`): its manifest rules, its local plan and, with the operator, its Job.
 * Code outside that table never switches on a method name.
 */
export interface BuildMethod {
  readonly name: MethodName;
  /**
   * The Pod Security level its pods need (its file's `POD_SECURITY_LEVEL`): a build runs in a
   * namespace that admits it (namespaces.ts).
   */
  readonly podSecurityLevel: PodSecurityLevel;
  /** How the builder container's lines read (LogSink's parser picks levels and steps by it). */
  readonly logFormat: BuilderFormat;
  /** build_config fields only this method accepts; other methods refuse them when set. */
  readonly exclusiveFields: ReadonlyArray<keyof BuildConfig>;
  /** Reads and checks the exclusive fields (called only for this method). */
  readExclusiveFields(config: Json, path: string, details: Details): Partial<BuildConfig>;
  /** This method's own rules (the wizard's), after the shared ones; problems go to `details`. */
  check(draft: ManifestDraft, details: Details): void;
  /**
   * Rules that need asynchronous work (packer: parsing an HCL2 template), run after `check` by
   * `validateManifestAsync`, the API's entry point; the synchronous `validateManifest` skips them.
   */
  checkAsync?(draft: ManifestDraft, details: Details): Promise<void>;
  /** What the local runner runs for a build of this method (pure). */
  localPlan(spec: BuildSpec): LocalPlan;
  /**
   * The Job (and ConfigMap) that runs a build of this method on Kubernetes (pure; ADR 0014), or
   * why it cannot run there. The reconciler adds ownerReferences and, after the logs are stored,
   * `ttlSecondsAfterFinished`.
   */
  jobSpec(spec: BuildSpec, context: JobContext): JobTranslation;
}

/** For methods that own no exclusive field. */
export const NO_EXCLUSIVE_FIELDS = {
  exclusiveFields: [] as ReadonlyArray<keyof BuildConfig>,
  readExclusiveFields: (): Partial<BuildConfig> => ({}),
};

/** A Dockerfile build (kaniko, buildx, container on this machine: buildah). */
export function dockerfilePlan(
  spec: BuildSpec,
  dockerfile: string | undefined,
  buildArgs: Readonly<Record<string, string>>,
): DockerfilePlan {
  return {
    kind: 'dockerfile',
    dockerfile,
    dockerfilePath: 'Dockerfile',
    buildArgs,
    target: spec.config.target,
    platforms: spec.config.platforms ?? [],
    layerCache: spec.config.cache !== false,
  };
}

/** Blank text counts as not given for the methods' "is required" rules. */
export function blank(text: string | undefined): boolean {
  return text === undefined || text.trim() === '';
}
