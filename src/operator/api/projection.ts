/*
 * BuildSpec ⇄ Build resource (docs/adr/0012-build-crd.md). The BuildSpec stored with a build is
 * the source; the resource's spec is its projection. A Build applied with kubectl is read back
 * with buildSpecOf. Pure: no I/O, and neither direction shares objects with its input.
 */
import type { BuildSpec } from '../../manifest/build-spec.js';
import {
  BUILD_API_VERSION,
  BUILD_KIND,
  BUILD_SPEC_DEFAULTS,
  buildLabels,
  type BuildResource,
  type BuildResourceOutput,
  type BuildResourceSource,
} from './build-resource.js';

/** What a build contributes to its resource: identity and the spec captured at create. */
export interface ProjectedBuild {
  readonly id: string;
  readonly tenantId: string;
  readonly projectId: string;
  readonly spec: BuildSpec;
}

export interface ProjectionOptions {
  /** True while the build is queued: the operator creates no Job until it is false. */
  readonly suspend: boolean;
  /** The Secret holding the registry credentials, in the Build's namespace. */
  readonly credentialsSecret?: string;
}

/**
 * The Build resource of a build: named after the build id, labelled with kiln's labels, its spec
 * the BuildSpec projected (nulls left out: the CRD has none). Secret values (buildx
 * `config.secrets`) are left out too: anyone who may read Builds would read them; the operator
 * takes them from the spec stored in kiln's database.
 */
export function buildResourceFor(
  build: ProjectedBuild,
  namespace: string,
  options: ProjectionOptions,
): BuildResource {
  const { spec } = build;
  const source: BuildResourceSource = { context: spec.source.context };
  if (spec.source.repository !== null) source.repository = spec.source.repository;
  if (spec.source.branch !== null) source.branch = spec.source.branch;
  if (spec.source.commit !== null) source.commit = spec.source.commit;
  const output: BuildResourceOutput = { tags: [...spec.output.tags] };
  if (spec.output.repository !== null) output.image = spec.output.repository;
  if (spec.output.registryType !== null) output.registry = spec.output.registryType;
  if (options.credentialsSecret !== undefined) output.credentialsSecret = options.credentialsSecret;
  return {
    apiVersion: BUILD_API_VERSION,
    kind: BUILD_KIND,
    metadata: { name: build.id, namespace, labels: buildLabels(build) },
    spec: {
      tenantId: build.tenantId,
      projectId: build.projectId,
      form: spec.form,
      method: spec.method,
      source,
      config: withoutSecrets(structuredClone(spec.config)),
      output,
      ...(spec.sbomTool === null ? {} : { sbomTool: spec.sbomTool }),
      ...(spec.scanTool === null ? {} : { scanTool: spec.scanTool }),
      ...(spec.scanPolicy === null || spec.scanPolicy === undefined
        ? {}
        : {
            scanPolicy: {
              ...(spec.scanPolicy.fail_on === undefined ? {} : { failOn: spec.scanPolicy.fail_on }),
              ...(spec.scanPolicy.ignore === undefined
                ? {}
                : { ignore: [...spec.scanPolicy.ignore] }),
            },
          }),
      ...(spec.secretManager === null ? {} : { secretManager: spec.secretManager }),
      env: { ...spec.env },
      buildArgs: { ...spec.buildArgs },
      timeoutSeconds: spec.timeoutSeconds,
      suspend: options.suspend,
    },
  };
}

/**
 * The BuildSpec a Build resource describes, with the CRD's defaults filled in where the resource
 * leaves fields out (a Build applied with kubectl, or read before the server defaulted it).
 */
export function buildSpecOf(resource: Pick<BuildResource, 'spec'>): BuildSpec {
  const { spec } = resource;
  return {
    version: 1,
    form: spec.form ?? BUILD_SPEC_DEFAULTS.form,
    method: spec.method,
    config: structuredClone(spec.config ?? {}),
    source: {
      repository: spec.source?.repository ?? null,
      branch: spec.source?.branch ?? null,
      commit: spec.source?.commit ?? null,
      context: spec.source?.context ?? BUILD_SPEC_DEFAULTS.source.context,
    },
    output: {
      repository: spec.output?.image ?? null,
      tags: [...(spec.output?.tags ?? [])],
      registryType: spec.output?.registry ?? null,
    },
    sbomTool: spec.sbomTool ?? null,
    scanTool: spec.scanTool ?? null,
    scanPolicy:
      spec.scanPolicy === undefined
        ? null
        : {
            ...(spec.scanPolicy.failOn === undefined ? {} : { fail_on: spec.scanPolicy.failOn }),
            ...(spec.scanPolicy.ignore === undefined
              ? {}
              : { ignore: [...spec.scanPolicy.ignore] }),
          },
    secretManager: spec.secretManager ?? null,
    env: { ...spec.env },
    buildArgs: { ...spec.buildArgs },
    timeoutSeconds: spec.timeoutSeconds ?? BUILD_SPEC_DEFAULTS.timeoutSeconds,
  };
}

function withoutSecrets<T extends { secrets?: unknown }>(config: T): T {
  delete config.secrets;
  return config;
}
