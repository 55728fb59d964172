/**
 * What a builder says it pushed, in each builder's own words, read into the digest and every
 * reference pushed (`registry/repo:tag@sha256:…`, what a build records and shows), and into the
 * one reference `name@sha256:…` that the SBOM and scan steps are run against (the digest, not a
 * tag that may move). Pure: text in, references or problem out.
 */
import type { PushedImageFormat, PushedImages } from '../manifest/formats.js';

type Read<T> = T | { problem: string };

const DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * The termination message of the `image-ref` step is bounded by the kubelet (4096 bytes per
 * container, 12 KiB per pod). kiln writes at most half of that: the first references that fit.
 */
export const PUSHED_MESSAGE_MAX_BYTES = 2048;

/** The one reference the SBOM and scan steps run against: `name@sha256:…`. */
export function pushedImage(format: PushedImageFormat, text: string): Read<{ reference: string }> {
  const pushed = pushedImages(format, text);
  if ('problem' in pushed) return pushed;
  return { reference: referenceOf(pushed) };
}

/** Every reference the builder pushed, with their digest. */
export function pushedImages(format: PushedImageFormat, text: string): Read<PushedImages> {
  switch (format) {
    case 'image-ref':
      return fromImageRef(text);
    case 'buildkit-metadata':
      return fromBuildkitMetadata(text);
    case 'cnb-report':
      return fromCnbReport(text);
  }
}

/** The first pushed name by digest: `registry/repo:tag@sha256:…` → `registry/repo@sha256:…`. */
export function referenceOf(pushed: PushedImages): string {
  const first = pushed.images[0] ?? '';
  return withDigest(first.slice(0, first.lastIndexOf('@')), pushed.digest);
}

/**
 * The `image-ref` step's termination message: `{"digest":…,"images":[…]}` within
 * PUSHED_MESSAGE_MAX_BYTES, and how many references were left out to fit.
 */
export function pushedMessage(pushed: PushedImages): { message: string; omitted: number } {
  const images: string[] = [];
  const encode = (): string => JSON.stringify({ digest: pushed.digest, images });
  for (const image of pushed.images) {
    images.push(image);
    if (Buffer.byteLength(encode()) > PUSHED_MESSAGE_MAX_BYTES) {
      images.pop();
      break;
    }
  }
  return { message: encode(), omitted: pushed.images.length - images.length };
}

/** The steps that report what a build pushed through their termination message. */
export type ReportingStep = 'image-ref' | 's3-upload';

/** An object's `s3://bucket/key` address. */
const S3_ADDRESS = /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/\S+$/;

/**
 * Reads a termination message pushedMessage wrote; anything else is a problem. `step` is the
 * step that wrote it: image-ref lists references with its digest (`name@sha256:…`), s3-upload
 * the `s3://` address of the uploaded layout.
 */
export function pushedFromMessage(
  text: string,
  step: ReportingStep = 'image-ref',
): Read<PushedImages> {
  if (text.trim() === '') return { problem: `the ${step} step left no termination message` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: `the ${step} step’s termination message is not JSON` };
  }
  const { digest, images } = (typeof value === 'object' && value !== null ? value : {}) as Record<
    string,
    unknown
  >;
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    return { problem: `the ${step} step’s termination message has no sha256 digest` };
  }
  const named = (image: string): boolean =>
    step === 's3-upload'
      ? S3_ADDRESS.test(image)
      : image.length > digest.length + 1 && image.endsWith(`@${digest}`);
  if (
    !Array.isArray(images) ||
    images.length === 0 ||
    !images.every((image) => typeof image === 'string' && named(image))
  ) {
    return {
      problem: `the ${step} step’s termination message lists no ${step === 's3-upload' ? 's3:// addresses' : 'references with its digest'}`,
    };
  }
  return { digest, images: images as string[] };
}

/**
 * kaniko `--image-name-with-digest-file`: one `name[:tag]@sha256:…` line per destination, all of
 * one image. The first line decides the digest; a line of another digest names another image.
 */
function fromImageRef(text: string): Read<PushedImages> {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const [first] = lines;
  if (first === undefined) return { problem: 'the builder wrote no image reference' };
  const at = first.lastIndexOf('@');
  const digest = first.slice(at + 1);
  if (at <= 0 || !DIGEST.test(digest)) {
    return { problem: `"${first.slice(0, 200)}" is not a reference with a sha256 digest` };
  }
  const names = lines
    .filter((line) => line.endsWith(`@${digest}`))
    .map((line) => line.slice(0, -digest.length - 1));
  return pushed(names, digest);
}

/** BuildKit `--metadata-file`: `containerimage.digest` and `image.name` (comma-separated). */
function fromBuildkitMetadata(text: string): Read<PushedImages> {
  let metadata: unknown;
  try {
    metadata = JSON.parse(text);
  } catch {
    return { problem: 'the BuildKit metadata file is not JSON' };
  }
  const record = (typeof metadata === 'object' && metadata !== null ? metadata : {}) as Record<
    string,
    unknown
  >;
  const digest = record['containerimage.digest'];
  const names = record['image.name'];
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    return { problem: 'the BuildKit metadata has no containerimage.digest' };
  }
  const list = typeof names === 'string' ? names.split(',').map((name) => name.trim()) : [];
  if (list.every((name) => name === ''))
    return { problem: 'the BuildKit metadata has no image.name' };
  return pushed(list, digest);
}

/** The CNB lifecycle's `-report` (report.toml): `[image]` with `tags = [...]` and `digest`. */
function fromCnbReport(text: string): Read<PushedImages> {
  const image = /^\[image\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text)?.[1] ?? '';
  const digest = /^\s*digest\s*=\s*"([^"]*)"/m.exec(image)?.[1];
  const tags = /^\s*tags\s*=\s*\[([^\]]*)\]/m.exec(image)?.[1];
  const names = [...(tags ?? '').matchAll(/"([^"]+)"/g)].map((match) => match[1] ?? '');
  if (digest === undefined || !DIGEST.test(digest)) {
    return { problem: 'the lifecycle report has no image digest' };
  }
  if (names.length === 0) return { problem: 'the lifecycle report names no image tag' };
  return pushed(names, digest);
}

/** Each distinct non-empty name with the digest, in the builder's order. */
function pushed(names: readonly string[], digest: string): PushedImages {
  const distinct = [...new Set(names.filter((name) => name !== ''))];
  return { digest, images: distinct.map((name) => `${name}@${digest}`) };
}

/** `registry/repo:tag` + digest → `registry/repo@digest` (a port's colon stays). */
function withDigest(name: string, digest: string): string {
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  const repository = colon > slash ? name.slice(0, colon) : name;
  return `${repository}@${digest}`;
}
