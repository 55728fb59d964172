/**
 * A tenant's settings for each registry type (`kiln settings registry set`, table `tenant_registries`).
 * Credentials are secret references (docs/adr/0021-secret-references.md), resolved when a build
 * starts; a username may also be plain, since it names an account and is no secret.
 */
export interface OciRegistrySettings {
  /** `host[:port]` images are pushed to. */
  readonly address: string;
  /**
   * The Harbor project, Quay organization or Artifactory repository key under which a build that
   * names only an image name pushes (`<address>/<namespace>/<name>`).
   */
  readonly namespace?: string;
  /** Plain HTTP (a registry inside the cluster without TLS). */
  readonly insecure?: boolean;
  /** A robot account or user, plain or a reference. */
  readonly username?: string;
  /** A reference to the password or token; never a plain value. */
  readonly password?: string;
}

export interface S3RegistrySettings {
  readonly bucket: string;
  /** Key prefix under which images are stored. */
  readonly prefix?: string;
  readonly region: string;
  /** An S3-compatible endpoint (MinIO, Ceph), default AWS's. */
  readonly endpoint?: string;
  readonly forcePathStyle?: boolean;
  /** Access key id (plain or a reference) and a reference to its secret; absent: the build pod's own identity (IRSA). */
  readonly accessKeyId?: string;
  readonly secretAccessKey?: string;
}

export interface RegistrySettingsByType {
  readonly harbor: OciRegistrySettings;
  readonly quay: OciRegistrySettings;
  readonly artifactory: OciRegistrySettings;
  readonly s3: S3RegistrySettings;
}
