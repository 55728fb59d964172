import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { type FileHandle, lstat, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Reads an OCI image layout written as a tarball (the `oci-archive` a build leaves behind):
 * https://github.com/opencontainers/image-spec/blob/main/image-layout.md. The image's digest is
 * the digest of the first descriptor in the layout's `index.json`. Writes one from a layout
 * directory (writeLayoutTar), for builders that leave a directory (kaniko `--oci-layout-path`).
 */

/** The tarball is not an OCI image layout kiln can upload; the message says why. */
export class OciLayoutError extends Error {
  constructor(tarPath: string, detail: string) {
    super(`${tarPath}: ${detail}`);
    this.name = 'OciLayoutError';
  }
}

/** What `index.json` says the image is: the descriptor of its manifest (or image index). */
export interface OciImageDescriptor {
  readonly digest: string;
  readonly mediaType: string;
  /** Bytes of the manifest blob, not of the tarball. */
  readonly size: number;
}

const LAYOUT_VERSION = '1.0.0';
/** Registries refuse manifests over 4 MiB; `index.json` is a manifest of the same kind. */
const MAX_JSON_BYTES = 4 * 1024 * 1024;
/** The registered digest algorithms and their encodings (image-spec descriptor.md#digests). */
const DIGEST = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;

/**
 * The descriptor of the image in the layout tarball at `tarPath`: its `oci-layout` file must
 * declare imageLayoutVersion 1.0.0 and its `index.json` name at least one manifest, whose blob
 * must be in the tarball with that size and digest. Throws OciLayoutError otherwise.
 */
export async function ociLayoutDigest(tarPath: string): Promise<OciImageDescriptor> {
  const tar = await TarArchive.open(tarPath);
  try {
    const layout = parseJson(tarPath, 'oci-layout', await tar.read('oci-layout', MAX_JSON_BYTES));
    if (layout.imageLayoutVersion !== LAYOUT_VERSION) {
      throw new OciLayoutError(tarPath, `oci-layout: imageLayoutVersion is not ${LAYOUT_VERSION}`);
    }
    const index = parseJson(tarPath, 'index.json', await tar.read('index.json', MAX_JSON_BYTES));
    const manifests = index.manifests;
    if (!Array.isArray(manifests) || manifests.length === 0) {
      throw new OciLayoutError(tarPath, 'index.json names no manifests');
    }
    const descriptor = toDescriptor(tarPath, manifests[0]);
    await verifyBlob(tarPath, tar, descriptor);
    return descriptor;
  } finally {
    await tar.close();
  }
}

function parseJson(tarPath: string, name: string, bytes: Buffer | undefined) {
  if (bytes === undefined) throw new OciLayoutError(tarPath, `the tarball has no ${name} file`);
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new OciLayoutError(tarPath, `${name} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new OciLayoutError(tarPath, `${name} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function toDescriptor(tarPath: string, value: unknown): OciImageDescriptor {
  const { digest, mediaType, size } = (value ?? {}) as Record<string, unknown>;
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    throw new OciLayoutError(tarPath, 'index.json: the first manifest has no valid digest');
  }
  if (typeof mediaType !== 'string' || mediaType === '') {
    throw new OciLayoutError(tarPath, 'index.json: the first manifest has no mediaType');
  }
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
    throw new OciLayoutError(tarPath, 'index.json: the first manifest has no valid size');
  }
  return { digest, mediaType, size };
}

/** The digest kiln records must be the manifest's real digest, not only what index.json claims. */
async function verifyBlob(tarPath: string, tar: TarArchive, descriptor: OciImageDescriptor) {
  const [algorithm, encoded] = descriptor.digest.split(':') as [string, string];
  const blob = await tar.read(`blobs/${algorithm}/${encoded}`, MAX_JSON_BYTES);
  if (blob === undefined) {
    throw new OciLayoutError(
      tarPath,
      `the manifest blob ${descriptor.digest} is not in the tarball`,
    );
  }
  if (
    blob.length !== descriptor.size ||
    createHash(algorithm).update(blob).digest('hex') !== encoded
  ) {
    throw new OciLayoutError(tarPath, `the manifest blob does not match ${descriptor.digest}`);
  }
}

/** Where one regular file's bytes lie in the tarball. */
export interface TarEntry {
  readonly offset: number;
  readonly size: number;
}

const BLOCK = 512;
/** pax and GNU long-name records are a few hundred bytes; more means a corrupt archive. */
const MAX_META_BYTES = 1024 * 1024;

/**
 * An uncompressed tarball (ustar, pax or GNU, as GNU tar and buildah write them) opened for
 * reading. Opening reads the 512-byte headers only, seeking past each entry's data, so a layout
 * with gigabytes of layers costs a few reads per blob; `read` then fetches one file's bytes.
 * Honoured: pax `path` and `size` records, GNU `L` long names, base-256 sizes. Ignored: links,
 * directories, global pax headers, sparse files.
 */
export class TarArchive {
  private constructor(
    private readonly handle: FileHandle,
    readonly files: ReadonlyMap<string, TarEntry>,
  ) {}

  static async open(tarPath: string): Promise<TarArchive> {
    const handle = await open(tarPath, 'r');
    try {
      return new TarArchive(handle, await listFiles(tarPath, handle));
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** The bytes of the file at `path` (leading `./` ignored), undefined when there is none. */
  async read(path: string, maxBytes: number): Promise<Buffer | undefined> {
    const entry = this.files.get(normalise(path));
    if (entry === undefined) return undefined;
    if (entry.size > maxBytes) throw new RangeError(`${path} is larger than ${maxBytes} bytes`);
    return readAt(this.handle, entry.offset, entry.size);
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

async function listFiles(tarPath: string, handle: FileHandle): Promise<Map<string, TarEntry>> {
  const { size: fileSize } = await handle.stat();
  const files = new Map<string, TarEntry>();
  // Attributes a pax `x` or GNU `L` header sets for the entry that follows it.
  let next: { path?: string; size?: number } = {};
  for (let position = 0; ;) {
    const header = await readAt(handle, position, BLOCK);
    // The end-of-archive zero blocks are missing from some writers' output.
    if (header.length === 0 && position > 0) return files;
    if (position === 0 && header[0] === 0x1f && header[1] === 0x8b) {
      throw new OciLayoutError(tarPath, 'the tarball is gzip-compressed; kiln needs a plain tar');
    }
    if (header.length < BLOCK || (header.some((b) => b !== 0) && !checksumMatches(header))) {
      throw new OciLayoutError(
        tarPath,
        position === 0 ? 'not a tar archive' : `corrupt tar header at byte ${position}`,
      );
    }
    // The archive ends with two zero blocks; some writers omit the second one.
    if (header.every((b) => b === 0)) return files;
    const type = header[156] === 0 ? '0' : String.fromCharCode(header[156]!);
    const isMeta = type === 'x' || type === 'L';
    const size = isMeta
      ? numberField(header, 124, 12)
      : (next.size ?? numberField(header, 124, 12));
    const offset = position + BLOCK;
    if (!Number.isSafeInteger(size) || size < 0) {
      throw new OciLayoutError(tarPath, `corrupt tar header at byte ${position}`);
    }
    if (offset + size > fileSize) throw new OciLayoutError(tarPath, 'the tarball is truncated');
    position = offset + Math.ceil(size / BLOCK) * BLOCK;
    if (isMeta) {
      if (size > MAX_META_BYTES) throw new OciLayoutError(tarPath, `oversized ${type} header`);
      const data = await readAt(handle, offset, size);
      next = type === 'x' ? { ...next, ...paxRecords(data) } : { ...next, path: cString(data) };
      continue;
    }
    // '0' regular file, '7' contiguous file (a regular file to every reader but a few).
    if (type === '0' || type === '7') {
      files.set(normalise(next.path ?? headerName(header)), { offset, size });
    }
    next = {};
  }
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await handle.read(buffer, 0, length, position);
  return buffer.subarray(0, bytesRead);
}

/** The header checksum: the byte sum with the checksum field itself counted as spaces. */
function checksumMatches(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  return numberField(header, 148, 8) === sum;
}

/** An octal field, or GNU's base-256 encoding (high bit set) for sizes over 8 GiB. */
function numberField(header: Buffer, start: number, length: number): number {
  if (header[start]! & 0x80) {
    let value = header[start]! & 0x7f;
    for (let i = start + 1; i < start + length; i++) value = value * 256 + header[i]!;
    return value;
  }
  const text = cString(header.subarray(start, start + length)).trim();
  return text === '' ? 0 : parseInt(text, 8);
}

/** ustar splits long names into `prefix` and `name`; GNU tar uses that space for other fields. */
function headerName(header: Buffer): string {
  const name = cString(header.subarray(0, 100));
  const isUstar = header.subarray(257, 263).toString('latin1') === 'ustar\0';
  const prefix = isUstar ? cString(header.subarray(345, 500)) : '';
  return prefix === '' ? name : `${prefix}/${name}`;
}

/** pax extended header records: `<length> <key>=<value>\n`, the length counting the whole record. */
function paxRecords(data: Buffer): { path?: string; size?: number } {
  const result: { path?: string; size?: number } = {};
  for (let start = 0; start < data.length;) {
    const space = data.indexOf(0x20, start);
    const length = parseInt(data.subarray(start, space).toString('latin1'), 10);
    if (space < 0 || !(length > 0)) break;
    const record = data.subarray(space + 1, start + length - 1).toString('utf8');
    const equals = record.indexOf('=');
    const [key, value] = [record.slice(0, equals), record.slice(equals + 1)];
    if (key === 'path') result.path = value;
    if (key === 'size') result.size = Number(value);
    start += length;
  }
  return result;
}

function cString(bytes: Buffer): string {
  const end = bytes.indexOf(0);
  return bytes.subarray(0, end < 0 ? bytes.length : end).toString('utf8');
}

function normalise(path: string): string {
  return path.replace(/^(\.?\/)+/, '').replace(/\/+$/, '');
}

/**
 * Writes the OCI image layout directory `dir` as an uncompressed tarball at `tarPath` (created;
 * an existing file is an error), names relative to `dir`, in sorted order, with fixed owners,
 * modes and times: the same layout always gives the same bytes. ustar headers, and a pax `x`
 * record before an entry whose path does not fit ustar's name fields (`blobs/sha512/…`) or whose
 * size does not fit its 11 octal digits (8 GiB). Only directories and regular files are written:
 * anything else (a symlink, a device) is an OciLayoutError, since a layout has none and a link
 * would upload whatever it points at.
 */
export async function writeLayoutTar(dir: string, tarPath: string): Promise<void> {
  const out = await open(tarPath, 'wx');
  try {
    for (const entry of await layoutEntries(dir, '')) {
      await out.write(tarHeaders(entry.path, entry.size, entry.type));
      if (entry.type === '0') await copyInto(out, join(dir, entry.path), entry.size);
    }
    await out.write(Buffer.alloc(BLOCK * 2));
  } finally {
    await out.close();
  }
}

interface LayoutEntry {
  /** Relative to the layout; a directory's ends with `/`. */
  readonly path: string;
  readonly size: number;
  readonly type: '0' | '5';
}

async function layoutEntries(root: string, under: string): Promise<LayoutEntry[]> {
  const entries: LayoutEntry[] = [];
  const names = (await readdir(join(root, under))).sort();
  for (const name of names) {
    const path = under === '' ? name : `${under}/${name}`;
    const stats = await lstat(join(root, path));
    if (stats.isDirectory()) {
      entries.push({ path: `${path}/`, size: 0, type: '5' });
      entries.push(...(await layoutEntries(root, path)));
    } else if (stats.isFile()) {
      entries.push({ path, size: stats.size, type: '0' });
    } else {
      throw new OciLayoutError(root, `${path} is neither a file nor a directory`);
    }
  }
  return entries;
}

/** The file's bytes, padded to a whole block; it must still be the size listed. */
async function copyInto(out: FileHandle, path: string, size: number): Promise<void> {
  let copied = 0;
  for await (const chunk of createReadStream(path)) {
    copied += (chunk as Buffer).length;
    if (copied > size) break;
    await out.write(chunk as Buffer);
  }
  if (copied !== size) throw new OciLayoutError(path, 'the file changed while it was archived');
  const padding = (BLOCK - (size % BLOCK)) % BLOCK;
  if (padding > 0) await out.write(Buffer.alloc(padding));
}

/** ustar's size field holds 11 octal digits. */
const USTAR_MAX_SIZE = 8 ** 11 - 1;

/**
 * The header block(s) of one entry: a pax `x` header first when ustar cannot hold its path or
 * size (the ustar fields then carry a shortened name and 0, as GNU tar writes them).
 */
export function tarHeaders(path: string, size: number, type: '0' | '5'): Buffer {
  const split = ustarName(path);
  const records = [
    ...(split === undefined ? [paxRecord('path', path)] : []),
    ...(size > USTAR_MAX_SIZE ? [paxRecord('size', String(size))] : []),
  ];
  const entry = ustarHeader(
    split ?? { prefix: '', name: path.slice(-100) },
    size > USTAR_MAX_SIZE ? 0 : size,
    type,
  );
  if (records.length === 0) return entry;
  const body = Buffer.concat(records);
  const pax = ustarHeader({ prefix: '', name: 'PaxHeader' }, body.length, 'x');
  const padding = Buffer.alloc((BLOCK - (body.length % BLOCK)) % BLOCK);
  return Buffer.concat([pax, body, padding, entry]);
}

/** ustar's `prefix` (155 bytes) and `name` (100 bytes), split at a slash; undefined: no fit. */
function ustarName(path: string): { prefix: string; name: string } | undefined {
  if (Buffer.byteLength(path) <= 100) return { prefix: '', name: path };
  for (let slash = path.indexOf('/'); slash > 0; slash = path.indexOf('/', slash + 1)) {
    const [prefix, name] = [path.slice(0, slash), path.slice(slash + 1)];
    if (Buffer.byteLength(prefix) <= 155 && name !== '' && Buffer.byteLength(name) <= 100) {
      return { prefix, name };
    }
  }
  return undefined;
}

/** `<length> <key>=<value>\n`, the length counting the whole record, its own digits too. */
function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body);
  while (String(length).length + Buffer.byteLength(body) !== length) {
    length = String(length).length + Buffer.byteLength(body);
  }
  return Buffer.from(`${length}${body}`);
}

function ustarHeader(
  name: { prefix: string; name: string },
  size: number,
  type: '0' | '5' | 'x',
): Buffer {
  const header = Buffer.alloc(BLOCK);
  const octal = (value: number, start: number, length: number) =>
    header.write(`${value.toString(8).padStart(length - 1, '0')}\0`, start, length, 'latin1');
  header.write(name.name, 0, 100, 'utf8');
  octal(type === '5' ? 0o755 : 0o644, 100, 8);
  octal(0, 108, 8); // uid
  octal(0, 116, 8); // gid
  octal(size, 124, 12);
  octal(0, 136, 12); // mtime: fixed, so the tarball depends on the layout alone
  header.write(type, 156, 1, 'latin1');
  header.write('ustar\0' + '00', 257, 8, 'latin1');
  header.write(name.prefix, 345, 155, 'utf8');
  // The checksum is summed with its own field as spaces, then written as 6 digits, NUL, space.
  header.fill(0x20, 148, 156);
  const sum = header.reduce((total, byte) => total + byte, 0);
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
  return header;
}
