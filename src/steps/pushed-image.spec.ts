import {
  PUSHED_MESSAGE_MAX_BYTES,
  pushedFromMessage,
  pushedImage,
  pushedImages,
  pushedMessage,
} from './pushed-image.js';
import { type PushedImageFormat } from '../manifest/formats.js';

const DIGEST = `sha256:${'ab'.repeat(32)}`;
const OTHER = `sha256:${'cd'.repeat(32)}`;
const REPO = 'registry.example.com:5000/team/app';

/** What each builder writes when it pushed REPO:latest and REPO:v1 as DIGEST. */
const REPORTS: Record<PushedImageFormat, string> = {
  'image-ref': `${REPO}:latest@${DIGEST}\n${REPO}:v1@${DIGEST}\n`,
  'buildkit-metadata': JSON.stringify({
    'containerimage.digest': DIGEST,
    'image.name': `${REPO}:latest,${REPO}:v1`,
  }),
  'cnb-report': `[image]\n  tags = ["${REPO}:latest", "${REPO}:v1"]\n  digest = "${DIGEST}"\n  manifest-size = 1234\n\n[build]\n`,
};

describe(pushedImages.name, () => {
  it.each(Object.keys(REPORTS) as PushedImageFormat[])(
    'reads every tag named in %s, each with the digest',
    (format) => {
      expect(pushedImages(format, REPORTS[format])).toEqual({
        digest: DIGEST,
        images: [`${REPO}:latest@${DIGEST}`, `${REPO}:v1@${DIGEST}`],
      });
    },
  );

  it.each(Object.keys(REPORTS) as PushedImageFormat[])(
    'gives the SBOM and scan steps the first name by digest alone from %s',
    (format) => {
      expect(pushedImage(format, REPORTS[format])).toEqual({ reference: `${REPO}@${DIGEST}` });
    },
  );

  it('lists a name the builder repeats once', () => {
    const text = `${REPO}:latest@${DIGEST}\n${REPO}:latest@${DIGEST}\n`;

    expect(pushedImages('image-ref', text)).toEqual({
      digest: DIGEST,
      images: [`${REPO}:latest@${DIGEST}`],
    });
  });

  it('leaves out a kaniko line of another digest: it names another image', () => {
    const text = `${REPO}:latest@${DIGEST}\nelsewhere/app:v1@${OTHER}\n`;

    expect(pushedImages('image-ref', text)).toEqual({
      digest: DIGEST,
      images: [`${REPO}:latest@${DIGEST}`],
    });
  });

  it.each<[PushedImageFormat, string, string]>([
    ['image-ref', '', 'the builder wrote no image reference'],
    ['image-ref', `${REPO}:latest@sha256:short`, 'is not a reference with a sha256 digest'],
    ['buildkit-metadata', '{', 'the BuildKit metadata file is not JSON'],
    ['buildkit-metadata', JSON.stringify({ 'image.name': REPO }), 'no containerimage.digest'],
    [
      'buildkit-metadata',
      JSON.stringify({ 'containerimage.digest': DIGEST, 'image.name': ' , ' }),
      'no image.name',
    ],
    ['cnb-report', `[image]\n  tags = ["${REPO}:v1"]\n`, 'no image digest'],
    ['cnb-report', `[image]\n  tags = []\n  digest = "${DIGEST}"\n`, 'names no image tag'],
  ])('refuses %s text %j, saying why', (format, text, problem) => {
    const read = pushedImages(format, text);

    expect(read).toEqual({ problem: expect.stringContaining(problem) });
  });
});

describe(pushedMessage.name, () => {
  it('writes the digest and every reference, which pushedFromMessage reads back', () => {
    const pushed = pushedImages('image-ref', REPORTS['image-ref']);
    if ('problem' in pushed) throw new Error(pushed.problem);

    const { message, omitted } = pushedMessage(pushed);

    expect(omitted).toBe(0);
    expect(pushedFromMessage(message)).toEqual(pushed);
  });

  it('keeps the first references that fit in PUSHED_MESSAGE_MAX_BYTES and counts the rest', () => {
    const images = Array.from({ length: 100 }, (_, i) => `${REPO}:tag-${i}@${DIGEST}`);

    const { message, omitted } = pushedMessage({ digest: DIGEST, images });

    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(PUSHED_MESSAGE_MAX_BYTES);
    const read = pushedFromMessage(message);
    if ('problem' in read) throw new Error(read.problem);
    expect(read.digest).toBe(DIGEST);
    expect(read.images).toEqual(images.slice(0, read.images.length));
    expect(omitted).toBe(images.length - read.images.length);
    expect(omitted).toBeGreaterThan(0);
    // One more reference would not have fitted.
    const oneMore = JSON.stringify({
      digest: DIGEST,
      images: images.slice(0, read.images.length + 1),
    });
    expect(Buffer.byteLength(oneMore)).toBeGreaterThan(PUSHED_MESSAGE_MAX_BYTES);
  });
});

describe(pushedFromMessage.name, () => {
  it.each<[string, string, string]>([
    ['an empty message', '', 'left no termination message'],
    ['text that is not JSON', 'pushed it', 'is not JSON'],
    [
      'a message without a digest',
      JSON.stringify({ images: [`${REPO}:v1@${DIGEST}`] }),
      'no sha256 digest',
    ],
    [
      'a digest of another algorithm',
      JSON.stringify({ digest: 'md5:00', images: [] }),
      'no sha256 digest',
    ],
    ['no references', JSON.stringify({ digest: DIGEST, images: [] }), 'lists no references'],
    [
      'a reference of another digest',
      JSON.stringify({ digest: DIGEST, images: [`${REPO}:v1@${OTHER}`] }),
      'lists no references',
    ],
    [
      'a reference that is not a string',
      JSON.stringify({ digest: DIGEST, images: [42] }),
      'lists no references',
    ],
    [
      'a bare digest as a reference',
      JSON.stringify({ digest: DIGEST, images: [`@${DIGEST}`] }),
      'lists no references',
    ],
  ])('refuses %s', (_, text, problem) => {
    expect(pushedFromMessage(text)).toEqual({ problem: expect.stringContaining(problem) });
  });
});

describe('pushedFromMessage of the s3-upload step', () => {
  const ADDRESS = `s3://kiln-images/images/p1/7-${'ab'.repeat(6)}.oci.tar`;

  it('reads back the digest and s3:// address pushedMessage wrote', () => {
    const { message } = pushedMessage({ digest: DIGEST, images: [ADDRESS] });

    expect(pushedFromMessage(message, 's3-upload')).toEqual({ digest: DIGEST, images: [ADDRESS] });
  });

  it.each<[string, unknown, string]>([
    ['a registry reference', { digest: DIGEST, images: [`${REPO}:v1@${DIGEST}`] }, 's3://'],
    ['an address without a key', { digest: DIGEST, images: ['s3://kiln-images/'] }, 's3://'],
    ['no digest', { images: [ADDRESS] }, 'no sha256 digest'],
  ])('refuses %s, naming the step', (_, value, problem) => {
    const read = pushedFromMessage(JSON.stringify(value), 's3-upload');

    expect(read).toEqual({ problem: expect.stringContaining(problem) });
    expect(read).toEqual({ problem: expect.stringMatching(/^the s3-upload step’s/) });
  });

  it('takes no s3:// address from the image-ref step', () => {
    const { message } = pushedMessage({ digest: DIGEST, images: [ADDRESS] });

    expect(pushedFromMessage(message)).toEqual({
      problem: 'the image-ref step’s termination message lists no references with its digest',
    });
  });
});
