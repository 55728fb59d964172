import type { S3ImageTarget } from '../../../integrations/build-access.js';
import type { S3UploadOptions, S3UploadResult } from '../../../registries/s3-upload.js';

/** Where a build's OCI layout goes when its registry_type is s3 (S3ImageStore). */
export interface S3ImageUploads {
  upload(archive: string, options: S3UploadOptions): Promise<S3UploadResult>;
}

/** Makes the store of one build's S3 target; RunnersModule binds it to S3ImageStore. */
export type S3Stores = (target: S3ImageTarget) => S3ImageUploads;

/** The injection token of S3Stores. */
export const S3_STORES = Symbol('S3_STORES');
