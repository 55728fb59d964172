import { existsSync, mkdtempSync } from 'node:fs';
import { mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogCapture } from '../../../test/support/log-capture.js';
import type { KilnConfig } from '../../config/config.js';
import { diskUsage, LayerCaches } from './layer-caches.js';

const TENANT = '0a9e4c1e-6b1f-4c7e-9a51-2f3d4e5f6a7b';
const [OLD, MIDDLE, NEW] = [
  '11111111-1111-4111-8111-111111111111',
  '22222222-2222-4222-8222-222222222222',
  '33333333-3333-4333-8333-333333333333',
];

describe(LayerCaches.name, () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'kiln-caches-'));
  });
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  function caches(maxBytes: number): LayerCaches {
    const config = { dataDir, localCacheMaxBytes: maxBytes } as KilnConfig;
    return new LayerCaches(config, new LogCapture().logger);
  }

  /** A cache of 64 KiB last used `ageSeconds` ago. */
  async function cacheOf(project: string, ageSeconds: number): Promise<string> {
    const dir = join(dataDir, 'cache', TENANT, project);
    await mkdir(join(dir, 'storage'), { recursive: true });
    await writeFile(join(dir, 'storage', 'layer'), Buffer.alloc(64 * 1024, 1));
    const then = new Date(Date.now() - ageSeconds * 1000);
    await writeFile(join(dir, 'last-used'), '');
    await utimes(join(dir, 'last-used'), then, then);
    return dir;
  }

  it('evicts least recently used caches until the rest fit, keeping the newest', async () => {
    const old = await cacheOf(OLD, 300);
    const middle = await cacheOf(MIDDLE, 200);
    const fresh = await cacheOf(NEW, 100);
    const layerCaches = caches((await diskUsage(fresh)) * 2);

    layerCaches.evictLater();
    await layerCaches.settled();

    expect([old, middle, fresh].map((dir) => existsSync(dir))).toEqual([false, true, true]);
  });

  it('never evicts a cache a build holds, however old', async () => {
    const old = await cacheOf(OLD, 300);
    const fresh = await cacheOf(NEW, 100);
    const layerCaches = caches(1);
    const held = await layerCaches.acquire(TENANT, OLD);
    // Holding it made it the newest: age it again, as a long build's cache would be.
    const then = new Date(Date.now() - 300_000);
    await utimes(join(old, 'last-used'), then, then);
    await utimes(join(fresh, 'last-used'), new Date(), new Date());

    layerCaches.evictLater();
    await layerCaches.settled();
    expect(existsSync(old)).toBe(true);

    await layerCaches.release(held);
    await layerCaches.settled();
    // Released, it is the newest again: the other one goes.
    expect([existsSync(old), existsSync(fresh)]).toEqual([true, false]);
  });

  it('with a bound of 0 evicts every cache nobody holds', async () => {
    const old = await cacheOf(OLD, 300);
    const fresh = await cacheOf(NEW, 100);
    const layerCaches = caches(0);

    layerCaches.evictLater();
    await layerCaches.settled();

    expect([existsSync(old), existsSync(fresh)]).toEqual([false, false]);
    expect(layerCaches.enabled).toBe(false);
  });

  it('makes a build wait while its cache is swept, and sweeps only when no other build holds it', async () => {
    const layerCaches = caches(2 ** 40);
    const first = await layerCaches.acquire(TENANT, NEW);
    const second = await layerCaches.acquire(TENANT, NEW);
    const swept: string[] = [];

    await layerCaches.release(first, () => Promise.resolve(swept.push('first')));
    let finishSweep = () => {};
    const sweeping = layerCaches.release(
      second,
      () =>
        new Promise<void>((done) => {
          finishSweep = () => {
            swept.push('second');
            done();
          };
        }),
    );
    let third: unknown;
    const acquired = layerCaches.acquire(TENANT, NEW).then((lease) => (third = lease));
    await new Promise((done) => setTimeout(done, 50));
    expect(third).toBeUndefined();
    finishSweep();
    await sweeping;
    await acquired;

    expect(swept).toEqual(['second']);
    expect(third).toMatchObject({ projectId: NEW });
  });

  it('sweeps after a clean build only what an earlier, stopped build left: the sweep is owed until the last lease goes', async () => {
    const layerCaches = caches(2 ** 40);
    const swept: string[] = [];
    const sweep = (who: string) => () => Promise.resolve(swept.push(who));

    // A build whose bud exited on its own left nothing: no buildah process after it.
    await layerCaches.release(await layerCaches.acquire(TENANT, NEW), sweep('clean'), false);
    expect(swept).toEqual([]);

    // A stopped build lets go while another holds the cache: the clean one, last, sweeps.
    const stopped = await layerCaches.acquire(TENANT, NEW);
    const clean = await layerCaches.acquire(TENANT, NEW);
    await layerCaches.release(stopped, sweep('stopped'));
    expect(swept).toEqual([]);
    await layerCaches.release(clean, sweep('clean, last'), false);
    expect(swept).toEqual(['clean, last']);

    // Owed even past a release that cannot sweep (a deletion's): the next build's release does.
    await mkdir(join(layerCaches.dirOf(TENANT, NEW), 'storage'), { recursive: true });
    const deleting = await layerCaches.existing(TENANT, NEW);
    const another = await layerCaches.acquire(TENANT, NEW);
    await layerCaches.release(another, sweep('stopped again'));
    await layerCaches.release(deleting!);
    await layerCaches.release(await layerCaches.acquire(TENANT, NEW), sweep('next'), false);
    expect(swept).toEqual(['clean, last', 'next']);
  });

  it('refuses ids that are not ids as paths', () => {
    expect(() => caches(1).dirOf('../x', NEW)).toThrow('not a tenant and project id');
  });
});
