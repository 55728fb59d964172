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
import { buildResourceFor } from '../../operator/api/projection.js';
import { BuildRunner, type RunnableBuild } from '../build-runner.js';

const UNREACHABLE = 'The Kubernetes API server cannot be reached; retry shortly';

/**
 * The API side of KILN_RUNNER=kubernetes: each build is a Build resource named after its id in
 * KILN_BUILD_NAMESPACE, written here and reconciled into a Job by the operator. The API never
 * creates Jobs or Pods. create writes the resource suspended; start lifts the suspension; cancel
 * asks the operator to stop it; remove deletes it. An unreachable API server is UnavailableError
 * (503 with Retry-After), raised before anything changed.
 */
@Injectable()
export class KubernetesRunner extends BuildRunner {
  private readonly builds: CustomResources<BuildResource> | undefined;
  private readonly namespace: string;

  constructor(
    @Inject(KubeClient) kube: KubeClient | null,
    config: KilnConfig,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {
    super();
    this.namespace = config.buildNamespace;
    this.builds =
      kube === null
        ? undefined
        : new CustomResources<BuildResource>(kube, BUILD_GROUP, BUILD_VERSION, BUILD_PLURAL);
  }

  override async create(build: RunnableBuild): Promise<void> {
    await this.write(build, 'create', async (builds) => {
      try {
        await builds.create(this.namespace, this.resourceOf(build, true));
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
      const patched = await this.patch(builds, build.id, {
        metadata: { finalizers: [LOGS_FINALIZER] },
        spec: { suspend: false },
      });
      // Created before this runner was configured (or deleted by hand): write it running.
      if (!patched) await builds.create(this.namespace, this.resourceOf(build, false));
    });
  }

  async cancel(build: RunnableBuild): Promise<void> {
    await this.write(build, 'cancel', async (builds) => {
      await this.patch(builds, build.id, {
        spec: {
          cancelRequested: true,
          ...(build.cancelReason === null ? {} : { cancelReason: build.cancelReason }),
        },
      });
    });
  }

  async remove(build: RunnableBuild): Promise<void> {
    await this.write(build, 'remove', (builds) => builds.delete(this.namespace, build.id));
  }

  private resourceOf(build: RunnableBuild, suspend: boolean): BuildResource {
    const resource = buildResourceFor(build, this.namespace, { suspend });
    if (!suspend) resource.metadata.finalizers = [LOGS_FINALIZER];
    return resource;
  }

  /** A merge patch; false when the resource does not exist. */
  private async patch(
    builds: CustomResources<BuildResource>,
    name: string,
    patch: object,
  ): Promise<boolean> {
    try {
      await builds.mergePatch(this.namespace, name, patch);
      return true;
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return false;
      throw error;
    }
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
        { err: error, build_id: build.id, action, namespace: this.namespace },
        'the Kubernetes API server refused a Build resource change',
      );
      throw error;
    }
  }
}
