/**
 * The formats kiln reads from what builders and the steps in a build's pod write: shared by the
 * Job assembly (which tells each container what to write), the local runner, the log store and the
 * in-pod step program (which read it).
 */

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
