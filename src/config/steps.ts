import type { EnvReader } from './reader.js';

/** The tools of the steps after the image, whose images KILN_STEP_IMAGE_<TOOL> may set. */
export const STEP_TOOL_NAMES = ['syft', 'grype', 'trivy', 'clair', 'snyk'] as const;
export type StepToolName = (typeof STEP_TOOL_NAMES)[number];

/**
 * An image pinned by digest (`name[:tag]@sha256:<64 hex>`), as build-methods' isPinnedByDigest
 * checks it: config imports nothing of kiln's, so the rule is stated here too.
 */
const PINNED_IMAGE = /^[^\s@]+@sha256:[0-9a-f]{64}$/;
const SECRET_AND_KEY = /^([a-z0-9][-a-z0-9.]*)(?:\/([-._a-zA-Z0-9]+))?$/;

/** KilnConfig.operatorSteps. */
export interface OperatorSteps {
  readonly kilnImage?: string;
  readonly uploadUrl?: string;
  readonly clairUrl?: string;
  readonly snykToken?: { readonly secret: string; readonly key: string };
  /** KILN_STEP_IMAGE_<TOOL>: a tool's image, pinned by digest, over kiln's default. */
  readonly toolImages: Readonly<Partial<Record<StepToolName, string>>>;
}

/** The steps after the image (SBOM, scan): kiln's and the tools' images, where they report. */
export function readSteps(read: EnvReader): OperatorSteps {
  const stepImage = read.value('KILN_STEP_IMAGE');
  if (stepImage !== undefined && !PINNED_IMAGE.test(stepImage)) {
    read.bad('KILN_STEP_IMAGE', "kiln's image pinned by digest (name@sha256:<64 hex>)", stepImage);
  }
  const snykRaw = read.value('KILN_SNYK_TOKEN_SECRET');
  const snykMatch = snykRaw === undefined ? null : SECRET_AND_KEY.exec(snykRaw);
  if (snykRaw !== undefined && snykMatch === null) {
    read.bad(
      'KILN_SNYK_TOKEN_SECRET',
      'a Secret name, optionally /key (default key: token)',
      snykRaw,
    );
  }
  const toolImages: Partial<Record<StepToolName, string>> = {};
  for (const tool of STEP_TOOL_NAMES) {
    const name = `KILN_STEP_IMAGE_${tool.toUpperCase()}`;
    const image = read.value(name);
    if (image === undefined) continue;
    if (PINNED_IMAGE.test(image)) toolImages[tool] = image;
    else read.bad(name, `the ${tool} image pinned by digest (name@sha256:<64 hex>)`, image);
  }
  const uploadUrl = read.httpUrl('KILN_UPLOAD_URL');
  const clairUrl = read.httpUrl('KILN_CLAIR_URL');
  return {
    toolImages,
    ...(stepImage === undefined ? {} : { kilnImage: stepImage }),
    ...(uploadUrl === undefined ? {} : { uploadUrl }),
    ...(clairUrl === undefined ? {} : { clairUrl }),
    ...(snykMatch === null || snykMatch[1] === undefined
      ? {}
      : { snykToken: { secret: snykMatch[1], key: snykMatch[2] ?? 'token' } }),
  };
}
