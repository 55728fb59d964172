import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { parse } from 'yaml';
import { parseDockerfile } from './support/dockerfile.js';
import { LocalRegistry } from './support/registry.js';

/**
 * Every image kiln runs or ships is pinned by a tag and its digest, Renovate keeps each pin
 * current, and `make verify-pins` checks the same pins against the registry
 * (docs/adr/0032-image-pins.md). The image references are found here by reading each file as
 * what it is (TypeScript string literals, Dockerfile ARGs, YAML fields), not with the script's
 * pattern, so a reference either of them misses shows up as a difference.
 */
const ROOT = join(__dirname, '..');
const SCRIPT = join(ROOT, 'scripts', 'verify-pins.sh');
const PINNED =
  /^(?<name>[a-z0-9][a-z0-9._-]*(?::\d+)?(?:\/[a-z0-9._-]+)*):(?<tag>\w[\w.-]{0,127})@(?<digest>sha256:[0-9a-f]{64})$/;
/** No registry answers here: the probe's connection is refused at once. */
const UNREACHABLE = 'https://127.0.0.1:9/v2/';

/** Images named without a digest on purpose; the file says why next to each (ADR 0032). */
const UNPINNED_BY_CHOICE: ReadonlyMap<string, readonly string[]> = new Map([
  ['config/samples/build-paketo.yaml', ['paketobuildpacks/builder-jammy-base']],
]);

interface ImageReference {
  readonly file: string;
  readonly reference: string;
}

function* filesUnder(dir: string, keep: (path: string) => boolean): Generator<string> {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* filesUnder(path, keep);
    else if (keep(path)) yield path;
  }
}

const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

/** Source text without its comments: a comment may name an image, it does not run one. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/**
 * `src/`: every string literal holding a digest or given to an `image` field, and in images.ts
 * (the images a build's Job runs) every string literal shaped like an image reference.
 */
function sourceImages(): ImageReference[] {
  const out: ImageReference[] = [];
  const sources = filesUnder(
    join(ROOT, 'src'),
    (path) => /\.tsx?$/.test(path) && !path.endsWith('.spec.ts'),
  );
  for (const path of sources) {
    const file = relative(ROOT, path);
    const text = code(readFileSync(path, 'utf8'));
    for (const [, , literal] of text.matchAll(/(['"`])([^'"`\s]+)\1/g)) {
      const image =
        /@sha256:[0-9a-f]{64}/.test(literal!) ||
        (file === 'src/build-methods/images.ts' &&
          /^[a-z0-9][a-z0-9._-]*(?:\/[a-z0-9._-]+)+(?::[\w.-]+)?(?:@\S+)?$/.test(literal!));
      if (image) out.push({ file, reference: literal! });
    }
    for (const [, , literal] of text.matchAll(/\bimage:\s*(['"])([^'"\s]+)\1/g)) {
      if (!/@sha256:[0-9a-f]{64}/.test(literal!)) out.push({ file, reference: literal! });
    }
  }
  return out;
}

/** The Dockerfile's bases: every `*_IMAGE` ARG and what each FROM resolves to. */
function dockerfileImages(): ImageReference[] {
  const dockerfile = parseDockerfile(read('Dockerfile'));
  const images = new Set([
    ...[...dockerfile.globalArgs].filter(([name]) => name.endsWith('_IMAGE')).map(([, v]) => v),
    ...dockerfile.stages.map((stage) => stage.image),
  ]);
  return [...images].map((reference) => ({ file: 'Dockerfile', reference }));
}

/** YAML: every string under one of `keys`, except below a key in `skip`. */
function yamlStrings(value: unknown, keys: readonly string[], skip: readonly string[]): string[] {
  if (Array.isArray(value)) return value.flatMap((item) => yamlStrings(item, keys, skip));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([key, child]) => {
    if (skip.includes(key)) return [];
    if (keys.includes(key) && typeof child === 'string') return [child];
    return yamlStrings(child, keys, skip);
  });
}

/**
 * The chart: string `image` values (kiln's own image is a map the installer fills, not a pin) and
 * literal `image:` lines of the templates; the samples: the images a Build names to build from
 * (`output.image` is where it pushes, not an image anything pulls).
 */
function yamlImages(): ImageReference[] {
  const out: ImageReference[] = yamlStrings(parse(read('charts/kiln/values.yaml')), ['image'], [])
    .filter((image) => image !== '')
    .map((reference) => ({ file: 'charts/kiln/values.yaml', reference }));
  for (const path of filesUnder(join(ROOT, 'charts/kiln/templates'), (p) => p.endsWith('.yaml'))) {
    for (const [, reference] of readFileSync(path, 'utf8').matchAll(
      /^\s*-?\s*image:\s*([^\s{]\S*)\s*$/gm,
    ))
      out.push({ file: relative(ROOT, path), reference: reference!.replace(/^["']|["']$/g, '') });
  }
  for (const name of readdirSync(join(ROOT, 'config/samples')).filter((n) => n.endsWith('.yaml'))) {
    const file = `config/samples/${name}`;
    for (const reference of yamlStrings(
      parse(read(file)),
      ['base_image', 'builder', 'image'],
      ['output'],
    ))
      out.push({ file, reference });
  }
  for (const name of readdirSync(join(ROOT, 'crds')).filter((n) => n.endsWith('.yaml'))) {
    for (const [reference] of read(`crds/${name}`).matchAll(/\S+@sha256:[0-9a-f]{64}/g))
      out.push({ file: `crds/${name}`, reference });
  }
  return out;
}

const key = ({ file, reference }: ImageReference): string => `${file}\t${reference}`;
const IMAGES = [...sourceImages(), ...dockerfileImages(), ...yamlImages()];
const unpinnedByChoice = (image: ImageReference): boolean =>
  (UNPINNED_BY_CHOICE.get(image.file) ?? []).includes(image.reference);
/** Each pin once per file, as `scripts/verify-pins.sh --list` prints them. */
const PINS = [...new Set(IMAGES.filter((i) => !unpinnedByChoice(i)).map(key))].sort();

function verifyPins(args: string[], env: Record<string, string> = {}) {
  const run = spawnSync('bash', [SCRIPT, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, VERIFY_PINS_PROBE: UNREACHABLE, ...env },
    timeout: 120_000,
  });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe('image pins', () => {
  it('finds the images of the Job, the image, the chart and the samples', () => {
    const files = new Set(IMAGES.map((image) => image.file));
    for (const file of [
      'src/build-methods/images.ts',
      'Dockerfile',
      'charts/kiln/values.yaml',
      'config/samples/build-container.yaml',
    ])
      expect(files).toContain(file);
    expect(IMAGES.length).toBeGreaterThanOrEqual(11);
  });

  it('pins every image kiln runs or ships by a tag and its digest', () => {
    const unpinned = IMAGES.filter((i) => !unpinnedByChoice(i) && !PINNED.test(i.reference));
    expect(unpinned).toEqual([]);
  });

  it('says next to each image left unpinned on purpose that it is not pinned, and why', () => {
    for (const [file, images] of UNPINNED_BY_CHOICE) {
      const text = read(file);
      for (const image of images) {
        expect(IMAGES).toContainEqual({ file, reference: image });
        expect(text).toMatch(/#.*not pinned by digest:/);
      }
    }
  });

  it('has a Renovate regex manager that reads every pin with its name, tag and digest', () => {
    const renovate = JSON.parse(read('renovate.json')) as {
      pinDigests?: boolean;
      customManagers?: Array<{
        customType: string;
        managerFilePatterns: string[];
        matchStrings: string[];
        datasourceTemplate?: string;
      }>;
    };
    expect(renovate.pinDigests).toBe(true);
    const managers = renovate.customManagers ?? [];
    for (const manager of managers) {
      expect(manager.customType).toBe('regex');
      expect(manager.datasourceTemplate).toBe('docker');
    }
    const fileRegex = (pattern: string): RegExp => {
      const match = /^\/(.+)\/([a-z]*)$/.exec(pattern);
      if (match === null) throw new Error(`${pattern}: write managerFilePatterns as /regex/`);
      return new RegExp(match[1]!, match[2]);
    };
    const unread = PINS.map((pin) => pin.split('\t') as [string, string]).filter(
      ([file, reference]) => {
        const want = PINNED.exec(reference)!.groups!;
        const text = read(file);
        return !managers
          .filter((m) => m.managerFilePatterns.some((p) => fileRegex(p).test(file)))
          .flatMap((m) => m.matchStrings)
          .flatMap((pattern) => [...text.matchAll(new RegExp(pattern, 'g'))])
          .some(
            ({ groups }) =>
              groups?.['depName'] === want['name'] &&
              groups?.['currentValue'] === want['tag'] &&
              groups?.['currentDigest'] === want['digest'],
          );
      },
    );
    expect(unread).toEqual([]);
  });

  it('verify-pins lists exactly these pins, each with its file', () => {
    const listed = verifyPins(['--list']);
    expect(listed).toMatchObject({ status: 0, stderr: '' });
    expect(listed.stdout.trim().split('\n').sort()).toEqual(PINS);
    const byEnv = verifyPins([], { VERIFY_PINS_LIST: '1' });
    expect(byEnv.stdout).toBe(listed.stdout);
  });

  it('verify-pins without registry access says it checked nothing and exits 0', () => {
    const run = verifyPins([]);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/no registry access/);
    expect(run.stdout).toMatch(/checked nothing/);
    expect(run.stdout).not.toMatch(/^(ok|moved|error)\s/m);
  });
});

const skopeoOnPath = spawnSync('skopeo', ['--version']).status === 0;

/** A one-layer OCI image pushed to `registry` as `repository:tag`; its manifest's digest. */
async function pushImage(
  registry: LocalRegistry,
  repository: string,
  tag: string,
  content: string,
): Promise<string> {
  const base = `http://${registry.address}/v2/${repository}`;
  const blob = async (body: Buffer) => {
    const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
    const started = await fetch(`${base}/blobs/uploads/`, { method: 'POST' });
    const location = new URL(started.headers.get('location')!, base);
    location.searchParams.set('digest', digest);
    const put = await fetch(location, { method: 'PUT', body: new Uint8Array(body) });
    expect(put.status).toBe(201);
    return { digest, size: body.length };
  };
  const config = await blob(Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux' })));
  const layer = await blob(Buffer.from(content));
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
    }),
  );
  const put = await fetch(`${base}/manifests/${tag}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.oci.image.manifest.v1+json' },
    body: new Uint8Array(manifest),
  });
  expect(put.status).toBe(201);
  return `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
}

(skopeoOnPath ? describe : describe.skip)('verify-pins against a registry (skopeo)', () => {
  let registry: LocalRegistry;
  let tree: string;

  beforeAll(async () => {
    registry = await LocalRegistry.start();
    tree = mkdtempSync(join(tmpdir(), 'kiln-verify-pins-'));
  });
  afterAll(async () => {
    await registry.stop();
    rmSync(tree, { recursive: true, force: true });
  });

  const checkTree = (pinned: string) => {
    writeFileSync(join(tree, 'Dockerfile'), `ARG BASE_IMAGE=${pinned}\nFROM \${BASE_IMAGE}\n`);
    return verifyPins([], {
      VERIFY_PINS_ROOT: tree,
      VERIFY_PINS_PROBE: `http://${registry.address}/v2/`,
      VERIFY_PINS_TLS_VERIFY: 'false',
    });
  };

  it('passes a pin its tag still names and fails, naming the new digest, once the tag moved', async () => {
    const image = `${registry.address}/kiln/pinned:1.0`;
    const first = await pushImage(registry, 'kiln/pinned', '1.0', 'first');

    const current = checkTree(`${image}@${first}`);
    expect(current.stdout).toContain(`ok     ${image}@${first}`);
    expect(current.status).toBe(0);

    const second = await pushImage(registry, 'kiln/pinned', '1.0', 'second');
    const moved = checkTree(`${image}@${first}`);
    expect(moved.stdout).toContain(`moved  ${image}@${first}: the tag names ${second} now`);
    expect(moved.status).toBe(1);
  });

  it('fails a pin whose tag the registry does not have', () => {
    const missing = `${registry.address}/kiln/absent:9.9@sha256:${'0'.repeat(64)}`;
    const run = checkTree(missing);
    expect(run.stdout).toMatch(
      new RegExp(`^error  ${missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `, 'm'),
    );
    expect(run.status).toBe(1);
  });
});
