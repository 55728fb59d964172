import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/** A project's layer cache directory under a local runner's data directory. */
export function cacheDirOf(dataDir: string, tenantId: string, projectId: string): string {
  return join(dataDir, 'cache', tenantId, projectId);
}

/** The layer directories of a vfs store (each layer a directory named by its id). */
export function layersIn(storeRoot: string): string[] {
  const dir = join(storeRoot, 'vfs', 'dir');
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** Every image id a project cache holds, intermediate (cache) images included. */
export function imagesIn(cacheDir: string): string[] {
  return listed(cacheDir, ['images', '--all', '--no-trunc', '--quiet']);
}

/** The working containers a project cache holds. */
export function containersIn(cacheDir: string): string[] {
  return listed(cacheDir, ['containers', '--quiet']);
}

function listed(cacheDir: string, args: string[]): string[] {
  const root = join(cacheDir, 'storage');
  if (!existsSync(root)) return [];
  const out = execFileSync(
    'buildah',
    ['--root', root, '--runroot', join(cacheDir, 'runroot'), '--storage-driver', 'vfs', ...args],
    { encoding: 'utf8' },
  );
  return out.split('\n').filter((line) => line !== '');
}

/**
 * The content of `file` in the top layer of an image a registry holds (`name@digest` or
 * `name:tag`, plain HTTP), read from the gzipped tar without any tool.
 */
export async function fileInTopLayer(
  registry: string,
  repository: string,
  reference: string,
  file: string,
): Promise<string | undefined> {
  const manifest = (await (
    await fetch(`http://${registry}/v2/${repository}/manifests/${reference}`, {
      headers: {
        accept:
          'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json',
      },
    })
  ).json()) as { layers: Array<{ digest: string }> };
  const top = manifest.layers.at(-1);
  if (top === undefined) return undefined;
  const blob = Buffer.from(
    await (await fetch(`http://${registry}/v2/${repository}/blobs/${top.digest}`)).arrayBuffer(),
  );
  const tar = gunzipSync(blob);
  for (let offset = 0; offset + 512 <= tar.length;) {
    const name = tar
      .subarray(offset, offset + 100)
      .toString('utf8')
      .replace(/\0.*$/s, '');
    if (name === '') break;
    const size =
      parseInt(
        tar
          .subarray(offset + 124, offset + 136)
          .toString('utf8')
          .trim(),
        8,
      ) || 0;
    const body = offset + 512;
    if (name.replace(/^\.?\//, '') === file) {
      return tar.subarray(body, body + size).toString('utf8');
    }
    offset = body + Math.ceil(size / 512) * 512;
  }
  return undefined;
}
