import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  OciLayoutError,
  TarArchive,
  ociLayoutDigest,
  tarHeaders,
  writeLayoutTar,
} from './oci-layout.js';

const MANIFEST_TYPE = 'application/vnd.oci.image.manifest.v1+json';
let root: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'kiln-oci-layout-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

function writeFile(dir: string, path: string, content: Buffer | string): void {
  mkdirSync(dirname(join(dir, path)), { recursive: true });
  writeFileSync(join(dir, path), content);
}

/** A layout directory as buildah writes one: a layer, a config, a manifest naming both. */
function writeLayout(
  options: { index?: unknown; layoutVersion?: string; skipManifestBlob?: boolean } = {},
): { dir: string; manifestDigest: string; manifestSize: number } {
  const dir = join(root, 'layout');
  const blob = (content: Buffer | string) => {
    const digest = sha256(content);
    writeFile(dir, `blobs/sha256/${digest}`, content);
    return { digest: `sha256:${digest}`, size: Buffer.byteLength(content) };
  };
  const layer = blob(Buffer.alloc(3000, 7));
  const config = blob(JSON.stringify({ architecture: 'amd64', os: 'linux' }));
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: MANIFEST_TYPE,
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layer }],
  });
  const manifestDigest = `sha256:${sha256(manifest)}`;
  const manifestSize = Buffer.byteLength(manifest);
  if (options.skipManifestBlob !== true) blob(manifest);
  writeFile(
    dir,
    'oci-layout',
    JSON.stringify({ imageLayoutVersion: options.layoutVersion ?? '1.0.0' }),
  );
  const index = options.index ?? {
    schemaVersion: 2,
    manifests: [{ mediaType: MANIFEST_TYPE, digest: manifestDigest, size: manifestSize }],
  };
  writeFile(dir, 'index.json', JSON.stringify(index));
  return { dir, manifestDigest, manifestSize };
}

function tar(dir: string, format: 'gnu' | 'posix' | 'ustar', extra: string[] = []): string {
  const out = join(root, `layout-${format}.tar`);
  execFileSync('tar', [`--format=${format}`, ...extra, '-C', dir, '-cf', out, '.']);
  return out;
}

describe('ociLayoutDigest', () => {
  it.each(['gnu', 'posix', 'ustar'] as const)(
    'returns the first manifest descriptor of a %s tarball',
    async (format) => {
      const { dir, manifestDigest, manifestSize } = writeLayout();

      await expect(ociLayoutDigest(tar(dir, format))).resolves.toEqual({
        digest: manifestDigest,
        mediaType: MANIFEST_TYPE,
        size: manifestSize,
      });
    },
  );

  it('reads a tarball whose names have no ./ prefix', async () => {
    const { dir, manifestDigest } = writeLayout();
    const out = join(root, 'plain.tar');
    execFileSync('tar', ['-C', dir, '-cf', out, 'oci-layout', 'index.json', 'blobs']);

    expect((await ociLayoutDigest(out)).digest).toBe(manifestDigest);
  });

  it('rejects a file that is not a tar archive', async () => {
    const path = join(root, 'not.tar');
    writeFileSync(path, 'x'.repeat(2000));

    await expect(ociLayoutDigest(path)).rejects.toThrow(/not a tar archive/);
  });

  it('rejects a file shorter than one tar header', async () => {
    const path = join(root, 'short.tar');
    writeFileSync(path, '{}');

    await expect(ociLayoutDigest(path)).rejects.toThrow(OciLayoutError);
  });

  it('rejects a gzip-compressed tarball saying so', async () => {
    const { dir } = writeLayout();
    const out = join(root, 'layout.tar.gz');
    execFileSync('tar', ['-C', dir, '-czf', out, '.']);

    await expect(ociLayoutDigest(out)).rejects.toThrow(/gzip-compressed/);
  });

  it('rejects a truncated tarball', async () => {
    const { dir } = writeLayout();
    const full = readFileSync(tar(dir, 'gnu'));
    const out = join(root, 'truncated.tar');
    writeFileSync(out, full.subarray(0, 512 + 1000));

    await expect(ociLayoutDigest(out)).rejects.toThrow(/truncated|corrupt/);
  });

  it('rejects a tarball without index.json', async () => {
    const { dir } = writeLayout();
    rmSync(join(dir, 'index.json'));

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/no index\.json file/);
  });

  it('rejects a tarball without an oci-layout file', async () => {
    const { dir } = writeLayout();
    rmSync(join(dir, 'oci-layout'));

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/no oci-layout file/);
  });

  it('rejects an imageLayoutVersion other than 1.0.0', async () => {
    const { dir } = writeLayout({ layoutVersion: '2.0.0' });

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/imageLayoutVersion/);
  });

  it('rejects an index.json that names no manifests', async () => {
    const { dir } = writeLayout({ index: { schemaVersion: 2, manifests: [] } });

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/names no manifests/);
  });

  it('rejects an index.json that is not JSON', async () => {
    const { dir } = writeLayout();
    writeFileSync(join(dir, 'index.json'), '{"manifests": [');

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/index\.json is not JSON/);
  });

  it.each(['sha256:abc', 'md5:0123456789abcdef0123456789abcdef', `sha256:${'A'.repeat(64)}`, 42])(
    'rejects the digest %p',
    async (digest) => {
      const { dir } = writeLayout({
        index: { schemaVersion: 2, manifests: [{ mediaType: MANIFEST_TYPE, digest, size: 10 }] },
      });

      await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/no valid digest/);
    },
  );

  it('rejects a manifest whose blob is not in the tarball', async () => {
    const { dir } = writeLayout({ skipManifestBlob: true });

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/is not in the tarball/);
  });

  it('rejects an index.json whose size disagrees with the manifest blob', async () => {
    const { dir, manifestDigest, manifestSize } = writeLayout();
    writeFile(
      dir,
      'index.json',
      JSON.stringify({
        schemaVersion: 2,
        manifests: [{ mediaType: MANIFEST_TYPE, digest: manifestDigest, size: manifestSize + 1 }],
      }),
    );

    await expect(ociLayoutDigest(tar(dir, 'gnu'))).rejects.toThrow(/does not match/);
  });
});

describe(TarArchive.name, () => {
  const longPath = `${'deep-directory-name/'.repeat(7)}a-file-with-a-long-name.json`;

  it.each(['gnu', 'posix', 'ustar'] as const)(
    'reads a file whose path is longer than 100 bytes from a %s tarball',
    async (format) => {
      writeFile(join(root, 'tree'), longPath, 'long');
      writeFile(join(root, 'tree'), 'short.txt', 'short');
      const archive = await TarArchive.open(tar(join(root, 'tree'), format));
      try {
        expect((await archive.read(longPath, 100))?.toString()).toBe('long');
        expect((await archive.read('./short.txt', 100))?.toString()).toBe('short');
        expect(await archive.read('missing', 100)).toBeUndefined();
      } finally {
        await archive.close();
      }
    },
  );

  it('lists regular files only, not directories or links', async () => {
    writeFile(join(root, 'tree'), 'dir/file', 'x');
    execFileSync('ln', ['-s', 'file', join(root, 'tree', 'dir', 'link')]);
    const archive = await TarArchive.open(tar(join(root, 'tree'), 'gnu'));
    try {
      expect([...archive.files.keys()]).toEqual(['dir/file']);
    } finally {
      await archive.close();
    }
  });

  it('refuses to read a file larger than the limit', async () => {
    writeFile(join(root, 'tree'), 'big', Buffer.alloc(2000));
    const archive = await TarArchive.open(tar(join(root, 'tree'), 'gnu'));
    try {
      await expect(archive.read('big', 1000)).rejects.toThrow(RangeError);
    } finally {
      await archive.close();
    }
  });

  it('honours a size given by a pax record and a size in GNU base-256', async () => {
    // GNU tar writes these only for files over 8 GiB, so the headers are built here.
    const content = Buffer.from('pax-sized content');
    const paxBody = paxRecord('size', String(content.length));
    const base256 = Buffer.alloc(12);
    base256[0] = 0x80;
    base256.writeUInt32BE(content.length, 8);
    const path = join(root, 'crafted.tar');
    writeFileSync(
      path,
      Buffer.concat([
        header('PaxHeaders/a', paxBody.length, 'x'),
        padded(paxBody),
        header('a', 0, '0'),
        padded(content),
        header('b', base256, '0'),
        padded(content),
        Buffer.alloc(1024),
      ]),
    );
    const archive = await TarArchive.open(path);
    try {
      expect((await archive.read('a', 100))?.toString()).toBe(content.toString());
      expect((await archive.read('b', 100))?.toString()).toBe(content.toString());
    } finally {
      await archive.close();
    }
  });
});

describe(writeLayoutTar.name, () => {
  /** Every file under `dir`, relative path → content, as GNU tar or the writer left them. */
  function filesOf(dir: string): Record<string, string> {
    const files: Record<string, string> = {};
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const path = join(entry.parentPath, entry.name);
      files[path.slice(dir.length + 1)] = readFileSync(path).toString('base64');
    }
    return files;
  }

  it('archives a layout directory that ociLayoutDigest reads and GNU tar extracts unchanged', async () => {
    const { dir, manifestDigest, manifestSize } = writeLayout();
    const out = join(root, 'written.tar');

    await writeLayoutTar(dir, out);

    await expect(ociLayoutDigest(out)).resolves.toEqual({
      digest: manifestDigest,
      mediaType: MANIFEST_TYPE,
      size: manifestSize,
    });
    const extracted = join(root, 'extracted');
    mkdirSync(extracted);
    execFileSync('tar', ['-xf', out, '-C', extracted]);
    expect(filesOf(extracted)).toEqual(filesOf(dir));
    expect(Object.keys(filesOf(dir))).toHaveLength(5);
    // Directories are entries of their own, in sorted order, before what they hold.
    expect(execFileSync('tar', ['-tf', out], { encoding: 'utf8' }).split('\n')).toEqual([
      'blobs/',
      'blobs/sha256/',
      ...readdirSync(join(dir, 'blobs/sha256'))
        .sort()
        .map((name) => `blobs/sha256/${name}`),
      'index.json',
      'oci-layout',
      '',
    ]);
  });

  it('writes the same bytes for the same layout, whatever the files’ times', async () => {
    const { dir } = writeLayout();
    const [first, second] = [join(root, 'first.tar'), join(root, 'second.tar')];
    await writeLayoutTar(dir, first);
    utimesSync(join(dir, 'index.json'), new Date('2001-02-03'), new Date('2001-02-03'));

    await writeLayoutTar(dir, second);

    expect(readFileSync(second).equals(readFileSync(first))).toBe(true);
  });

  it('writes a path longer than ustar’s name fields through a pax record', async () => {
    const { dir } = writeLayout();
    const blob = Buffer.from('a sha512 blob');
    const hex = createHash('sha512').update(blob).digest('hex');
    writeFile(dir, `blobs/sha512/${hex}`, blob);
    const out = join(root, 'long.tar');

    await writeLayoutTar(dir, out);

    const archive = await TarArchive.open(out);
    try {
      expect((await archive.read(`blobs/sha512/${hex}`, 100))?.toString()).toBe(blob.toString());
    } finally {
      await archive.close();
    }
    const extracted = join(root, 'extracted');
    mkdirSync(extracted);
    execFileSync('tar', ['-xf', out, '-C', extracted]);
    expect(readFileSync(join(extracted, `blobs/sha512/${hex}`)).equals(blob)).toBe(true);
  });

  it('records a size over ustar’s 8 GiB in a pax record GNU tar reads', () => {
    const size = 9 * 1024 ** 3;
    const path = join(root, 'headers.tar');
    writeFileSync(path, tarHeaders('blobs/sha256/big', size, '0'));

    // The data is not there, so GNU tar complains after listing the entry; the listing counts.
    const listing = spawnSync('tar', ['-tvf', path], { encoding: 'utf8' }).stdout;

    expect(listing).toMatch(new RegExp(`\\s${size}\\s.*blobs/sha256/big$`, 'm'));
  });

  it('refuses a layout holding a symlink, which would upload what it points at', async () => {
    const { dir } = writeLayout();
    symlinkSync('/etc/hostname', join(dir, 'blobs', 'sha256', 'link'));

    await expect(writeLayoutTar(dir, join(root, 'out.tar'))).rejects.toThrow(
      /blobs\/sha256\/link is neither a file nor a directory/,
    );
  });

  it('refuses to overwrite an existing file', async () => {
    const { dir } = writeLayout();
    const out = join(root, 'existing.tar');
    writeFileSync(out, 'keep me');

    await expect(writeLayoutTar(dir, out)).rejects.toThrow(/EEXIST/);
    expect(readFileSync(out, 'utf8')).toBe('keep me');
  });
});

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let length = body.length + 1;
  if (String(length).length + body.length !== length) length += 1;
  return Buffer.from(`${length}${body}`);
}

/** A ustar header; `size` as a number is written in octal, as a buffer verbatim. */
function header(name: string, size: number | Buffer, type: string): Buffer {
  const block = Buffer.alloc(512);
  block.write(name, 0);
  block.write('0000644\0', 100);
  if (typeof size === 'number') block.write(`${size.toString(8).padStart(11, '0')}\0`, 124);
  else size.copy(block, 124);
  block.write(type, 156);
  block.write('ustar\x0000', 257, 'latin1');
  block.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return block;
}

function padded(content: Buffer): Buffer {
  return Buffer.concat([content, Buffer.alloc((512 - (content.length % 512)) % 512)]);
}
