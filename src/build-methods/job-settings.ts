import {
  BUILDER_IMAGES,
  type BuilderName,
  GIT_IMAGE,
  SBOM_TOOL_IMAGES,
  SCAN_TOOL_IMAGES,
} from './images.js';
import type { StepSettings } from './steps.js';

/** The operator's settings for build Jobs and their defaults (job.ts re-exports them). */

export type ImagePullPolicy = 'Always' | 'IfNotPresent' | 'Never';

/** Quantities in Kubernetes notation (`500m`, `2Gi`). */
export interface ResourceAmounts {
  readonly cpu: string;
  readonly memory: string;
  readonly ephemeralStorage: string;
}

export interface ContainerResources {
  readonly requests: ResourceAmounts;
  readonly limits: ResourceAmounts;
}

/** The operator's settings for build Jobs (config wiring fills them; defaults below). */
export interface JobSettings {
  /** Builder images by builder name, each pinned by digest (`name[:tag]@sha256:…`). */
  readonly builderImages: Readonly<Record<BuilderName, string>>;
  /** The `source` init container's image (git and /bin/sh), pinned by digest. */
  readonly gitImage: string;
  readonly resources: {
    /** The builder container. */
    readonly builder: ContainerResources;
    /** The `source` init container (the clone itself lands on the pod's workspace volume). */
    readonly source: ContainerResources;
    /** Each step after the image (image-ref, SBOM, scan, upload); they run one at a time. */
    readonly steps: ContainerResources;
  };
  /** The steps after the image: kiln's image, the upload URL, the tools' images (steps.ts). */
  readonly steps: StepSettings;
  readonly imagePullPolicy: ImagePullPolicy;
  /**
   * A `kubernetes.io/dockerconfigjson` Secret in the build namespace with push (and pull)
   * credentials, mounted as the builder's Docker config; none: anonymous.
   */
  readonly credentialsSecret?: string;
  /** The build pod's service account; none: the namespace's `default`. Its token is never mounted. */
  readonly serviceAccountName?: string;
  /** Registries reached over plain HTTP or with unverified TLS (`host[:port]`). */
  readonly insecureRegistries: readonly string[];
  /**
   * Build pods run in a user namespace (`hostUsers: false`): root in a container is not root on
   * the node. A method whose builder cannot run in one (`JobPlan.noUserNamespace`) is left out,
   * and its build log says so. Needs Kubernetes 1.33+ with user namespaces on its nodes.
   */
  readonly userNamespaces?: boolean;
  /**
   * Run images for paketo builds (the CNB lifecycle's `-run-image`), keyed by the builder image a
   * build runs (after `paketoBuilderImage`'s mapping), e.g. a mirror of the builder's own run
   * image. A builder without an entry uses the run image its metadata names.
   */
  readonly paketoRunImages?: Readonly<Record<string, string>>;
}

export const DEFAULT_JOB_SETTINGS: JobSettings = {
  builderImages: BUILDER_IMAGES,
  gitImage: GIT_IMAGE,
  resources: {
    // 1 CPU and 2Gi asked, 4Gi allowed: what kaniko Jobs commonly get, since kaniko snapshots the
    // image's filesystem in memory. kiln also caps CPU and disk: a tenant's build must not take
    // a node, and one without a disk limit can fill it (ADR 0014, "Default resources").
    builder: {
      requests: { cpu: '1', memory: '2Gi', ephemeralStorage: '2Gi' },
      limits: { cpu: '2', memory: '4Gi', ephemeralStorage: '10Gi' },
    },
    source: {
      requests: { cpu: '100m', memory: '128Mi', ephemeralStorage: '256Mi' },
      limits: { cpu: '1', memory: '1Gi', ephemeralStorage: '1Gi' },
    },
    // trivy and grype keep a vulnerability database of several hundred MB in /tmp.
    steps: {
      requests: { cpu: '250m', memory: '512Mi', ephemeralStorage: '1Gi' },
      limits: { cpu: '1', memory: '2Gi', ephemeralStorage: '4Gi' },
    },
  },
  steps: { sbomImages: SBOM_TOOL_IMAGES, scanImages: SCAN_TOOL_IMAGES },
  imagePullPolicy: 'IfNotPresent',
  insecureRegistries: [],
};
