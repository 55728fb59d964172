import type { EnvReader } from './reader.js';

/** KILN_LIST_EXACT_COUNT_LIMIT's default: counting that many index entries takes a few ms. */
export const DEFAULT_LIST_EXACT_COUNT_LIMIT = 10_000;

/** What one build may take: its time, and the size of its SBOM and scan reports. */
export function readBuildLimits(read: EnvReader) {
  return {
    buildTimeoutSeconds: read.integer('KILN_BUILD_TIMEOUT_SECONDS', 3600, 1, 7 * 24 * 3600),
    artifactMaxBytes: read.integer(
      'KILN_ARTIFACT_MAX_BYTES',
      16 * 1024 * 1024,
      1024,
      256 * 1024 * 1024,
    ),
  };
}

/** How far GET /builds counts exactly. */
export function readBuildListing(read: EnvReader) {
  return {
    listExactCountLimit: read.integer(
      'KILN_LIST_EXACT_COUNT_LIMIT',
      DEFAULT_LIST_EXACT_COUNT_LIMIT,
      0,
      1_000_000,
    ),
  };
}
