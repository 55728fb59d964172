/**
 * What a builder says it pushed, in each builder's own words, read into one image reference
 * `name@sha256:…` that the SBOM and scan steps are run against (the digest, not a tag that may
 * move). Pure: text in, reference or problem out.
 */
export type PushedImageFormat = 'image-ref' | 'buildkit-metadata' | 'cnb-report';

export const PUSHED_IMAGE_FORMATS: readonly PushedImageFormat[] = [
  'image-ref',
  'buildkit-metadata',
  'cnb-report',
];

const DIGEST = /^sha256:[0-9a-f]{64}$/;

export function pushedImage(
  format: PushedImageFormat,
  text: string,
): { reference: string } | { problem: string } {
  switch (format) {
    case 'image-ref':
      return fromImageRef(text);
    case 'buildkit-metadata':
      return fromBuildkitMetadata(text);
    case 'cnb-report':
      return fromCnbReport(text);
  }
}

/** kaniko `--image-name-with-digest-file`: one `name[:tag]@sha256:…` line per destination. */
function fromImageRef(text: string): { reference: string } | { problem: string } {
  const first = text
    .split('\n')
    .map((line) => line.trim())
    .find((line) => line !== '');
  if (first === undefined) return { problem: 'the builder wrote no image reference' };
  const at = first.lastIndexOf('@');
  if (at <= 0 || !DIGEST.test(first.slice(at + 1))) {
    return { problem: `"${first.slice(0, 200)}" is not a reference with a sha256 digest` };
  }
  return { reference: withDigest(first.slice(0, at), first.slice(at + 1)) };
}

/** BuildKit `--metadata-file`: `containerimage.digest` and `image.name` (comma-separated). */
function fromBuildkitMetadata(text: string): { reference: string } | { problem: string } {
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
  const name = typeof names === 'string' ? names.split(',')[0]?.trim() : undefined;
  if (name === undefined || name === '')
    return { problem: 'the BuildKit metadata has no image.name' };
  return { reference: withDigest(name, digest) };
}

/** The CNB lifecycle's `-report` (report.toml): `[image]` with `tags = [...]` and `digest`. */
function fromCnbReport(text: string): { reference: string } | { problem: string } {
  const image = /^\[image\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text)?.[1] ?? '';
  const digest = /^\s*digest\s*=\s*"([^"]*)"/m.exec(image)?.[1];
  const tags = /^\s*tags\s*=\s*\[([^\]]*)\]/m.exec(image)?.[1];
  const name = tags === undefined ? undefined : /"([^"]+)"/.exec(tags)?.[1];
  if (digest === undefined || !DIGEST.test(digest)) {
    return { problem: 'the lifecycle report has no image digest' };
  }
  if (name === undefined) return { problem: 'the lifecycle report names no image tag' };
  return { reference: withDigest(name, digest) };
}

/** `registry/repo:tag` + digest → `registry/repo@digest` (a port's colon stays). */
function withDigest(name: string, digest: string): string {
  const slash = name.lastIndexOf('/');
  const colon = name.lastIndexOf(':');
  const repository = colon > slash ? name.slice(0, colon) : name;
  return `${repository}@${digest}`;
}
