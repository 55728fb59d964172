/**
 * The formats kiln reads from what builders and the steps in a build's pod write: shared by the
 * Job assembly (which tells each container what to write), the local runner, the log store and the
 * in-pod step program (which read it).
 */
import { createHash } from 'node:crypto';

/** Whose output a log line is, so its level and step are read the way that builder writes them. */
export type BuilderFormat = 'kaniko' | 'buildkit' | 'buildah' | 'docker' | 'pack' | 'packer';

/** How a builder says what it pushed. */
export type PushedImageFormat = 'image-ref' | 'buildkit-metadata' | 'cnb-report';

export const PUSHED_IMAGE_FORMATS: readonly PushedImageFormat[] = [
  'image-ref',
  'buildkit-metadata',
  'cnb-report',
];

/** What one push wrote: the image's digest and each name it was pushed under, with the digest. */
export interface PushedImages {
  readonly digest: string;
  /** `registry/repo:tag@sha256:…` per pushed name, first the one the builder names first. */
  readonly images: readonly string[];
}

/** How a builder leaves an image for S3: an OCI layout tarball, or a layout directory. */
export const OCI_LAYOUT_FORMATS = ['oci-tar', 'oci-dir'] as const;
export type OciLayoutFormat = (typeof OCI_LAYOUT_FORMATS)[number];

/** One build packer's manifest post-processor recorded. */
export interface PackerArtifact {
  /** The build's name (a JSON builder's `name`, an HCL2 source's name). */
  readonly name: string;
  readonly builderType: string;
  /**
   * What the builder says it made, as packer wrote it: one string even when it names several
   * things (amazon-ebs: `us-east-1:ami-…,us-west-2:ami-…`); `File`, `VM` and the like for builders
   * whose artifact is files, which the manifest's own digest then stands for.
   */
  readonly artifactId: string;
}

/** What a packer build made, as its manifest post-processor lists it (packerArtifactsOf). */
export interface PackerArtifacts {
  /** `sha256:<hex>` of the manifest file's bytes, as packer left them. */
  readonly manifestDigest: string;
  /** The builds of the run that wrote the file last, in the file's order. */
  readonly artifacts: readonly PackerArtifact[];
  /** Only the first artifacts were carried (a termination message has room for so many). */
  readonly truncated?: true;
}

/** Why a file is not a manifest packer's manifest post-processor wrote: never its content. */
export class PackerManifestError extends Error {
  override readonly name = 'PackerManifestError';
}

/**
 * Reads the file packer's manifest post-processor writes:
 * `{"builds": [{"name", "builder_type", "build_time", "files", "artifact_id", "packer_run_uuid",
 * "custom_data"}, …], "last_run_uuid"}`. packer appends to the file a run found (unless run with
 * `-force`), so only the builds of `last_run_uuid`, the run that wrote it last, are this build's.
 * Pure; throws a PackerManifestError for anything else, whose message never quotes the file
 * (JSON.parse's own message would).
 */
export function packerArtifactsOf(manifestBytes: Buffer): PackerArtifacts {
  const manifestDigest = `sha256:${createHash('sha256').update(manifestBytes).digest('hex')}`;
  let manifest: unknown;
  try {
    manifest = JSON.parse(manifestBytes.toString('utf8'));
  } catch {
    throw new PackerManifestError('is not JSON');
  }
  if (!isRecord(manifest) || !Array.isArray(manifest['builds'])) {
    throw new PackerManifestError('has no "builds" list');
  }
  const run = manifest['last_run_uuid'];
  if (typeof run !== 'string' || run === '') {
    throw new PackerManifestError('names no last run ("last_run_uuid")');
  }
  const artifacts = manifest['builds'].flatMap((build: unknown, index): PackerArtifact[] => {
    if (!isRecord(build)) throw new PackerManifestError(`has a build ${index} that is no object`);
    if (build['packer_run_uuid'] !== run) return [];
    const { name, builder_type: builderType, artifact_id: artifactId } = build;
    if (typeof name !== 'string' || typeof builderType !== 'string') {
      throw new PackerManifestError(`has a build ${index} without a name or builder_type`);
    }
    if (typeof artifactId !== 'string') {
      throw new PackerManifestError(`has a build ${index} without an artifact_id`);
    }
    return [{ name, builderType, artifactId }];
  });
  return { manifestDigest, artifacts };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
