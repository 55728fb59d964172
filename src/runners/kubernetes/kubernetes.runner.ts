import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { InvalidRequestError, UnavailableError } from '../../common/errors.js';
import { LOGGER } from '../../common/logger.js';
import { KilnConfig } from '../../config/config.js';
import { CustomResources } from '../../kubernetes/custom-resources.js';
import { KubeApiError, KubeUnavailableError } from '../../kubernetes/errors.js';
import { KubeClient } from '../../kubernetes/kube-client.js';
import {
  BUILD_GROUP,
  BUILD_PLURAL,
  BUILD_VERSION,
  type BuildResource,
  LOGS_FINALIZER,
} from '../../operator/api/build-resource.js';
import {
  buildNamespacesOf,
  namespaceOfMethod,
  type NamespacesByLevel,
} from '../../build-methods/namespaces.js';
import { buildResourceFor } from '../../operator/api/projection.js';
import { BuildRunner, type RunnableBuild } from '../build-runner.js';

const UNREACHABLE = 'The Kubernetes API server cannot be reached; retry shortly';

/**
 * The API side of KILN_RUNNER=kubernetes: each build is a Build resource named after its id in
 * the build namespace of its method's Pod Security level (KILN_BUILD_NAMESPACE and its per-level
 * overrides; docs/adr/0040-namespaces-by-pod-security-level.md), written here and reconciled into
 * a Job by the operator. The API never creates Jobs or Pods. create writes the resource suspended;
 * start lifts the suspension; cancel asks the operator to stop it; remove deletes it. A Build is
 * looked for in its method's namespace, then in the other build namespaces (one written before
 * the levels were mapped as they are now). An unreachable API server is UnavailableError (503
 * with Retry-After), raised before anything changed.
 */
@Injectable()
export class KubernetesRunner extends BuildRunner {
  private readonly builds: CustomResources<BuildResource> | undefined;
  private readonly namespaces: NamespacesByLevel;

  constructor(
    @Inject(KubeClient) kube: KubeClient | null,
    config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.namespaces = config.buildNamespaces;
    this.builds =
      kube === null
        ? undefined
        : new CustomResources<BuildResource>(kube, BUILD_GROUP, BUILD_VERSION, BUILD_PLURAL);
  }

  override async create(build: RunnableBuild): Promise<void> {
    const namespace = this.home(build);
    await this.write(build, 'create', async (builds) => {
      try {
        await builds.create(namespace, this.resourceOf(build, namespace, true));
      } catch (error) {
        // Named after the build id: one that exists is this build's (a retried request).
        if (!(error instanceof KubeApiError && error.status === 409)) throw error;
      }
    });
  }

  async start(build: RunnableBuild): Promise<void> {
    await this.write(build, 'start', async (builds) => {
      // The finalizer comes with the start: the operator need not write it before the Job. A
      // Build kiln wrote has no finalizer of anyone else's for the merge patch to replace.
      const patched = await this.patch(builds, build, {
        metadata: { finalizers: [LOGS_FINALIZER] },
        spec: { suspend: false },
      });
      // Created before this runner was configured (or deleted by hand): write it running.
      if (!patched) {
        const namespace = this.home(build);
        await builds.create(namespace, this.resourceOf(build, namespace, false));
      }
    });
  }

  async cancel(build: RunnableBuild): Promise<void> {
    await this.write(build, 'cancel', async (builds) => {
      await this.patch(builds, build, {
        spec: {
          cancelRequested: true,
          ...(build.cancelReason === null ? {} : { cancelReason: build.cancelReason }),
        },
      });
    });
  }

  async remove(build: RunnableBuild): Promise<void> {
    await this.write(build, 'remove', async (builds) => {
      for (const namespace of this.candidates(build)) {
        if (await builds.delete(namespace, build.id)) return;
      }
    });
  }

  /**
   * The namespace a new Build of this build's method is written to. None admits its pods
   * (KILN_BUILD_ALLOW_PRIVILEGED=false): the build is refused, before anything was written.
   */
  private home(build: RunnableBuild): string {
    const namespace = namespaceOfMethod(this.namespaces, build.spec.method);
    if (namespace === undefined) {
      throw new InvalidRequestError(
        `${build.spec.method} builds cannot run on this kiln: their pods need Pod Security "privileged", which no build namespace admits (an administrator enables them, e.g. with the Helm chart's builds.buildx.enabled)`,
      );
    }
    return namespace;
  }

  /** Where the build's Build may be: its method's namespace first, then the other ones. */
  private candidates(build: RunnableBuild): string[] {
    const home = namespaceOfMethod(this.namespaces, build.spec.method);
    const all = buildNamespacesOf(this.namespaces);
    return home === undefined ? all : [home, ...all.filter((namespace) => namespace !== home)];
  }

  private resourceOf(build: RunnableBuild, namespace: string, suspend: boolean): BuildResource {
    const resource = buildResourceFor(build, namespace, { suspend });
    if (!suspend) resource.metadata.finalizers = [LOGS_FINALIZER];
    return resource;
  }

  /** A merge patch of the build's Build wherever it is; false when there is none. */
  private async patch(
    builds: CustomResources<BuildResource>,
    build: RunnableBuild,
    patch: object,
  ): Promise<boolean> {
    for (const namespace of this.candidates(build)) {
      try {
        await builds.mergePatch(namespace, build.id, patch);
        return true;
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) throw error;
      }
    }
    return false;
  }

  private async write(
    build: RunnableBuild,
    action: string,
    call: (builds: CustomResources<BuildResource>) => Promise<unknown>,
  ): Promise<void> {
    if (this.builds === undefined) {
      throw new UnavailableError(
        'KILN_RUNNER=kubernetes but no kubeconfig or service account was found',
      );
    }
    try {
      await call(this.builds);
    } catch (error) {
      if (error instanceof InvalidRequestError) throw error; // kiln's own refusal (home)
      if (error instanceof KubeUnavailableError) {
        this.logger.warn(
          { err: error, build_id: build.id, action },
          'the Kubernetes API server cannot be reached',
        );
        throw new UnavailableError(UNREACHABLE, { cause: error });
      }
      if (error instanceof KubeApiError && error.status === 422) {
        // The CRD bounds some fields tighter than the manifest rules: say which, change nothing.
        throw new InvalidRequestError(
          `The build cannot be written as a Build resource: ${error.message}`,
        );
      }
      this.logger.error(
        { err: error, build_id: build.id, action, method: build.spec.method },
        'the Kubernetes API server refused a Build resource change',
      );
      throw error;
    }
  }
}
